// The windows of MaxPool and AveragePool over X [N, C, d1..dk]: per spatial axis the kernel,
// stride, dilation, the padding before and after, and the output extent, computed once from the
// node's attributes (auto_pad, ceil_mode as PyTorch and ONNX >= 19 apply it: a last window that
// would start in the padding after the input is dropped). The shape rule, the reference kernels
// and decompose-ops (Pad, one strided Slice per kernel tap, then Max or a weighted Sum) share it,
// so they cannot disagree on which elements a window covers.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::ops {

struct PoolAxis {
  int64_t in = 0, kernel = 1, stride = 1, dilation = 1, padBegin = 0, padEnd = 0, out = 0;
  // ceil_mode with one window wider than the padded axis: that window, clipped, is the axis.
  bool wholeAxis = false;
  // The elements the windows span, padding included: (out - 1) * stride + (kernel - 1) * dilation + 1.
  int64_t span() const { return (out - 1) * stride + (kernel - 1) * dilation + 1; }
};

// ONNX's auto_pad SAME_UPPER / SAME_LOWER as explicit pads [begin..., end...] over spatial axes of
// sizes `in`: out = ceil(in / stride), the padding that needs split evenly, the odd element at the
// end (UPPER) or the beginning (LOWER).
std::vector<int64_t> samePads(const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                              const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations, bool upper);

// One entry per spatial axis of `x` (rank >= 3). The error says what is wrong, without the node.
Result<std::vector<PoolAxis>> poolGeometry(const ir::Node& n, const ir::Shape& x);

// AveragePool's divisor per output position (row-major over the spatial output): the window's
// size, or with count_include_pad=0 its elements inside the input. As PyTorch divides, a window
// reaching past the explicit padding (ceil_mode) counts only up to the padding's end.
std::vector<double> averagePoolDivisors(const std::vector<PoolAxis>& axes, bool countIncludePad);

}  // namespace fbl::ops
