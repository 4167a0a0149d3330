#include "compiler/ops/broadcast.h"

#include <algorithm>

#include "compiler/support/result.h"

namespace fbl::ops {

std::optional<ir::Shape> broadcastShapes(const ir::Shape& a, const ir::Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  ir::Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    // Dimension i counted from the right; a missing dimension behaves as 1.
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

std::optional<ir::Shape> broadcastShapes(const std::vector<ir::Shape>& shapes) {
  ir::Shape acc;
  for (const auto& s : shapes) {
    auto next = broadcastShapes(acc, s);
    if (!next) return std::nullopt;
    acc = std::move(*next);
  }
  return acc;
}

bool broadcastsTo(const ir::Shape& from, const ir::Shape& to) {
  auto b = broadcastShapes(from, to);
  return b && *b == to;
}

std::vector<int64_t> broadcastStrides(const ir::Shape& in, const ir::Shape& out) {
  FBL_ASSERT(in.size() <= out.size());
  std::vector<int64_t> dense = ir::stridesOf(in);
  std::vector<int64_t> st(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    FBL_ASSERT(in[i] == out[lead + i] || in[i] == 1);
    st[lead + i] = in[i] == 1 ? 0 : dense[i];
  }
  return st;
}

}  // namespace fbl::ops
