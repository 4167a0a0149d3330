// Movement ops as index rewrites (tinygrad style): each op is the IndexMap from the index of
// its output to the index of its input, so a chain of them composes into one map and no data
// moves. Semantics follow ONNX with static, already-normalized attributes:
//
//   op          output index (o...) reads input index
//   Reshape     unflatten(flatten(o) over the output shape) over the input shape
//   Permute     input[perm[k]] = o[k]                       (ONNX Transpose)
//   Slice       input[axis] = start + o[axis] * step        (step != 0, end exclusive)
//   Expand      input[d] = (input dim is 1 ? 0 : o[d + lead]) (numpy broadcasting)
//   Unsqueeze   drops the new unit axes
//   Squeeze     inserts the removed unit axes as 0
//
// This table is the one statement of what a movement op means. The reference executor
// (ref/kernels_shape.cc) and the strided copies of the plan (codegen/movement_emitters.cc) read
// the same ops through stridedView(), and onnxMovementOp() is the one reader of ONNX nodes.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/layout/index_map.h"

namespace fbl::layout {

struct MovementOp {
  enum class Kind { Reshape, Permute, Slice, Expand, Unsqueeze, Squeeze };
  Kind kind = Kind::Reshape;
  Shape shape;                // Reshape, Expand: the target shape
  std::vector<int64_t> axes;  // Permute: perm; Slice, Unsqueeze, Squeeze: axes
  std::vector<int64_t> starts, ends, steps;  // Slice, one per axis

  static MovementOp reshape(Shape s) { return {Kind::Reshape, std::move(s), {}, {}, {}, {}}; }
  static MovementOp permute(std::vector<int64_t> perm) { return {Kind::Permute, {}, std::move(perm), {}, {}, {}}; }
  static MovementOp slice(std::vector<int64_t> axes, std::vector<int64_t> starts, std::vector<int64_t> ends,
                          std::vector<int64_t> steps = {});
  static MovementOp expand(Shape s) { return {Kind::Expand, std::move(s), {}, {}, {}, {}}; }
  static MovementOp unsqueeze(std::vector<int64_t> axes) { return {Kind::Unsqueeze, {}, std::move(axes), {}, {}, {}}; }
  static MovementOp squeeze(std::vector<int64_t> axes) { return {Kind::Squeeze, {}, std::move(axes), {}, {}, {}}; }

  std::string str() const;  // "Reshape[1,16,4,16]", "Permute(0,2,1,3)", "Slice(3: 0..32 step 1)"
};

// The op's output shape for an input shape; errors name the op and the shapes.
Result<Shape> outputShape(const Shape& input, const MovementOp& op);
// The op's map from output index to input index (domain: output shape, codomain: input).
Result<IndexMap> movementMap(const Shape& input, const MovementOp& op);
// The whole chain's map from the last output's index to the first input's index, composed
// without simplification (so before/after div/mod counts can be compared).
Result<IndexMap> chainMap(const Shape& input, std::span<const MovementOp> chain);
std::string chainToString(std::span<const MovementOp> chain);

// A chain whose map is affine, as an offset and one stride per output dim into its dense
// row-major input: input element = offset + sum_d o[d] * strides[d]. Every single op but a
// Reshape is affine; a Reshape is when it only splits or merges dims the chain keeps dense.
struct StridedView {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};
Result<StridedView> stridedView(const Shape& input, std::span<const MovementOp> chain);
Result<StridedView> stridedView(const Shape& input, const MovementOp& op);

// ---- ONNX nodes as movement ops -------------------------------------------------------------

// ONNX Slice operands resolved against a static input shape: negative indices wrapped,
// out-of-range ones clamped (per the spec, separately for positive and negative steps), so a
// kernel walks start + i*step for i < count on each sliced axis.
struct SliceParams {
  std::vector<int64_t> axes, starts, ends, steps, counts;  // one entry per sliced axis
};
// `axes` empty means 0..n-1, `steps` empty means all 1. Errors name what is wrong (the caller
// adds the node).
Result<SliceParams> normalizeSlice(const Shape& in, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                   const std::vector<int64_t>& steps);

// The integer operand in input `slot` of a node (starts, axes, a target shape), read by the
// caller from where it keeps it: a graph constant, or a tensor the reference executor holds.
// nullopt when the input is absent; an error when it is present but not known.
using IntOperand = std::function<Result<std::optional<std::vector<int64_t>>>(size_t slot)>;

// The movement op of an ONNX node on its input 0 of shape `in`: Transpose's default perm,
// negative axes, Slice's clamping and Expand's two-way broadcast are resolved here. `out` is the
// output shape when shape inference already knows it: Reshape, Flatten, Squeeze and Unsqueeze
// keep the element order, so their op is reshape(*out), and Expand needs no operand. Pad,
// Concat and Split are not one index map of one input (they write constants or join several
// tensors): callers build them from slices (movement_emitters.cc, kernels_shape.cc).
Result<MovementOp> onnxMovementOp(const ir::Node& n, const Shape& in, const IntOperand& ints,
                                  const Shape* out = nullptr);

}  // namespace fbl::layout
