// ONNX Slice parameters resolved against a static input shape: negative indices wrapped,
// out-of-range ones clamped (per the ONNX spec, separately for positive and negative steps),
// so a kernel only walks start + i*step for i < count on each sliced axis.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/ir/tensor.h"
#include "compiler/support/result.h"

namespace fbl::autodiff {

struct SliceParams {
  std::vector<int64_t> axes, starts, steps, counts;  // one entry per sliced axis
};

// `axes` empty means 0..n-1, `steps` empty means all 1. Errors name what is wrong (the caller
// adds the node).
Result<SliceParams> normalizeSlice(const ir::Shape& in, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends,
                                   const std::vector<int64_t>& axes,
                                   const std::vector<int64_t>& steps);

}  // namespace fbl::autodiff
