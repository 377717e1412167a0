"""A tiny, randomly initialised vision language model in llama.cpp's GGUF formats, written here for tests of
the local GGUF vision path (``vidagent.perception.vision_chat.GGUFVisionChat``).

Two files make the model, as llama.cpp's ``mtmd`` loads them:

- the language model: architecture ``qwen2`` (hidden 64, 2 layers, 4 query heads over 2 key/value heads,
  F16 matrices), with the tokenizer (tokens, merges, token types, special ids, chat template) copied from
  an installed Qwen2.5 GGUF, so the vocabulary embedding (151,936 x 64, tied to the output) is nearly all
  of its ~25 MB;
- the multimodal projector (``mmproj``): architecture ``clip``, projector type ``mlp`` (LLaVA's): a 2-layer
  ViT (hidden 32) over 16-pixel patches of a 32x32 image, 4 image tokens, then ``mm.0`` (linear), GELU
  and ``mm.2`` (linear) into the language model's hidden size (~100 kB).

Weights are seeded normal noise: the model writes gibberish, but every key, tensor name and shape is what
the runtime checks, so a request with images runs end to end. A projector whose output size (``mm.2``'s
rows) is not the language model's hidden size is what mtmd refuses as the wrong projector
(``write_projector(..., projection_dim=...)``).

The files are written by the small GGUF (version 3) writer below, which needs nothing but numpy; the
tokenizer's key/value entries are copied byte for byte from the source file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TEXT_HIDDEN = 64
TEXT_LAYERS = 2
TEXT_HEADS = 4
TEXT_KV_HEADS = 2
TEXT_FFN = 128
TEXT_CONTEXT = 4096

IMAGE_SIZE = 32
PATCH_SIZE = 16
VISION_HIDDEN = 32
VISION_LAYERS = 2
VISION_HEADS = 2
VISION_FFN = 64
PROJECTOR_HIDDEN = 64

TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                  "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id",
                  "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.chat_template")

# GGUF value types and the byte sizes of the fixed-size ones
_UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY = 4, 5, 6, 7, 8, 9
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# ggml tensor types
_GGML_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}
_ALIGNMENT = 32


@dataclass(frozen=True)
class TinyVLM:
    """The files of a tiny model: ``model`` (language model) and ``projector`` (its matching mmproj)."""

    model: Path
    projector: Path


def write_tiny_vlm(folder: str | Path, tokenizer_source: str | Path, *, seed: int = 0) -> TinyVLM:
    """Write ``tiny-qwen2.gguf`` and ``tiny-mmproj.gguf`` into ``folder``, the tokenizer copied from the
    Qwen2 GGUF ``tokenizer_source`` (its weights are not read)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = write_language_model(folder / "tiny-qwen2.gguf", tokenizer_source, seed=seed)
    projector = write_projector(folder / "tiny-mmproj.gguf", projection_dim=TEXT_HIDDEN, seed=seed + 1)
    return TinyVLM(model, projector)


def write_language_model(path: str | Path, tokenizer_source: str | Path, *, seed: int = 0) -> Path:
    """A ``qwen2`` language model of random weights with ``tokenizer_source``'s tokenizer."""
    tokenizer = read_kv_entries(tokenizer_source, TOKENIZER_KEYS)
    if "tokenizer.ggml.tokens" not in tokenizer:
        raise ValueError(f"{tokenizer_source} has no tokenizer")
    vocab = struct.unpack_from("<Q", tokenizer["tokenizer.ggml.tokens"], 8)[0]  # after the value and element types
    rng = np.random.default_rng(seed)
    head_dim = TEXT_HIDDEN // TEXT_HEADS
    kv = [_kv("general.architecture", _STRING, "qwen2"),
          _kv("general.name", _STRING, "tiny random qwen2 (vidagent tests)"),
          _kv("general.file_type", _UINT32, 1),  # mostly F16
          _kv("qwen2.context_length", _UINT32, TEXT_CONTEXT),
          _kv("qwen2.embedding_length", _UINT32, TEXT_HIDDEN),
          _kv("qwen2.block_count", _UINT32, TEXT_LAYERS),
          _kv("qwen2.feed_forward_length", _UINT32, TEXT_FFN),
          _kv("qwen2.attention.head_count", _UINT32, TEXT_HEADS),
          _kv("qwen2.attention.head_count_kv", _UINT32, TEXT_KV_HEADS),
          _kv("qwen2.rope.freq_base", _FLOAT32, 1_000_000.0),
          _kv("qwen2.attention.layer_norm_rms_epsilon", _FLOAT32, 1e-6)]
    kv += [_string(key) + value for key, value in tokenizer.items()]
    # numpy shapes are (out, in); GGUF lists dimensions the other way round (ne0 = in)
    tensors = {"token_embd.weight": _weight(rng, vocab, TEXT_HIDDEN),
               "output_norm.weight": _ones(TEXT_HIDDEN)}  # no output.weight: the output is tied to token_embd
    for layer in range(TEXT_LAYERS):
        blk = f"blk.{layer}"
        tensors.update({
            f"{blk}.attn_norm.weight": _ones(TEXT_HIDDEN),
            f"{blk}.attn_q.weight": _weight(rng, TEXT_HEADS * head_dim, TEXT_HIDDEN),
            f"{blk}.attn_q.bias": _bias(rng, TEXT_HEADS * head_dim),
            f"{blk}.attn_k.weight": _weight(rng, TEXT_KV_HEADS * head_dim, TEXT_HIDDEN),
            f"{blk}.attn_k.bias": _bias(rng, TEXT_KV_HEADS * head_dim),
            f"{blk}.attn_v.weight": _weight(rng, TEXT_KV_HEADS * head_dim, TEXT_HIDDEN),
            f"{blk}.attn_v.bias": _bias(rng, TEXT_KV_HEADS * head_dim),
            f"{blk}.attn_output.weight": _weight(rng, TEXT_HIDDEN, TEXT_HEADS * head_dim),
            f"{blk}.ffn_norm.weight": _ones(TEXT_HIDDEN),
            f"{blk}.ffn_gate.weight": _weight(rng, TEXT_FFN, TEXT_HIDDEN),
            f"{blk}.ffn_up.weight": _weight(rng, TEXT_FFN, TEXT_HIDDEN),
            f"{blk}.ffn_down.weight": _weight(rng, TEXT_HIDDEN, TEXT_FFN),
        })
    return write_gguf(path, kv, tensors)


def write_projector(path: str | Path, *, projection_dim: int = TEXT_HIDDEN, seed: int = 1,
                    image_size: int = IMAGE_SIZE, patch_size: int = PATCH_SIZE) -> Path:
    """An ``mlp`` (LLaVA) projector of random weights whose image tokens have ``projection_dim`` values: the
    language model's hidden size makes it match, any other size makes it the wrong projector."""
    rng = np.random.default_rng(seed)
    positions = (image_size // patch_size) ** 2
    kv = [_kv("general.architecture", _STRING, "clip"),
          _kv("general.name", _STRING, "tiny random clip mlp projector (vidagent tests)"),
          _kv("general.file_type", _UINT32, 1),
          _kv("clip.projector_type", _STRING, "mlp"),
          _kv("clip.has_vision_encoder", _BOOL, True),
          _kv("clip.use_gelu", _BOOL, True),
          _kv("clip.vision.image_size", _UINT32, image_size),
          _kv("clip.vision.patch_size", _UINT32, patch_size),
          _kv("clip.vision.embedding_length", _UINT32, VISION_HIDDEN),
          _kv("clip.vision.feed_forward_length", _UINT32, VISION_FFN),
          _kv("clip.vision.block_count", _UINT32, VISION_LAYERS),
          _kv("clip.vision.projection_dim", _UINT32, projection_dim),
          _kv("clip.vision.attention.head_count", _UINT32, VISION_HEADS),
          _kv("clip.vision.attention.layer_norm_epsilon", _FLOAT32, 1e-5),
          _kv("clip.vision.image_mean", _ARRAY, [0.5, 0.5, 0.5]),
          _kv("clip.vision.image_std", _ARRAY, [0.5, 0.5, 0.5])]
    tensors = {
        "v.patch_embd.weight": _weight(rng, VISION_HIDDEN, 3, patch_size, patch_size),  # a convolution kernel
        "v.patch_embd.bias": _bias(rng, VISION_HIDDEN),
        "v.position_embd.weight": _weight(rng, positions, VISION_HIDDEN),
        "v.pre_ln.weight": _ones(VISION_HIDDEN),
        "v.pre_ln.bias": _zeros(VISION_HIDDEN),
    }
    for layer in range(VISION_LAYERS):
        blk = f"v.blk.{layer}"
        for name, rows, columns in (("attn_q", VISION_HIDDEN, VISION_HIDDEN), ("attn_k", VISION_HIDDEN, VISION_HIDDEN),
                                    ("attn_v", VISION_HIDDEN, VISION_HIDDEN), ("attn_out", VISION_HIDDEN, VISION_HIDDEN),
                                    ("ffn_up", VISION_FFN, VISION_HIDDEN), ("ffn_down", VISION_HIDDEN, VISION_FFN)):
            tensors[f"{blk}.{name}.weight"] = _weight(rng, rows, columns)
            tensors[f"{blk}.{name}.bias"] = _bias(rng, rows)
        for norm in ("ln1", "ln2"):
            tensors[f"{blk}.{norm}.weight"] = _ones(VISION_HIDDEN)
            tensors[f"{blk}.{norm}.bias"] = _zeros(VISION_HIDDEN)
    tensors.update({"mm.0.weight": _weight(rng, PROJECTOR_HIDDEN, VISION_HIDDEN), "mm.0.bias": _bias(rng, PROJECTOR_HIDDEN),
                    "mm.2.weight": _weight(rng, projection_dim, PROJECTOR_HIDDEN), "mm.2.bias": _bias(rng, projection_dim)})
    return write_gguf(path, kv, tensors)


def write_gguf(path: str | Path, kv: list[bytes], tensors: dict[str, np.ndarray]) -> Path:
    """A GGUF v3 file: the header, the encoded key/value entries ``kv``, the tensor infos, then each tensor's
    data (F32 or F16, C order) at a 32-byte aligned offset."""
    path = Path(path)
    infos, offset, blobs = bytearray(), 0, []
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        infos += _string(name) + struct.pack("<I", array.ndim)
        infos += struct.pack(f"<{array.ndim}Q", *reversed(array.shape))
        infos += struct.pack("<IQ", _GGML_TYPES[array.dtype], offset)
        data = array.tobytes()
        blobs.append(data + bytes(-len(data) % _ALIGNMENT))
        offset += len(blobs[-1])
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(kv) + bytes(infos)
    with path.open("wb") as f:
        f.write(head + bytes(-len(head) % _ALIGNMENT))
        for blob in blobs:
            f.write(blob)
    return path


def read_kv_entries(path: str | Path, keys: tuple[str, ...]) -> dict[str, bytes]:
    """The encoded values (type and value, as stored) of ``keys`` in a GGUF file's key/value section."""
    with Path(path).open("rb") as f:
        data = f.read(64 << 20)  # the section comes first (before the tensors); a tokenizer is a few MB
    if data[:4] != b"GGUF" or struct.unpack_from("<I", data, 4)[0] < 2:
        raise ValueError(f"{path} is not a GGUF (v2+) file")
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    found: dict[str, bytes] = {}
    pos = 24
    for _ in range(n_kv):
        length = struct.unpack_from("<Q", data, pos)[0]
        key = data[pos + 8:pos + 8 + length].decode("utf-8")
        start = pos + 8 + length
        end = _skip_value(data, start + 4, struct.unpack_from("<I", data, start)[0])
        if key in keys:
            found[key] = data[start:end]
        pos = end
    return found


def _skip_value(data: bytes, pos: int, kind: int) -> int:
    if kind in _FIXED:
        return pos + _FIXED[kind]
    if kind == _STRING:
        return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
    if kind == _ARRAY:
        element, count = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if element in _FIXED:
            return pos + count * _FIXED[element]
        for _ in range(count):
            pos = _skip_value(data, pos, element)
        return pos
    raise ValueError(f"unknown GGUF value type {kind}")


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, kind: int, value) -> bytes:
    head = _string(key) + struct.pack("<I", kind)
    if kind == _STRING:
        return head + _string(value)
    if kind == _ARRAY:  # of FLOAT32 here
        return head + struct.pack("<IQ", _FLOAT32, len(value)) + struct.pack(f"<{len(value)}f", *value)
    return head + struct.pack({_UINT32: "<I", _INT32: "<i", _FLOAT32: "<f", _BOOL: "<?"}[kind], value)


def _weight(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """A matrix (or kernel) in F16 as converters store them, scaled so activations stay near unit size."""
    fan_in = int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float16)


def _bias(rng: np.random.Generator, size: int) -> np.ndarray:
    return (0.02 * rng.standard_normal(size)).astype(np.float32)


def _ones(size: int) -> np.ndarray:
    return np.ones(size, dtype=np.float32)


def _zeros(size: int) -> np.ndarray:
    return np.zeros(size, dtype=np.float32)
