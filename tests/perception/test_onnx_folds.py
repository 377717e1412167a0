"""The graph rewrites keep each model's outputs (to float rounding) and remove the operators they fold."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from vidagent.perception.onnx_folds import fold

RNG = np.random.default_rng(7)
CHANNELS = 4


def _model(nodes, constants: dict[str, np.ndarray], *, opset: int = 18, output: str = "y") -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "folds",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, 9, 9])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, CHANNELS, 9, 9])],
        [numpy_helper.from_array(np.asarray(value, np.float32), name) for name, value in constants.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _weights(kernel: int = 3) -> dict[str, np.ndarray]:
    return {"w": RNG.normal(size=(CHANNELS, CHANNELS, kernel, kernel)), "b": RNG.normal(size=CHANNELS)}


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _folded(model: onnx.ModelProto) -> tuple[onnx.ModelProto, Counter[str]]:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    made = fold(copy)
    onnx.checker.check_model(copy)
    return copy, made


def _same_outputs(model: onnx.ModelProto, folded: onnx.ModelProto) -> None:
    x = RNG.normal(scale=3.0, size=(1, CHANNELS, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(_run(folded, x), _run(model, x), rtol=1e-5, atol=1e-5)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def test_constants_after_a_convolution_go_into_its_weights_through_identities():
    constants = {**_weights(), "scale": RNG.normal(size=(CHANNELS, 1, 1)), "shift": [0.25]}
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Identity", ["c"], ["c2"]),
                    helper.make_node("Mul", ["scale", "c2"], ["m"]),
                    helper.make_node("Add", ["m", "shift"], ["y"])], constants)
    folded, made = _folded(model)
    assert _ops(folded) == ["Conv"] and made["after_conv"] == 2 and made["identity"] == 1
    assert folded.graph.node[0].output[0] == "y"
    _same_outputs(model, folded)


def test_a_scalar_scale_before_padded_convolutions_goes_into_each_of_them():
    constants = {**_weights(), "w2": RNG.normal(size=(CHANNELS, CHANNELS, 3, 3)), "k": [0.7]}
    model = _model([helper.make_node("Mul", ["x", "k"], ["m"]),
                    helper.make_node("Conv", ["m", "w", "b"], ["c1"], pads=[1, 1, 1, 1]),
                    helper.make_node("Conv", ["m", "w2"], ["c2"], auto_pad="SAME_UPPER"),
                    helper.make_node("Sub", ["c1", "c2"], ["y"])], constants)
    folded, made = _folded(model)
    assert _ops(folded) == ["Conv", "Conv", "Sub"] and made["before_conv"] == 1
    _same_outputs(model, folded)


def test_a_scalar_shift_folds_only_into_convolutions_that_read_no_padding():
    padded = _model([helper.make_node("Add", ["x", "k"], ["a"]),
                     helper.make_node("Conv", ["a", "w", "b"], ["y"], pads=[1, 1, 1, 1])], {**_weights(), "k": [0.5]})
    folded, made = _folded(padded)
    assert _ops(folded) == ["Add", "Conv"] and made["before_conv"] == 0  # the border would differ
    pointwise = _model([helper.make_node("Add", ["x", "k"], ["a"]),
                        helper.make_node("Conv", ["a", "w", "b"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
                       {**_weights(kernel=1), "k": [0.5]})
    folded, made = _folded(pointwise)
    assert _ops(folded) == ["Conv"] and made["before_conv"] == 1
    _same_outputs(pointwise, folded)


def test_a_scalar_read_by_anything_but_convolutions_stays():
    model = _model([helper.make_node("Mul", ["x", "k"], ["m"]),
                    helper.make_node("Conv", ["m", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Add", ["c", "m"], ["y"])], {**_weights(), "k": [0.7]})
    folded, made = _folded(model)
    assert _ops(folded) == ["Mul", "Conv", "Add"] and sum(made.values()) == 0


@pytest.mark.parametrize("k", [1 / 6, 0.16662598])  # exact, and TensorFlow's float16-stored constant
def test_hard_swish_spelt_out_becomes_one_operator_and_its_scale_folds_into_the_next_convolution(k):
    constants = {**_weights(), "k": [k], "three": [3.0], "zero": [0.0], "six": [6.0]}
    nodes = [helper.make_node("Mul", ["k", "x"], ["scaled"]),
             helper.make_node("Add", ["x", "three"], ["shifted"]),
             helper.make_node("Clip", ["shifted", "zero", "six"], ["clipped"]),
             helper.make_node("Mul", ["scaled", "clipped"], ["swish"]),
             helper.make_node("Transpose", ["swish"], ["t"], perm=[0, 1, 3, 2]),
             helper.make_node("Conv", ["t", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    model = _model(nodes, constants)
    folded, made = _folded(model)
    assert _ops(folded) == ["HardSwish", "Transpose", "Conv"]
    assert made["hard_swish"] == 1 and made["before_conv"] == 1
    _same_outputs(model, folded)
    old_opset, made = _folded(_model(nodes, constants, opset=13))  # no HardSwish before opset 14
    assert made["hard_swish"] == 0 and "HardSwish" not in _ops(old_opset)


def test_a_graph_output_is_never_folded_away():
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Mul", ["c", "k"], ["y"])], {**_weights(), "k": [2.0]}, output="y")
    model.graph.output.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, CHANNELS, 9, 9]))
    folded, made = _folded(model)
    assert _ops(folded) == ["Conv", "Mul"] and made["after_conv"] == 0


def test_a_constant_a_caller_may_feed_is_not_folded_and_stays():
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Mul", ["c", "k"], ["y"])], {**_weights(), "k": [2.0]})
    model.graph.input.append(helper.make_tensor_value_info("k", TensorProto.FLOAT, [1]))
    folded, made = _folded(model)
    assert _ops(folded) == ["Conv", "Mul"] and sum(made.values()) == 0
    assert "k" in {item.name for item in folded.graph.initializer}


def test_a_model_with_subgraphs_is_left_as_it_is():
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["z"])], "branch", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Mul", ["c", "k"], ["y"]),
                    helper.make_node("If", ["flag"], ["unused"], then_branch=branch, else_branch=branch)],
                   {**_weights(), "k": [2.0]})
    before = model.SerializeToString()
    assert sum(fold(model).values()) == 0 and model.SerializeToString() == before
