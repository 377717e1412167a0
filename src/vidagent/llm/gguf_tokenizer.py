"""The local model's own tokenizer, read from its GGUF file, so a given reply is scored in the tokens the model reads.

``LocalGGUFBackend`` scores a reply it is given (an option's text) by holding llama.cpp to it with a grammar and
reading each token's log-probability. llama.cpp (as ``xllamacpp`` serves it) has no tokenize call and gives no
log-probabilities for prompt tokens, so the reply is generated under the grammar. A grammar over the reply's
*text* lets llama.cpp spell it in any tokens that fit, and greedy choice among them often takes pieces (" ",
"organ", "izing" for " organizing"; " ", "kit", "ch", "en" for " kitchen") that the model never reads in training:
each costs -10 to -16, so the score measured the spelling as much as the words, over 2-4 times the tokens (and
time). A grammar over the token ids the model's tokenizer gives the text (llama.cpp's ``<[id]>`` terminals)
scores the reply as the model would read it.

The GGUF file holds the tokenizer: ``tokenizer.ggml.model`` (``gpt2``: byte-level BPE, as Qwen2, Llama 3 and
most recent models use), its tokens and merges, and ``tokenizer.ggml.pre`` (which pre-tokenizing pattern). The
BPE itself runs in the ``tokenizers`` package (a dependency of faster-whisper). A tokenizer of another kind
(SentencePiece ``llama``) or an unknown pattern gives ``None``: the caller scores over the text, as before.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import Any, BinaryIO, Sequence

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
WANTED = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.merges")

# llama.cpp's pre-tokenizer patterns by ``tokenizer.ggml.pre`` (the same regular expressions the models' own
# tokenizer.json files split text with before byte-level BPE).
_LETTERS_FIRST = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
_TAIL = r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
PATTERNS = {
    "qwen2": _LETTERS_FIRST + r"|\p{N}" + _TAIL,
    "llama-bpe": _LETTERS_FIRST + r"|\p{N}{1,3}" + _TAIL,
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}

# GGUF value types: struct format and size of the fixed-size ones; 8 is a string, 9 an array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GGUFFormatError(ValueError):
    """The file is not GGUF metadata this reader understands."""


_MIN_SIZES = {_STRING: 8, _ARRAY: 12, **{kind: struct.calcsize(fmt) for kind, fmt in _SCALARS.items()}}
_MIN_ENTRY = 8 + 4 + 1  # a metadata entry: its key's length, its type, one byte of value at least
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8  # a tensor's name length, dimension count, type and offset


class _Header:
    """A GGUF file's metadata, read forward; every length and count it declares is checked against the bytes
    the file has left before anything is allocated (a string of 2^40 bytes, an array of 2^60 items)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._size = os.fstat(stream.fileno()).st_size
        self._position = stream.tell()

    def left(self) -> int:
        return self._size - self._position

    def read(self, size: int) -> bytes:
        if size > self._size - self._position:
            raise GGUFFormatError(f"the GGUF file declares {size} bytes where {self.left()} are left")
        data = self._stream.read(size)
        if len(data) != size:
            raise GGUFFormatError("the GGUF file ends inside its metadata")
        self._position += size
        return data

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))

    def skip(self, size: int) -> None:
        if size > self.left():
            raise GGUFFormatError(f"the GGUF file declares {size} bytes where {self.left()} are left")
        self._stream.seek(size, 1)
        self._position += size

    def count(self, count: int, each: int, what: str) -> int:
        """``count`` items of at least ``each`` bytes, refused where the file is too short to hold them."""
        if count * each > self.left():
            raise GGUFFormatError(f"the GGUF file declares {count} {what}, more than its {self.left()} bytes hold")
        return count

    def string(self, keep: bool = True) -> str | None:
        (length,) = self.unpack("<Q")
        if not keep:
            self.skip(length)
            return None
        return self.read(length).decode("utf-8", errors="replace")

    def value(self, kind: int, keep: bool) -> Any:
        """One value; an array holds scalars or strings (an array of arrays is refused, as llama.cpp does)."""
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])[0]
        if kind == _STRING:
            return self.string(keep)
        if kind != _ARRAY:
            raise GGUFFormatError(f"unknown GGUF value type {kind}")
        item_kind, count = self.unpack("<IQ")
        if item_kind not in _MIN_SIZES or item_kind == _ARRAY:
            raise GGUFFormatError(f"GGUF arrays of type {item_kind} are not read (nested arrays are not GGUF)")
        self.count(count, _MIN_SIZES[item_kind], "array items")
        if item_kind in _SCALARS and not keep:  # skipped whole: a fixed-size array is read in one seek
            self.skip(_MIN_SIZES[item_kind] * count)
            return None
        items = [self.value(item_kind, keep) for _ in range(count)]
        return items if keep else None


def read_metadata(path: Path, keys: Sequence[str] = WANTED) -> dict[str, Any]:
    """The values of ``keys`` among a GGUF file's metadata (the tensors are not read). A header that declares
    more than the file holds is refused with ``GGUFFormatError`` before anything is allocated."""
    wanted = set(keys)
    found: dict[str, Any] = {}
    with path.open("rb") as stream:
        header = _Header(stream)
        if header.left() < 4 or header.read(4) != GGUF_MAGIC:
            raise GGUFFormatError(f"{path} is not a GGUF file")
        version, tensors, count = header.unpack("<IQQ")
        if version < 2:
            raise GGUFFormatError(f"GGUF version {version} is too old to read")
        header.count(count, _MIN_ENTRY, "metadata entries")
        header.count(tensors, _MIN_TENSOR_INFO, "tensors")
        for _ in range(count):
            key = header.string()
            (kind,) = header.unpack("<I")
            value = header.value(kind, key in wanted)
            if key in wanted:
                found[key] = value
                if len(found) == len(wanted):
                    break
    return found


class ReplyTokenizer:
    """Token ids of a reply's text, as the model's own tokenizer gives them."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=False))


def load_reply_tokenizer(path: Path) -> ReplyTokenizer | None:
    """The GGUF model's byte-level BPE tokenizer, or None where it is of another kind or cannot be built (the
    reason is logged): scoring then holds the model to the reply's text instead."""
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        log.info("no tokenizers package: replies are scored over their text")
        return None
    try:
        meta = read_metadata(path)
    except (OSError, GGUFFormatError) as exc:
        log.info("cannot read the tokenizer of %s (%s): replies are scored over their text", path.name, exc)
        return None
    kind, pre = meta.get("tokenizer.ggml.model"), meta.get("tokenizer.ggml.pre", "gpt2")
    tokens, merges = meta.get("tokenizer.ggml.tokens"), meta.get("tokenizer.ggml.merges")
    if kind != "gpt2" or pre not in PATTERNS or not tokens or not merges:
        log.info("%s: a %s tokenizer (pre-tokenizer %s) is not read here: replies are scored over their text",
                 path.name, kind, pre)
        return None
    vocab = {token: index for index, token in enumerate(tokens)}
    pairs = [tuple(merge.split(" ", 1)) for merge in merges]
    tokenizer = Tokenizer(models.BPE(vocab, pairs, ignore_merges=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERNS[pre]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    return ReplyTokenizer(tokenizer)


def token_grammar(ids: Sequence[int]) -> str:
    """A GBNF grammar that allows exactly these tokens in this order (llama.cpp's token terminals)."""
    return "root ::= " + " ".join(f"<[{index}]>" for index in ids)
