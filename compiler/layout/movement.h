// Movement ops as index rewrites (tinygrad style): each op is the IndexMap from the index of
// its output to the index of its input, so a chain of them composes into one map and no data
// moves. Semantics follow ONNX with static, already-normalized attributes:
//
//   op          output index (o...) reads input index
//   Reshape     unflatten(flatten(o) over the output shape) over the input shape
//   Permute     input[perm[k]] = o[k]                       (ONNX Transpose)
//   Slice       input[axis] = start + o[axis] * step        (0 <= start, step > 0)
//   Expand      input[d] = (input dim is 1 ? 0 : o[d + lead]) (numpy broadcasting)
//   Unsqueeze   drops the new unit axes
//   Squeeze     inserts the removed unit axes as 0
#pragma once

#include <span>
#include <string>
#include <vector>

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

}  // namespace fbl::layout
