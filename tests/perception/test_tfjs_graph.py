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


def test_pooling_transposed_convolution_and_sums_follow_tensorflow(tmp_path):
    rng = np.random.default_rng(1)
    kernel = rng.normal(size=(3, 3, 2, 4)).astype(np.float32)  # a transposed convolution's [H, W, out, in]
    weights = {"size": np.array([1, 6, 6, 2], np.int32), "k": kernel}
    pool = {"ksize": {"list": {"i": ["1", "3", "3", "1"]}}, "strides": {"list": {"i": ["1", "2", "2", "1"]}},
            "padding": {"s": _b64("SAME")}, "data_format": {"s": _b64("NHWC")}}
    nodes = [placeholder("x", [1, 5, 5, 4]),
             {"name": "avg", "op": "AvgPool", "input": ["x"], "attr": pool},
             {"name": "up", "op": "Conv2DBackpropInput", "input": ["size", "k", "avg"], "attr": conv_attrs(2, "SAME")},
             {"name": "total", "op": "AddN", "input": ["up", "up", "up"]}]
    path = write_model(tmp_path, nodes, weights, ["avg", "total"])
    x = rng.normal(size=(1, 5, 5, 4)).astype(np.float32)
    avg, total = run(path, {"x": x})
    # SAME pooling of 5 by 3 with stride 2 pads one pixel each side, and leaves it out of the mean
    expected_avg = np.stack([np.stack([x[0, max(0, 2 * i - 1):2 * i + 2, max(0, 2 * j - 1):2 * j + 2].mean(axis=(0, 1))
                                       for j in range(3)]) for i in range(3)])[None]
    np.testing.assert_allclose(avg, expected_avg, rtol=1e-5, atol=1e-6)
    full = np.zeros((7, 7, 2), np.float32)  # (3 - 1) * 2 + 3: every input pixel spreads its kernel
    for i in range(3):
        for j in range(3):
            full[2 * i:2 * i + 3, 2 * j:2 * j + 3] += np.einsum("hwoc,c->hwo", kernel, expected_avg[0, i, j])
    # TensorFlow's SAME puts the odd padding pixel after: the output is the first 6 of 7
    np.testing.assert_allclose(total[0], 3 * full[:6, :6], rtol=1e-4, atol=1e-4)


def test_keypoint_decoding_tail(tmp_path):
    """A heatmap's peak (ArgMax, FloorDiv, Pack, GatherNd), unstacked, and a distance from it."""
    weights = {"flat": np.array([1, 12], np.int32), "axis": np.array(1, np.int32), "width": np.array(4, np.int32),
               "zero": np.array([0], np.int32), "point": np.array([[1.0, 1.0]], np.float32)}
    nodes = [placeholder("heat", [1, 3, 4]),
             {"name": "rows", "op": "Reshape", "input": ["heat", "flat"]},
             {"name": "peak", "op": "ArgMax", "input": ["rows", "axis"], "attr": {"output_type": {"type": "DT_INT32"}}},
             {"name": "y", "op": "FloorDiv", "input": ["peak", "width"], "attr": {"T": {"type": "DT_INT32"}}},
             {"name": "x", "op": "FloorMod", "input": ["peak", "width"], "attr": {"T": {"type": "DT_INT32"}}},
             {"name": "at", "op": "Pack", "input": ["zero", "y", "x"], "attr": {"axis": {"i": "1"}}},
             {"name": "value", "op": "GatherNd", "input": ["heat", "at"]},
             {"name": "yx", "op": "Pack", "input": ["y", "x"], "attr": {"axis": {"i": "1"}}},
             {"name": "yxf", "op": "Cast", "input": ["yx"], "attr": {"DstT": {"type": "DT_FLOAT"}}},
             {"name": "parts", "op": "Unpack", "input": ["yxf"], "attr": {"axis": {"i": "1"}, "num": {"i": "2"}}},
             {"name": "dy", "op": "SquaredDifference", "input": ["parts", "point"]},
             {"name": "dx", "op": "SquaredDifference", "input": ["parts:1", "point"]},
             {"name": "sum", "op": "AddV2", "input": ["dy", "dx"]},
             {"name": "distance", "op": "Sqrt", "input": ["sum"]},
             {"name": "half", "op": "RealDiv", "input": ["distance", "point"]},
             {"name": "flat1", "op": "Squeeze", "input": ["value"], "attr": {"squeeze_dims": {"list": {"i": ["0"]}}}}]
    path = write_model(tmp_path, nodes, weights, ["flat1", "distance", "half"])
    heat = np.zeros((1, 3, 4), np.float32)
    heat[0, 2, 3] = 0.9  # the peak: row 2, column 3
    value, distance, half = run(path, {"heat": heat})
    np.testing.assert_allclose(value, 0.9)
    np.testing.assert_allclose(distance, [[np.sqrt((2 - 1) ** 2 + (3 - 1) ** 2)] * 2])
    np.testing.assert_allclose(half, distance)


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
