"""Rewrites of an ONNX graph that onnxruntime's optimiser leaves undone, each the same arithmetic up to float rounding.

onnxruntime runs convolutions on CPU in a blocked channel layout (NCHWc) and fuses a convolution with the bias,
batch normalisation and activation right after it; any other operator between two convolutions makes it convert
the tensor back to the plain layout and again, and run the operator on its own. Models exported from other
frameworks leave such operators in: PaddleOCR's detector (PP-LCNetV3) scales and shifts every activation by a
learned scalar ("learnable affine blocks", a ``Mul`` and an ``Add`` around each hard-swish, 13 % of its time and
most of its layout conversions), and MobileNetV3 graphs converted from TensorFlow spell hard-swish as four
operators. ``fold`` rewrites them so onnxruntime can fuse them:

* ``Identity`` nodes are bypassed (they hide a ``Conv -> Mul`` pair from onnxruntime's own fusions);
* a ``Mul`` or ``Add`` by a per-channel constant right after a convolution goes into its weights and bias;
* a scalar ``Mul`` right before convolutions goes into their weights (zero padding stays zero), a scalar ``Add``
  only where the convolution pads nothing (1x1, as a bias: ``W(x + b) = Wx + b sum(W)``);
* ``k x clip(x + 3, 0, 6)`` (TensorFlow's hard-swish with its constant ``k`` stored near 1/6) becomes
  ``HardSwish(x)`` times ``6k``, which onnxruntime fuses into the convolution before it, the ``6k`` folded into
  the convolutions after it (opset 14 and later only).

Every rewrite keeps the model's function; outputs differ by float rounding (1e-5 on the detector's map) because
products are formed in another order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

FOLDS_VERSION = 1
"""Raise when a rewrite changes, so files written from folded models are written again."""

_HARD_SWISH_MIN_OPSET = 14


def fold(model: Any) -> Counter[str]:
    """Rewrite ``model`` (an ``onnx.ModelProto``) in place; returns how many of each rewrite were made. A model
    with subgraphs (``If``, ``Loop``, ``Scan``: their constants are not followed here) is left as it is."""
    made: Counter[str] = Counter()
    if any(attribute.g.node or attribute.graphs for node in model.graph.node for attribute in node.attribute):
        return made
    graph = _Graph(model)
    made["identity"] = graph.bypass_identities()
    if graph.opset() >= _HARD_SWISH_MIN_OPSET:
        made["hard_swish"] = graph.recognise_hard_swish()
    made["after_conv"] = graph.fold_constants_after_conv()
    made["before_conv"] = graph.fold_scalars_before_conv()
    graph.write_initializers()
    return made


class _Graph:
    """An ONNX graph's nodes with their constants read as arrays, and who produces and consumes each tensor."""

    def __init__(self, model: Any) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.model, self.graph = model, model.graph
        overridable = {item.name for item in self.graph.input}  # an initializer a caller may feed is no constant
        self.constants: dict[str, np.ndarray] = {item.name: numpy_helper.to_array(item)
                                                 for item in self.graph.initializer if item.name not in overridable}
        self._fed = [item for item in self.graph.initializer if item.name in overridable]
        self.graph_outputs = {item.name for item in self.graph.output}
        self._made = 0
        self._index()

    def _index(self) -> None:
        self.producer = {name: node for node in self.graph.node for name in node.output}
        self.consumers: defaultdict[str, list[Any]] = defaultdict(list)
        for node in self.graph.node:
            for name in node.input:
                self.consumers[name].append(node)

    def opset(self) -> int:
        return max((item.version for item in self.model.opset_import if item.domain in ("", "ai.onnx")), default=0)

    # -- helpers ----------------------------------------------------------------------------
    def constant(self, name: str) -> np.ndarray | None:
        value = self.constants.get(name)
        return value if value is not None and value.dtype == np.float32 else None

    def scalar(self, name: str) -> float | None:
        value = self.constant(name)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None

    def new_constant(self, value: np.ndarray, hint: str) -> str:
        self._made += 1
        name = f"{hint}__folded_{self._made}"
        self.constants[name] = np.ascontiguousarray(value, dtype=np.float32)
        return name

    def sole_consumer(self, tensor: str) -> Any | None:
        consumers = self.consumers.get(tensor, [])
        return consumers[0] if len(consumers) == 1 and tensor not in self.graph_outputs else None

    def operand_and_constant(self, node: Any) -> tuple[str, str] | None:
        """A two-input node's (variable input, constant input), or None where not exactly one is constant."""
        if len(node.input) != 2:
            return None
        first, second = (self.constant(name) is not None for name in node.input)
        if first == second:
            return None
        return (node.input[1], node.input[0]) if first else (node.input[0], node.input[1])

    def replace(self, old: list[Any], new: list[Any]) -> None:
        """Put ``new`` where the first of ``old`` stood and drop the rest of ``old``."""
        gone = {id(node) for node in old}
        nodes: list[Any] = []
        for node in self.graph.node:
            if id(node) == id(old[0]):
                nodes.extend(new)
            if id(node) not in gone:
                nodes.append(node)
        del self.graph.node[:]
        self.graph.node.extend(nodes)
        self._index()

    def conv_weight_bias(self, conv: Any) -> tuple[np.ndarray, np.ndarray] | None:
        weight = self.constant(conv.input[1])
        if weight is None:
            return None
        bias = self.constant(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else np.zeros(weight.shape[0],
                                                                                                  np.float32)
        return (weight, bias) if bias is not None else None

    def set_conv(self, conv: Any, data: str, weight: np.ndarray, bias: np.ndarray) -> None:
        inputs = [data, self.new_constant(weight, "weight"), self.new_constant(bias, "bias")]
        del conv.input[:]
        conv.input.extend(inputs)

    def write_initializers(self) -> None:
        """The graph's initializers: the constants some node still reads (the folded-away ones dropped)."""
        read = {name for node in self.graph.node for name in node.input}
        kept = [self.numpy_helper.from_array(value, name) for name, value in self.constants.items() if name in read]
        del self.graph.initializer[:]
        self.graph.initializer.extend(self._fed + kept)

    # -- rewrites ---------------------------------------------------------------------------
    def bypass_identities(self) -> int:
        identities = [node for node in self.graph.node
                      if node.op_type == "Identity" and node.output[0] not in self.graph_outputs]
        source = {node.output[0]: node.input[0] for node in identities}
        for node in self.graph.node:
            for position, name in enumerate(node.input):
                while name in source:
                    name = source[name]
                node.input[position] = name
        if identities:
            self.replace(identities, [])
        return len(identities)

    def fold_constants_after_conv(self) -> int:
        """``Conv -> Mul(c)`` and ``Conv -> Add(c)``, ``c`` a scalar or one value a channel: into the conv."""
        folded = 0
        while (found := self._constant_after_conv()) is not None:
            conv, after, values = found
            weight, bias = self.conv_weight_bias(conv)  # type: ignore[misc]
            if after.op_type == "Mul":
                weight = weight * values.reshape(-1, *([1] * (weight.ndim - 1)))
                bias = bias * values
            else:
                bias = bias + values
            self.set_conv(conv, conv.input[0], weight, bias)
            del conv.output[:]
            conv.output.extend([after.output[0]])
            self.replace([after], [])
            folded += 1
        return folded

    def _constant_after_conv(self) -> tuple[Any, Any, np.ndarray] | None:
        for conv in self.graph.node:
            if conv.op_type != "Conv" or self.conv_weight_bias(conv) is None:
                continue
            after = self.sole_consumer(conv.output[0])
            if after is None or after.op_type not in ("Mul", "Add"):
                continue
            pair = self.operand_and_constant(after)
            if pair is None or pair[0] != conv.output[0]:
                continue
            channels = self.constants[conv.input[1]].shape[0]
            values = _per_channel(self.constants[pair[1]], channels)
            if values is not None:
                return conv, after, values
        return None

    def fold_scalars_before_conv(self) -> int:
        """A scalar ``Mul`` whose every reader is a convolution (directly or through one ``Transpose``): into their
        weights; a scalar ``Add`` read by 1x1 unpadded convolutions only: into their biases."""
        folded = 0
        while (found := self._scalar_before_conv()) is not None:
            node, data, value, convs = found
            for conv in convs:
                weight, bias = self.conv_weight_bias(conv)  # type: ignore[misc]
                if node.op_type == "Mul":
                    weight = weight * np.float32(value)
                else:
                    bias = bias + np.float32(value) * weight.sum(axis=tuple(range(1, weight.ndim)))
                self.set_conv(conv, conv.input[0], weight, bias)
            for reader in self.consumers[node.output[0]]:
                for position, name in enumerate(reader.input):
                    if name == node.output[0]:
                        reader.input[position] = data
            self.replace([node], [])
            folded += 1
        return folded

    def _scalar_before_conv(self) -> tuple[Any, str, float, list[Any]] | None:
        for node in self.graph.node:
            if node.op_type not in ("Mul", "Add"):
                continue
            pair = self.operand_and_constant(node)
            if pair is None or (value := self.scalar(pair[1])) is None or node.output[0] in self.graph_outputs:
                continue
            convs = self._convs_reading(node.output[0])
            if not convs:
                continue
            if node.op_type == "Add" and not all(_pads_nothing(self, conv) for conv in convs):
                continue
            return node, pair[0], value, convs
        return None

    def _convs_reading(self, tensor: str) -> list[Any]:
        """The convolutions reading ``tensor`` as their data, directly or through one ``Transpose``; [] where
        anything else reads it (or a convolution reads it as weight)."""
        convs: list[Any] = []
        for reader in self.consumers.get(tensor, []):
            if reader.op_type == "Transpose" and reader.output[0] not in self.graph_outputs:
                inner = self.consumers.get(reader.output[0], [])
                if not inner or not all(conv.op_type == "Conv" and conv.input[0] == reader.output[0] for conv in inner):
                    return []
                convs.extend(inner)
            elif reader.op_type == "Conv" and reader.input[0] == tensor and tensor not in reader.input[1:]:
                convs.append(reader)
            else:
                return []
        if any(self.conv_weight_bias(conv) is None for conv in convs):
            return []
        return convs

    def recognise_hard_swish(self) -> int:
        """``Mul(Mul(k, x), Clip(Add(x, 3), 0, 6))`` -> ``Mul(HardSwish(x), 6k)``."""
        made = 0
        while (found := self._hard_swish()) is not None:
            nodes, x, k = found
            product = nodes[-1]
            swish = f"{product.output[0]}__hard_swish"
            self.replace(nodes, [self.helper.make_node("HardSwish", [x], [swish]),
                                 self.helper.make_node("Mul", [swish, self.new_constant(np.float32(6.0 * k), "scale")],
                                                       [product.output[0]])])
            made += 1
        return made

    def _hard_swish(self) -> tuple[list[Any], str, float] | None:
        """The four nodes of one hard-swish spelt out (scale, add, clip, product), its input and ``k``."""
        for clip in self.graph.node:
            if clip.op_type != "Clip" or len(clip.input) != 3:
                continue
            if self.scalar(clip.input[1]) != 0.0 or self.scalar(clip.input[2]) != 6.0:
                continue
            add = self.producer.get(clip.input[0])
            pair = self.operand_and_constant(add) if add is not None and add.op_type == "Add" else None
            if pair is None or self.scalar(pair[1]) != 3.0 or self.sole_consumer(add.output[0]) is None:
                continue
            product = self.sole_consumer(clip.output[0])
            if product is None or product.op_type != "Mul" or len(product.input) != 2:
                continue
            other = product.input[0] if product.input[1] == clip.output[0] else product.input[1]
            scaled = self.producer.get(other)
            scale = self.operand_and_constant(scaled) if scaled is not None and scaled.op_type == "Mul" else None
            if scale is None or scale[0] != pair[0] or self.sole_consumer(scaled.output[0]) is None:
                continue
            k = self.scalar(scale[1])
            if k is not None:
                return [scaled, add, clip, product], pair[0], k
        return None


def _per_channel(value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` as one float32 a channel of an NCHW tensor, or None where it broadcasts otherwise."""
    if value.size == 1:
        return np.full(channels, value.reshape(-1)[0], np.float32)
    if value.size == channels and value.shape in ((channels, 1, 1), (1, channels, 1, 1)):
        return value.reshape(-1).astype(np.float32)
    return None


def _attribute(node: Any, name: str, default: Any) -> Any:
    for item in node.attribute:
        if item.name == name:
            from onnx import helper

            return helper.get_attribute_value(item)
    return default


def _pads_nothing(graph: _Graph, conv: Any) -> bool:
    """Whether ``conv`` reads no padding: a 1x1 kernel (``SAME`` pads those by nothing) without explicit pads."""
    weight = graph.constant(conv.input[1])
    return weight is not None and all(size == 1 for size in weight.shape[2:]) and not any(_attribute(conv, "pads", []))
