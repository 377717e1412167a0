"""Reads a TensorFlow.js graph model (``model.json`` and its weight files) as an ONNX model.

A tfjs graph model is a TensorFlow ``GraphDef`` written as JSON, its constants stored in binary
shards described by a weights manifest (float16-quantised floats are widened back to float32
here). ``tfjs_to_onnx`` rewrites the graph node by node into ONNX operators, so the model runs
in onnxruntime, which uses every core and needs no Node.js, with the same arithmetic.

TensorFlow's tensors are NHWC; ONNX's convolutions, pooling and resizing are NCHW. Every tensor
stays NHWC here and those operators are wrapped in a pair of transposes, which onnxruntime's graph
optimiser moves and cancels; axis arguments (reductions, concatenations, slices) therefore keep
their TensorFlow meaning. Only the operators and attributes the supported models use are
converted; anything else raises ``UnsupportedGraph`` naming the node, never a silently different
model. The converted graph then goes through ``onnx_folds.fold`` (operators onnxruntime would run on their own
folded into the convolutions; the same outputs to float rounding).
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Self

import numpy as np

from vidagent.errors import ModelUnavailableError
from vidagent.perception.onnx_folds import fold

OPSET = 18
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]
_INT64_MAX = np.iinfo(np.int64).max
_DTYPES = {"DT_FLOAT": np.float32, "DT_INT32": np.int32, "DT_BOOL": np.bool_, "DT_INT64": np.int64}


class UnsupportedGraph(ValueError):
    """The graph uses an operator or attribute this converter does not handle."""


def read_weights(model: dict[str, Any], folder: Path) -> dict[str, np.ndarray]:
    """Every constant of a tfjs graph model by name, floats as float32."""
    weights: dict[str, np.ndarray] = {}
    for group in model["weightsManifest"]:
        data = b"".join((folder / path).read_bytes() for path in group["paths"])
        offset = 0
        for spec in group["weights"]:
            shape = [int(v) for v in spec["shape"]]
            quantization = spec.get("quantization")
            stored = np.dtype(quantization["dtype"] if quantization else spec["dtype"])
            if quantization and quantization["dtype"] != "float16":
                raise UnsupportedGraph(f"weight {spec['name']}: {quantization['dtype']} quantisation is not supported")
            count = int(np.prod(shape)) if shape else 1
            values = np.frombuffer(data, stored, count, offset).reshape(shape)
            offset += count * stored.itemsize
            weights[spec["name"]] = values.astype(np.dtype(spec["dtype"]))
    return weights


def _attr(node: dict[str, Any], name: str, default: Any = None) -> Any:
    """A node attribute decoded from tfjs JSON (ints, floats, bools, strings, lists, types)."""
    value = node.get("attr", {}).get(name)
    if value is None:
        return default
    if "list" in value:
        items = value["list"]
        if "i" in items:
            return [int(v) for v in items["i"]]
        if "s" in items:
            return [base64.b64decode(v).decode() for v in items["s"]]
        return []
    if "i" in value:
        return int(value["i"])
    if "f" in value:
        return float(value["f"])
    if "b" in value:
        return bool(value["b"])
    if "s" in value:
        return base64.b64decode(value["s"]).decode()
    if "type" in value:
        return value["type"]
    return default


def _tensor_name(reference: str) -> str:
    """A TensorFlow input reference (``node``, ``node:1``, ``^control``) as an ONNX tensor name."""
    name, _, index = reference.partition(":")
    return name if index in ("", "0") else f"{name}:{index}"


class _Converter:
    """Builds the ONNX graph of one tfjs graph model."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.weights = weights
        self.nodes: list[Any] = []
        self.initializers: dict[str, Any] = {}
        self.inputs: list[Any] = []
        self._count = 0
        self.handlers: dict[str, Callable[[dict[str, Any], list[str], str], None]] = {
            "Placeholder": self._placeholder, "Const": self._const, "Identity": self._identity,
            "_FusedConv2D": self._conv, "Conv2D": self._conv, "FusedDepthwiseConv2dNative": self._conv,
            "DepthwiseConv2dNative": self._conv, "Conv2DBackpropInput": self._conv_transpose,
            "MaxPool": self._pool("MaxPool"), "AvgPool": self._pool("AveragePool"), "ResizeBilinear": self._resize,
            "Relu": self._unary("Relu"), "Sigmoid": self._unary("Sigmoid"), "Relu6": self._relu6,
            "Add": self._binary("Add"), "AddV2": self._binary("Add"), "Sub": self._binary("Sub"),
            "Mul": self._binary("Mul"), "Equal": self._binary("Equal"), "AddN": self._add_n, "FloorDiv": self._floor_div,
            "FloorMod": self._floor_mod, "Mean": self._mean, "ConcatV2": self._concat, "Cast": self._cast,
            "Reshape": self._reshape, "ExpandDims": self._expand_dims, "TopKV2": self._top_k,
            "GatherV2": self._gather, "StridedSlice": self._strided_slice, "GatherNd": self._gather_nd,
            "Unpack": self._unpack, "Pack": self._pack, "Squeeze": self._squeeze, "ArgMax": self._arg_max,
            "SquaredDifference": self._squared_difference, "Sqrt": self._unary("Sqrt"), "RealDiv": self._binary("Div"),
        }

    # -- helpers ----------------------------------------------------------------------------
    def add(self, op: str, inputs: list[str], outputs: list[str] | None = None, **attributes: Any) -> str:
        """Append an ONNX node; returns its (first) output's name."""
        if outputs is None:
            self._count += 1
            outputs = [f"_{op.lower()}_{self._count}"]
        self.nodes.append(self.helper.make_node(op, inputs, outputs, **attributes))
        return outputs[0]

    def onnx_type(self, dtype: Any) -> int:
        """ONNX's element type for a NumPy dtype."""
        return self.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def constant(self, values: np.ndarray, hint: str) -> str:
        """An initializer holding ``values`` (a new name derived from ``hint``)."""
        self._count += 1
        name = f"{hint}__{self._count}"
        self.initializers[name] = self.numpy_helper.from_array(np.asarray(values), name)
        return name

    def value(self, reference: str) -> np.ndarray:
        """The value of a constant input (shapes, axes, sizes)."""
        name = _tensor_name(reference)
        if name not in self.weights:
            raise UnsupportedGraph(f"input {reference} must be a constant")
        return self.weights[name]

    # -- operators --------------------------------------------------------------------------
    def _placeholder(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        dims = [int(d.get("size", -1)) for d in _attr_shape(node)]
        dtype = _DTYPES[_attr(node, "dtype", "DT_FLOAT")]
        elem = self.onnx_type(dtype)
        self.inputs.append(self.helper.make_tensor_value_info(out, elem, [d if d >= 0 else None for d in dims]))

    def _const(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        if out not in self.weights:
            raise UnsupportedGraph(f"constant {out} has no stored value")
        # stored as an initializer only where an ONNX node reads it as it is (``convert``): kernels,
        # shapes and axes are read by value and rewritten

    def _identity(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        self.add("Identity", inputs[:1], [out])

    def _unary(self, op: str) -> Callable[[dict[str, Any], list[str], str], None]:
        def convert(node: dict[str, Any], inputs: list[str], out: str) -> None:
            self.add(op, inputs[:1], [out])
        return convert

    def _binary(self, op: str) -> Callable[[dict[str, Any], list[str], str], None]:
        def convert(node: dict[str, Any], inputs: list[str], out: str) -> None:
            self.add(op, inputs[:2], [out])
        return convert

    def _relu6(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        self._activation("Relu6", inputs[0], out)

    def _activation(self, name: str, x: str, out: str) -> None:
        if name == "Relu":
            self.add("Relu", [x], [out])
        elif name == "Relu6":
            low = self.constant(np.float32(0.0), "relu6_min")
            high = self.constant(np.float32(6.0), "relu6_max")
            self.add("Clip", [x, low, high], [out])
        else:
            raise UnsupportedGraph(f"fused activation {name} is not supported")

    def _floor_div(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        if _attr(node, "T") in ("DT_INT32", "DT_INT64"):  # the models divide non-negative indices only
            self.add("Div", inputs[:2], [out])
        else:
            self.add("Floor", [self.add("Div", inputs[:2])], [out])

    def _floor_mod(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        self.add("Mod", inputs[:2], [out], fmod=0 if _attr(node, "T") in ("DT_INT32", "DT_INT64") else 1)

    def _conv(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        op = node["op"]
        if _attr(node, "data_format", "NHWC") != "NHWC":
            raise UnsupportedGraph(f"{node['name']}: only NHWC convolutions are supported")
        padding = _attr(node, "padding")
        if padding not in ("SAME", "VALID"):
            raise UnsupportedGraph(f"{node['name']}: padding {padding} is not supported")
        strides, dilations = _attr(node, "strides", [1, 1, 1, 1]), _attr(node, "dilations", [1, 1, 1, 1])
        kernel = self.value(inputs[1])
        if "Depthwise" in op:
            height, width, channels, multiplier = kernel.shape
            weight = kernel.transpose(2, 3, 0, 1).reshape(channels * multiplier, 1, height, width)
            group = channels
        else:
            weight, group = kernel.transpose(3, 2, 0, 1), 1
        fused = _attr(node, "fused_ops", []) if op.startswith(("_Fused", "Fused")) else []
        conv_inputs = [self.add("Transpose", [inputs[0]], perm=TO_NCHW), self.constant(weight, node["name"] + "_w")]
        if fused and fused[0] == "BiasAdd":
            conv_inputs.append(self.constant(self.value(inputs[2]), node["name"] + "_b"))
            fused = fused[1:]
        elif fused:
            raise UnsupportedGraph(f"{node['name']}: fused {fused} is not supported")
        y = self.add("Conv", conv_inputs, strides=strides[1:3], dilations=dilations[1:3], group=group,
                     auto_pad="SAME_UPPER" if padding == "SAME" else "VALID")
        if len(fused) > 1:
            raise UnsupportedGraph(f"{node['name']}: fused {fused} is not supported")
        if fused:
            activated = f"{node['name']}__{fused[0].lower()}"
            self._activation(fused[0], y, activated)
            y = activated
        self.add("Transpose", [y], [out], perm=TO_NHWC)

    def _conv_transpose(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        """TensorFlow's gradient of a convolution (a transposed convolution): inputs are the output's
        NHWC size, the forward kernel ``[H, W, out, in]`` and the tensor to spread."""
        if _attr(node, "data_format", "NHWC") != "NHWC" or _attr(node, "dilations", [1, 1, 1, 1]) != [1, 1, 1, 1]:
            raise UnsupportedGraph(f"{node['name']}: only undilated NHWC transposed convolutions are supported")
        padding = _attr(node, "padding")
        if padding not in ("SAME", "VALID"):
            raise UnsupportedGraph(f"{node['name']}: padding {padding} is not supported")
        size = [int(v) for v in self.value(inputs[0])]
        weight = self.value(inputs[1]).transpose(3, 2, 0, 1)  # -> [in, out, H, W]
        # with the output's size given, SAME_UPPER crops as TensorFlow's SAME pads the forward convolution
        y = self.add("ConvTranspose", [self.add("Transpose", [inputs[2]], perm=TO_NCHW),
                                       self.constant(weight, node["name"] + "_w")],
                     strides=_attr(node, "strides")[1:3], output_shape=size[1:3],
                     auto_pad="SAME_UPPER" if padding == "SAME" else "VALID")
        self.add("Transpose", [y], [out], perm=TO_NHWC)

    def _pool(self, op: str) -> Callable[[dict[str, Any], list[str], str], None]:
        def convert(node: dict[str, Any], inputs: list[str], out: str) -> None:
            padding = _attr(node, "padding")
            if _attr(node, "data_format", "NHWC") != "NHWC" or padding not in ("SAME", "VALID"):
                raise UnsupportedGraph(f"{node['name']}: only NHWC pooling with SAME or VALID padding is supported")
            kernel, strides = _attr(node, "ksize"), _attr(node, "strides")
            # TensorFlow's average leaves padding out of the count
            extra = {"count_include_pad": 0} if op == "AveragePool" else {}
            y = self.add(op, [self.add("Transpose", inputs[:1], perm=TO_NCHW)], kernel_shape=kernel[1:3],
                         strides=strides[1:3], auto_pad="SAME_UPPER" if padding == "SAME" else "VALID", **extra)
            self.add("Transpose", [y], [out], perm=TO_NHWC)
        return convert

    def _add_n(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        self.add("Sum", inputs, [out])

    def _resize(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        if _attr(node, "align_corners", False):
            mode = "align_corners"
        elif _attr(node, "half_pixel_centers", False):
            mode = "tf_half_pixel_for_nn" if node["op"] == "ResizeNearestNeighbor" else "half_pixel"
        else:
            mode = "asymmetric"
        sizes = self.constant(self.value(inputs[1]).astype(np.int64), node["name"] + "_size")
        y = self.add("Resize", [self.add("Transpose", inputs[:1], perm=TO_NCHW), "", "", sizes], axes=[2, 3],
                     mode="linear", coordinate_transformation_mode=mode)
        self.add("Transpose", [y], [out], perm=TO_NHWC)

    def _mean(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        axes = self.constant(np.atleast_1d(self.value(inputs[1])).astype(np.int64), node["name"] + "_axes")
        self.add("ReduceMean", [inputs[0], axes], [out], keepdims=int(_attr(node, "keep_dims", False)))

    def _concat(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        self.add("Concat", inputs[:-1], [out], axis=int(self.value(inputs[-1])))

    def _cast(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        target = self.onnx_type(_DTYPES[_attr(node, "DstT")])
        self.add("Cast", inputs[:1], [out], to=target)

    def _reshape(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        shape = self.constant(self.value(inputs[1]).astype(np.int64), node["name"] + "_shape")
        self.add("Reshape", [inputs[0], shape], [out])

    def _expand_dims(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        axes = self.constant(np.atleast_1d(self.value(inputs[1])).astype(np.int64), node["name"] + "_axes")
        self.add("Unsqueeze", [inputs[0], axes], [out])

    def _top_k(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        k = self.constant(np.atleast_1d(self.value(inputs[1])).astype(np.int64), node["name"] + "_k")
        self.add("TopK", [inputs[0], k], [out, f"{out}:1_int64"], axis=-1, largest=1,
                 sorted=int(_attr(node, "sorted", True)))
        self.add("Cast", [f"{out}:1_int64"], [f"{out}:1"], to=self.onnx_type(np.int32))

    def _gather(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        if _attr(node, "batch_dims", 0):
            raise UnsupportedGraph(f"{node['name']}: batch_dims is not supported")
        self.add("Gather", inputs[:2], [out], axis=int(self.value(inputs[2])))

    def _int64(self, x: str) -> str:
        return self.add("Cast", [x], to=self.onnx_type(np.int64))

    def _gather_nd(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        self.add("GatherND", [inputs[0], self._int64(inputs[1])], [out])

    def _unpack(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        """TensorFlow's unstack: ``num`` outputs (``out``, ``out:1``, ...), each without the axis."""
        axis, count = _attr(node, "axis", 0), _attr(node, "num")
        axes = self.constant(np.array([axis], np.int64), node["name"] + "_axis")
        names = [f"{out}__part{i}" for i in range(count)]
        if count > 1:
            self.add("Split", inputs[:1], names, axis=axis, num_outputs=count)
        else:
            names = inputs[:1]
        for i, part in enumerate(names):
            self.add("Squeeze", [part, axes], [out if i == 0 else f"{out}:{i}"])

    def _pack(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        """TensorFlow's stack: the inputs, each given a new axis, concatenated along it."""
        axis = _attr(node, "axis", 0)
        axes = self.constant(np.array([axis], np.int64), node["name"] + "_axis")
        self.add("Concat", [self.add("Unsqueeze", [x, axes]) for x in inputs], [out], axis=axis)

    def _squeeze(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        dims = _attr(node, "squeeze_dims", []) or _attr(node, "axis", [])
        if not dims:
            raise UnsupportedGraph(f"{node['name']}: a squeeze of every unit axis is not supported")
        self.add("Squeeze", [inputs[0], self.constant(np.array(dims, np.int64), node["name"] + "_axes")], [out])

    def _arg_max(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        index = self.add("ArgMax", inputs[:1], axis=int(self.value(inputs[1])), keepdims=0)
        target = _DTYPES[_attr(node, "output_type", "DT_INT64")]
        self.add("Cast", [index], [out], to=self.onnx_type(target))

    def _squared_difference(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        difference = self.add("Sub", inputs[:2])
        self.add("Mul", [difference, difference], [out])

    def _strided_slice(self, node: dict[str, Any], inputs: list[str], out: str) -> None:
        for mask in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask"):
            if _attr(node, mask, 0):
                raise UnsupportedGraph(f"{node['name']}: {mask} is not supported")
        begin, end, step = (self.value(name).astype(np.int64) for name in inputs[1:4])
        begin_mask, end_mask = _attr(node, "begin_mask", 0), _attr(node, "end_mask", 0)
        starts, ends = begin.copy(), end.copy()
        for axis in range(len(begin)):
            if begin_mask >> axis & 1:
                starts[axis] = 0 if step[axis] > 0 else _INT64_MAX
            if end_mask >> axis & 1:
                ends[axis] = _INT64_MAX if step[axis] > 0 else -_INT64_MAX
        hint = node["name"]
        self.add("Slice", [inputs[0], self.constant(starts, hint + "_starts"), self.constant(ends, hint + "_ends"),
                           self.constant(np.arange(len(begin), dtype=np.int64), hint + "_axes"),
                           self.constant(step, hint + "_steps")], [out])

    # -- the graph --------------------------------------------------------------------------
    def convert(self, model: dict[str, Any], outputs: list[str]) -> Any:
        for node in model["modelTopology"]["node"]:
            handler = self.handlers.get(node["op"])
            if handler is None:
                raise UnsupportedGraph(f"operator {node['op']} (node {node['name']}) is not supported")
            inputs = [_tensor_name(ref) for ref in node.get("input", []) if not ref.startswith("^")]
            handler(node, inputs, node["name"])
        for node in self.nodes:
            for name in node.input:
                if name in self.weights and name not in self.initializers:
                    self.initializers[name] = self.numpy_helper.from_array(self.weights[name], name)
        graph_outputs = [self.helper.make_tensor_value_info(name, self.onnx_type(np.float32), None)
                         for name in outputs]
        graph = self.helper.make_graph(self.nodes, "tfjs_graph", self.inputs, graph_outputs,
                                       list(self.initializers.values()))
        onnx_model = self.helper.make_model(graph, opset_imports=[self.helper.make_opsetid("", OPSET)],
                                            producer_name="vidagent.tfjs_graph")
        onnx_model.ir_version = 8
        return onnx_model


def _attr_shape(node: dict[str, Any]) -> list[dict[str, Any]]:
    return node.get("attr", {}).get("shape", {}).get("shape", {}).get("dim", [])


def tfjs_to_onnx(model_json: Path, outputs: list[str] | None = None) -> bytes:
    """The serialized ONNX model of the tfjs graph model at ``model_json`` (its weight files beside
    it); ``outputs``: the tensors to expose (default: the model's signature outputs)."""
    model = json.loads(Path(model_json).read_text())
    if model.get("format") != "graph-model":
        raise UnsupportedGraph(f"{model_json} is not a tfjs graph model (format {model.get('format')!r})")
    if outputs is None:
        outputs = [_tensor_name(spec["name"]) for spec in model.get("signature", {}).get("outputs", {}).values()]
    onnx_model = _Converter(read_weights(model, Path(model_json).parent)).convert(model, outputs)
    fold(onnx_model)  # hard-swish as one operator, scalars inside the convolutions: 10-14 % less time a run
    return onnx_model.SerializeToString()


def tfjs_session(model_json: Path, outputs: list[str] | None = None, *, threads: int = 1) -> Any:
    """An onnxruntime session (CPU) running the tfjs graph model at ``model_json`` on ``threads``
    threads; one run at a time per calling thread, so copies on several threads use several cores."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = max(1, int(threads))
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads leave the cores be
    options.log_severity_level = 3  # the converted graph's unused constants are not worth a warning
    return onnxruntime.InferenceSession(tfjs_to_onnx(model_json, outputs), options, providers=["CPUExecutionProvider"])


class InProcessModel:
    """What a model run in this process offers like one run in a worker: ``close()`` (nothing to stop)
    and the context manager, so callers close every model alike."""

    def close(self) -> None:
        """Nothing to stop: the model runs in this process."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InstalledTfjsModel:
    """An installed tfjs graph model run by onnxruntime, loaded (converted, its session made) on the
    first ``run``. Made with a missing file, it raises ``ModelUnavailableError`` saying how to install
    it; a file that does not load raises it on the first run, saying how to reinstall. Thread-safe."""

    def __init__(self, model_dir: Path, files: Iterable[str], model_json: str, *, what: str, install_hint: str,
                 outputs: list[str] | None = None, threads: int = 1) -> None:
        self.model_dir = Path(model_dir).expanduser()
        self.model_json = model_json
        self.what, self.install_hint = what, install_hint
        self.outputs, self.threads = outputs, threads
        if any(not (self.model_dir / name).is_file() for name in files):
            raise ModelUnavailableError(f"the {what} is not installed in {self.model_dir.parent}: run {install_hint}")
        self._session: Any = None
        self._lock = threading.Lock()

    def _ensure_loaded(self) -> Any:
        with self._lock:
            if self._session is None:
                try:
                    self._session = tfjs_session(self.model_dir / self.model_json, self.outputs, threads=self.threads)
                except Exception as error:  # a damaged model file: a clear error, not the converter's traceback
                    raise ModelUnavailableError(f"the {self.what} in {self.model_dir} could not be loaded ({error}); "
                                                f"reinstall it: {self.install_hint}") from error
            return self._session

    def run(self, outputs: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The session's ``run`` (concurrent calls run at once, each on its own thread's share)."""
        session = self._session if self._session is not None else self._ensure_loaded()
        return session.run(outputs, feeds)
