// Staging-order choice for rtile_matmul.cl; the rule is in matmul_staging.h.
#include "compiler/codegen/matmul_staging.h"

#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace fbl::codegen {

layout::TexelOf texelMap(const layout::Layout& stored) {
  if (stored.storage() != layout::Storage::Image2D) return {};
  // Shared by the copies std::function makes: locate() evaluates the index map, so each texel is
  // located once.
  auto cache = std::make_shared<std::unordered_map<int64_t, std::pair<int64_t, int64_t>>>();
  const size_t rank = stored.shape().size();
  const int64_t cols = stored.shape().back();
  return [stored, cache, rank, cols](int64_t r, int64_t c) {
    const int64_t key = r * cols + c;
    if (auto it = cache->find(key); it != cache->end()) return it->second;
    std::vector<int64_t> index(rank, 0);
    index[rank - 1] = c;
    if (rank >= 2) index[rank - 2] = r;
    const std::vector<int64_t> at = stored.locate(index);
    return cache->emplace(key, std::pair{at[0], at[1]}).first->second;
  };
}

void chooseStaging(int64_t m, int64_t k, int64_t n, MatmulOperand& lhs, MatmulOperand& rhs, const MatmulTiling& t,
                   int64_t wave, const std::vector<layout::TextureL1>& l1s) {
  if (l1s.empty()) return;
  const layout::StagedTiling staged{t.tm, t.tn, t.tk, t.wgX() * t.wgY(), wave};
  // Products of one plan repeat their operands' layouts layer after layer.
  std::string key = fmt::format("{}|{}|{}|{}|{} {} {}|{} {} {} {} {}", lhs.stored.str(), lhs.transposed, rhs.stored.str(),
                                rhs.transposed, m, k, n, t.tm, t.tn, t.tk, staged.workItems, wave);
  for (const layout::TextureL1& l1 : l1s) key += fmt::format("|{} {}x{}", l1.lines, l1.blockH, l1.blockW);
  thread_local std::map<std::string, std::pair<layout::StagingOrder, layout::StagingOrder>> memo;
  if (auto it = memo.find(key); it != memo.end()) {
    std::tie(lhs.staging, rhs.staging) = it->second;
    return;
  }
  auto operand = [](const MatmulOperand& op, int64_t rows, int64_t cols) {
    layout::StagedOperand s;
    s.texel = texelMap(op.stored);
    s.rows = rows, s.cols = cols, s.transposed = op.transposed, s.order = op.staging;
    return s;
  };
  layout::StagedOperand l = operand(lhs, lhs.transposed ? k : m, lhs.transposed ? m : k);
  layout::StagedOperand r = operand(rhs, rhs.transposed ? n : k, rhs.transposed ? k : n);
  if (l.texel) lhs.staging = l.order = layout::bestStaging(m, n, k, l, true, layout::StagedOperand{}, staged, l1s).order;
  if (r.texel) rhs.staging = layout::bestStaging(m, n, k, r, false, l, staged, l1s).order;
  memo.emplace(std::move(key), std::pair{lhs.staging, rhs.staging});
}

}  // namespace fbl::codegen
