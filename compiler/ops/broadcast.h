// Numpy-style broadcasting, shared by every elementwise shape rule and by the reference kernels.
//
// Two shapes broadcast when, aligned at their last dimension, each pair of dimensions is equal
// or one of them is 1; the result takes the larger rank and, per dimension, the non-1 size.
// Example: [2,1,4] and [3,1] give [2,3,4]; [2,3] and [4] do not broadcast.
#pragma once

#include <optional>
#include <vector>

#include "compiler/ir/tensor.h"

namespace fbl::ops {

// nullopt when the shapes do not broadcast.
std::optional<ir::Shape> broadcastShapes(const ir::Shape& a, const ir::Shape& b);
std::optional<ir::Shape> broadcastShapes(const std::vector<ir::Shape>& shapes);

// True when `from` broadcasts to exactly `to` (one-directional, as Gemm's C and Expand need).
bool broadcastsTo(const ir::Shape& from, const ir::Shape& to);

// Strides (in elements) for reading a dense tensor of shape `in` at the indices of `out`, with
// 0 on broadcast dimensions; the result has out.size() entries. `in` must broadcast to `out`.
std::vector<int64_t> broadcastStrides(const ir::Shape& in, const ir::Shape& out);

}  // namespace fbl::ops
