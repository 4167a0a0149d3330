#include "compiler/autodiff/slice_params.h"

#include <algorithm>

namespace fbl::autodiff {

Result<SliceParams> normalizeSlice(const ir::Shape& in, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends,
                                   const std::vector<int64_t>& axes,
                                   const std::vector<int64_t>& steps) {
  size_t n = starts.size();
  if (ends.size() != n || (!axes.empty() && axes.size() != n) || (!steps.empty() && steps.size() != n))
    return makeError("Slice starts, ends, axes and steps differ in length");
  int64_t rank = static_cast<int64_t>(in.size());
  SliceParams p;
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || seen[axis])
      return makeError("Slice axis {} is out of range or repeated", axes.empty() ? i : axes[i]);
    seen[axis] = true;
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) return makeError("Slice step is 0");
    int64_t dim = in[axis], start = starts[i], end = ends[i];
    // Wrap negatives first, then clamp: positive steps walk [0, dim), negative ones [-1, dim-1].
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // -(step + 1) + 1 in unsigned arithmetic: -step overflows for INT64_MIN.
      uint64_t stride = static_cast<uint64_t>(-(step + 1)) + 1;
      count = start > end ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / stride) + 1 : 0;
    }
    p.axes.push_back(axis);
    p.starts.push_back(start);
    p.steps.push_back(step);
    p.counts.push_back(count);
  }
  return p;
}

}  // namespace fbl::autodiff
