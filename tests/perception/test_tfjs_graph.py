"""The tfjs graph model -> ONNX converter on small hand-written graphs, checked against NumPy's
reading of TensorFlow's semantics (SAME padding, NHWC, depthwise kernels, float16 weights, the
top-k decoding tail). The real model (CenterNet) is checked against its Node runtime in
test_detector.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from vidagent.perception.tfjs_graph import UnsupportedGraph, read_weights, tfjs_to_onnx


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def write_model(folder: Path, nodes: list[dict], weights: dict[str, np.ndarray], outputs: list[str],
                half: frozenset[str] = frozenset()) -> Path:
    """A tfjs graph model with ``weights`` in one shard (those named in ``half`` stored as float16)."""
    manifest, blobs = [], []
    for name, value in weights.items():
        spec = {"name": name, "shape": list(value.shape), "dtype": "int32" if value.dtype == np.int32 else "float32"}
        if name in half:
            spec["quantization"] = {"dtype": "float16", "original_dtype": "float32"}
            blobs.append(value.astype(np.float16).tobytes())
        else:
            blobs.append(value.tobytes())
        manifest.append(spec)
    (folder / "model.bin").write_bytes(b"".join(blobs))
    consts = [{"name": name, "op": "Const", "attr": {}} for name in weights]
    model = {"format": "graph-model", "modelTopology": {"node": consts + nodes},
             "weightsManifest": [{"paths": ["model.bin"], "weights": manifest}],
             "signature": {"outputs": {name: {"name": name} for name in outputs}}}
    path = folder / "model.json"
    path.write_text(json.dumps(model))
    return path


def placeholder(name: str, shape: list[int]) -> dict:
    return {"name": name, "op": "Placeholder",
            "attr": {"dtype": {"type": "DT_FLOAT"}, "shape": {"shape": {"dim": [{"size": str(d)} for d in shape]}}}}


def conv_attrs(stride: int, padding: str, fused: list[str] | None = None) -> dict:
    attrs = {"strides": {"list": {"i": ["1", str(stride), str(stride), "1"]}}, "padding": {"s": _b64(padding)},
             "data_format": {"s": _b64("NHWC")}, "dilations": {"list": {"i": ["1", "1", "1", "1"]}}}
    if fused is not None:
        attrs["fused_ops"] = {"list": {"s": [_b64(op) for op in fused]}}
        attrs["num_args"] = {"i": "1"}
    return attrs


def run(path: Path, feeds: dict[str, np.ndarray], outputs: list[str] | None = None) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(tfjs_to_onnx(path, outputs), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def tf_same_pad(x: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """NHWC ``x`` padded as TensorFlow pads for SAME (the odd pixel after)."""
    pads = []
    for size in x.shape[1:3]:
        out = -(-size // stride)
        total = max((out - 1) * stride + kernel - size, 0)
        pads.append((total // 2, total - total // 2))
    return np.pad(x, [(0, 0), pads[0], pads[1], (0, 0)])


def conv_reference(x: np.ndarray, kernel: np.ndarray, stride: int, depthwise: bool = False) -> np.ndarray:
    k = kernel.shape[0]
    padded = tf_same_pad(x, k, stride)
    out_h, out_w = -(-x.shape[1] // stride), -(-x.shape[2] // stride)
    channels = kernel.shape[2] * kernel.shape[3] if depthwise else kernel.shape[3]
    y = np.zeros((1, out_h, out_w, channels), np.float32)
    for i in range(out_h):
        for j in range(out_w):
            patch = padded[0, i * stride:i * stride + k, j * stride:j * stride + k, :]
            if depthwise:
                y[0, i, j] = np.einsum("hwc,hwcm->cm", patch, kernel).reshape(-1)
            else:
                y[0, i, j] = np.einsum("hwc,hwco->o", patch, kernel)
    return y


def test_convolutions_activations_and_mean_follow_tensorflow(tmp_path):
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(3, 3, 2, 4)).astype(np.float32)
    bias = rng.normal(size=4).astype(np.float32)
    depthwise = rng.normal(size=(3, 3, 4, 1)).astype(np.float32)
    weights = {"k": kernel, "b": bias, "dw": depthwise, "axes": np.array([1, 2], np.int32)}
    nodes = [placeholder("x", [1, 7, 6, 2]),
             {"name": "conv", "op": "_FusedConv2D", "input": ["x", "k", "b"], "attr": conv_attrs(2, "SAME", ["BiasAdd", "Relu"])},
             {"name": "depthwise", "op": "DepthwiseConv2dNative", "input": ["conv", "dw"], "attr": conv_attrs(1, "SAME")},
             {"name": "clip", "op": "Relu6", "input": ["depthwise"]},
             {"name": "mean", "op": "Mean", "input": ["clip", "axes"], "attr": {"keep_dims": {"b": True}}}]
    path = write_model(tmp_path, nodes, weights, ["clip", "mean"], half=frozenset({"k"}))
    x = rng.normal(size=(1, 7, 6, 2)).astype(np.float32) * 3
    clip, mean = run(path, {"x": x})
    stored_kernel = kernel.astype(np.float16).astype(np.float32)  # as quantised in the shard
    first = np.maximum(conv_reference(x, stored_kernel, 2) + bias, 0)
    expected = np.clip(conv_reference(first, depthwise, 1, depthwise=True), 0, 6)
    np.testing.assert_allclose(clip, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mean, expected.mean(axis=(1, 2), keepdims=True), rtol=1e-4, atol=1e-5)
    assert read_weights(json.loads(path.read_text()), tmp_path)["k"].dtype == np.float32


def test_top_k_decoding_tail(tmp_path):
    """Flatten NHWC scores, take the top 3, split each index into cell and class, and gather."""
    weights = {"flat": np.array([1, -1], np.int32), "k": np.array(3, np.int32), "classes": np.array(3, np.int32),
               "dim": np.array(-1, np.int32), "axis": np.array(-1, np.int32), "zero": np.array(0, np.int32),
               "begin": np.array([0, 1], np.int32), "end": np.array([0, 3], np.int32), "step": np.array([1, 1], np.int32)}
    nodes = [placeholder("scores", [1, 2, 2, 3]),
             {"name": "rows", "op": "Reshape", "input": ["scores", "flat"]},
             {"name": "top", "op": "TopKV2", "input": ["rows", "k"], "attr": {"sorted": {"b": True}}},
             {"name": "cell", "op": "FloorDiv", "input": ["top:1", "classes"], "attr": {"T": {"type": "DT_INT32"}}},
             {"name": "cls", "op": "FloorMod", "input": ["top:1", "classes"], "attr": {"T": {"type": "DT_INT32"}}},
             {"name": "cellf", "op": "Cast", "input": ["cell"], "attr": {"DstT": {"type": "DT_FLOAT"}}},
             {"name": "clsf", "op": "Cast", "input": ["cls"], "attr": {"DstT": {"type": "DT_FLOAT"}}},
             {"name": "a", "op": "ExpandDims", "input": ["top", "dim"]},
             {"name": "b", "op": "ExpandDims", "input": ["cellf", "dim"]},
             {"name": "c", "op": "ExpandDims", "input": ["clsf", "dim"]},
             {"name": "table", "op": "ConcatV2", "input": ["a", "b", "c", "axis"]},
             {"name": "first", "op": "GatherV2", "input": ["table", "zero", "zero"]},
             {"name": "tail", "op": "StridedSlice", "input": ["first", "begin", "end", "step"],
              "attr": {"begin_mask": {"i": "1"}, "end_mask": {"i": "1"}}}]
    path = write_model(tmp_path, nodes, weights, ["table", "tail"])
    scores = np.array([0.1, 0.9, 0.2, 0.3, 0.05, 0.8, 0.7, 0.0, 0.6, 0.4, 0.5, 0.15], np.float32).reshape(1, 2, 2, 3)
    table, tail = run(path, {"scores": scores})
    np.testing.assert_allclose(table[0], [[0.9, 0, 1], [0.8, 1, 2], [0.7, 2, 0]])
    np.testing.assert_allclose(tail, table[0][:, 1:3])


def test_unknown_operators_are_refused_by_name(tmp_path):
    nodes = [placeholder("x", [1, 4, 4, 1]), {"name": "odd/node", "op": "Einsum", "input": ["x", "x"]}]
    path = write_model(tmp_path, nodes, {}, ["odd/node"])
    with pytest.raises(UnsupportedGraph, match="Einsum.*odd/node"):
        tfjs_to_onnx(path)


def test_a_layers_model_is_not_a_graph_model(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"format": "layers-model", "modelTopology": {}, "weightsManifest": []}))
    with pytest.raises(UnsupportedGraph, match="not a tfjs graph model"):
        tfjs_to_onnx(path)
