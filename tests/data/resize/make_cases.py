"""Writes the Resize cases of tests/passes/decompose_ops_test.cc: one single-node ONNX model per case
(X a graph input, scales or sizes constant) with an input and ONNX's reference output
(onnx.reference.ReferenceEvaluator, the specification's own implementation), as
case_N/model.onnx, case_N/input_0.pb, case_N/output_0.pb.

    $HOME/venv-export/bin/python tests/data/resize/make_cases.py tests/data/resize
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

# (input shape, mode, coordinate_transformation_mode, nearest_mode, scales or None, sizes or None, axes or None)
CASES = [
    ((1, 2, 3, 4), "linear", "half_pixel", None, [1, 1, 2, 1.5], None, None),
    ((1, 2, 7, 7), "linear", "half_pixel", None, None, [1, 2, 11, 5], None),  # BEiT's table, up and down
    ((2, 3, 5), "linear", "align_corners", None, None, [2, 3, 9], None),
    ((2, 6, 4), "linear", "pytorch_half_pixel", None, None, [2, 1, 7], None),
    ((1, 1, 4, 6), "linear", "asymmetric", None, [1, 1, 0.5, 2.0], None, None),
    ((1, 2, 3, 4), "nearest", "asymmetric", "floor", [1, 1, 2, 2], None, None),  # torch's 'nearest'
    ((1, 2, 5, 4), "nearest", "half_pixel", "round_prefer_floor", None, [1, 2, 8, 3], None),
    ((3, 5), "nearest", "half_pixel", "round_prefer_ceil", [2.5, 1.6], None, None),
    ((4, 5), "nearest", "align_corners", "ceil", None, [7, 2], None),
    ((2, 4, 6), "linear", "half_pixel", None, None, [9, 3], [2, 1]),  # axes, listed out of order
]


def main(out):
    rng = np.random.default_rng(0)
    for i, (shape, mode, ctm, nearest, scales, sizes, axes) in enumerate(CASES):
        d = os.path.join(out, f"case_{i}")
        os.makedirs(d, exist_ok=True)
        inits, names = [], ["x", "", "", ""]
        if scales is not None:
            inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
            names[2] = "scales"
        else:
            inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
            names[3] = "sizes"
        attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
        if nearest:
            attrs["nearest_mode"] = nearest
        if axes:
            attrs["axes"] = axes
        node = helper.make_node("Resize", names[: 3 if scales is not None else 4], ["y"], name="resize", **attrs)
        x = rng.standard_normal(shape).astype(np.float32)
        ref = ReferenceEvaluator(helper.make_model(helper.make_graph(
            [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits), opset_imports=[helper.make_opsetid("", 19)]))
        (y,) = ref.run(None, {"x": x})
        graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))], inits)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), os.path.join(d, "model.onnx"))
        for name, t in (("input_0.pb", numpy_helper.from_array(x, "x")), ("output_0.pb", numpy_helper.from_array(y, "y"))):
            with open(os.path.join(d, name), "wb") as f:
                f.write(t.SerializeToString())
        print(f"case_{i}: {shape} -> {tuple(y.shape)} {mode} {ctm} {nearest or ''}")


if __name__ == "__main__":
    main(sys.argv[1])
