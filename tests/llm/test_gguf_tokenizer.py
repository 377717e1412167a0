"""The local model's tokenizer read from a GGUF file: a tiny byte-level BPE written here, read back and used.

(The real model's tokenizer against llama.cpp's own count is checked in test_llm.py.)"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from vidagent.llm.gguf_tokenizer import GGUFFormatError, load_reply_tokenizer, read_metadata, token_grammar

pytest.importorskip("tokenizers")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte, as byte-level BPE vocabularies store them."""
    kept = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for byte in range(256):
        if byte in kept:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _entry(key: str, kind: int, value) -> bytes:
    head = _string(key) + struct.pack("<I", kind)
    if kind == 8:  # a string
        return head + _string(value)
    if kind == 6:  # a float32
        return head + struct.pack("<f", value)
    item, items = value  # an array: its item type and items
    body = b"".join(_string(v) for v in items) if item == 8 else struct.pack(f"<{len(items)}i", *items)
    return head + struct.pack("<IQ", item, len(items)) + body


def write_tokenizer_gguf(path: Path, *, model: str = "gpt2", pre: str = "qwen2") -> tuple[Path, list[str]]:
    base = list(_bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġt he", "Ġ c", "a t"]
    tokens = base + ["Ġt", "he", "Ġthe", "Ġc", "at"]
    entries = [
        _entry("general.architecture", 8, "qwen2"),
        _entry("general.some_float", 6, 0.5),
        _entry("tokenizer.ggml.model", 8, model),
        _entry("tokenizer.ggml.pre", 8, pre),
        _entry("tokenizer.ggml.tokens", 9, (8, tokens)),
        _entry("tokenizer.ggml.token_type", 9, (5, [1] * len(tokens))),  # a fixed-size array, skipped whole
        _entry("tokenizer.ggml.merges", 9, (8, merges)),
    ]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries)) + b"".join(entries))
    return path, tokens


def test_a_byte_level_bpe_tokenizer_is_read_and_gives_the_merged_tokens(tmp_path: Path) -> None:
    path, tokens = write_tokenizer_gguf(tmp_path / "tiny.gguf")
    meta = read_metadata(path)
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.merges"][2] == "Ġt he"
    tokenizer = load_reply_tokenizer(path)
    assert tokenizer is not None
    ids = tokenizer.encode(" the cat")
    assert [tokens[i] for i in ids] == ["Ġthe", "Ġc", "at"]
    assert tokenizer.decode(ids) == " the cat"
    accented = tokenizer.encode("thé 12")  # bytes with no merge stay one token each (é is two); digits one by one
    assert tokenizer.decode(accented) == "thé 12" and len(accented) == 2 + 2 + 1 + 2
    assert token_grammar(ids) == "root ::= " + " ".join(f"<[{i}]>" for i in ids)


@pytest.mark.parametrize("model, pre", [("llama", "default"), ("gpt2", "some-new-pattern")])
def test_a_tokenizer_of_another_kind_is_not_read(tmp_path: Path, model: str, pre: str) -> None:
    path, _ = write_tokenizer_gguf(tmp_path / "other.gguf", model=model, pre=pre)
    assert load_reply_tokenizer(path) is None  # the reply is then scored over its text


def test_a_file_that_is_not_gguf_or_ends_early_gives_no_tokenizer(tmp_path: Path) -> None:
    other = tmp_path / "model.gguf"
    other.write_bytes(b"not a gguf file at all")
    assert load_reply_tokenizer(other) is None
    path, _ = write_tokenizer_gguf(tmp_path / "cut.gguf")
    path.write_bytes(path.read_bytes()[:200])
    assert load_reply_tokenizer(path) is None
    assert load_reply_tokenizer(tmp_path / "missing.gguf") is None


def _header(entries: int, tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, entries)


HOSTILE_HEADERS = {  # issue 55: each was allocated, recursed or looped over before any check
    "a string of 2^40 bytes": _header(1) + _string("tokenizer.ggml.model") + struct.pack("<IQ", 8, 2**40) + b"x" * 64,
    "a string of 2^34 bytes": _header(1) + _string("tokenizer.ggml.model") + struct.pack("<IQ", 8, 2**34) + b"x" * 64,
    "an unread string of 2^40 bytes": _header(1) + _string("general.name") + struct.pack("<IQ", 8, 2**40),
    "arrays nested 100,000 deep": _header(1) + _string("tokenizer.ggml.tokens") + struct.pack("<I", 9)
    + struct.pack("<IQ", 9, 1) * 100_000 + struct.pack("<IQ", 4, 0),
    "an array of 2^60 strings": _header(1) + _string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2**60)
    + _string("x"),
    "an unread array of 2^60 integers": _header(1) + _string("general.ids") + struct.pack("<IIQ", 9, 5, 2**60),
    "2^40 metadata entries": _header(2**40) + _string("a") + struct.pack("<II", 4, 1),
    "2^40 tensors": _header(1, tensors=2**40) + _string("a") + struct.pack("<II", 4, 1),
}


@pytest.mark.parametrize("name", HOSTILE_HEADERS)
def test_a_header_declaring_more_than_the_file_holds_is_refused_before_allocating(tmp_path: Path, name: str) -> None:
    import tracemalloc

    path = tmp_path / "hostile.gguf"
    path.write_bytes(HOSTILE_HEADERS[name])
    tracemalloc.start()
    try:
        with pytest.raises(GGUFFormatError, match="GGUF"):
            read_metadata(path)
        assert load_reply_tokenizer(path) is None  # the fallback: replies scored over their text
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
