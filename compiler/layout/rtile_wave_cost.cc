// The wave-footprint R-Tile cost; the formula is in rtile_wave_cost.h.
#include "compiler/layout/rtile_wave_cost.h"

#include <algorithm>
#include <map>
#include <vector>

#include "compiler/support/int_math.h"
#include "compiler/support/result.h"

namespace fbl::layout {

std::vector<TextureL1> bracketedTextureL1s(const profile::HardwareProfile& p) {
  std::vector<int64_t> sizes = {p.l1TextureCacheBytes};
  for (int64_t b : p.bracket.l1TextureBytes)
    if (b != p.l1TextureCacheBytes) sizes.push_back(b);
  std::vector<profile::TextureBlock> blocks = {p.textureBlock};
  for (profile::TextureBlock b : p.bracket.textureBlocks)
    if (b.h != p.textureBlock.h || b.w != p.textureBlock.w) blocks.push_back(b);
  std::vector<TextureL1> out;
  for (profile::TextureBlock b : blocks)
    for (int64_t bytes : sizes) {
      const int64_t lineBytes = int64_t{kTexelBytes} * b.h * b.w;
      out.push_back({std::max<int64_t>(1, bytes / lineBytes), b.h, b.w});
    }
  return out;
}

StagedTiling stagedTilingOf(const profile::HardwareProfile& p) {
  FBL_ASSERT(p.waveFootprint.has_value());
  const profile::WaveFootprintScoring& w = *p.waveFootprint;
  return {w.tm, w.tn, w.tk, w.workItems, p.waveSize};
}

double waveEfficiency(const RTileLayout& l, ReductionDir dir, const profile::HardwareProfile& p) {
  const StagedTiling t = stagedTilingOf(p);
  const std::vector<TextureL1> l1s = bracketedTextureL1s(p);
  // Scored as the right operand: along rows it is stored N x K (read transposed), along columns
  // K x N. Only the window the score simulates is read, so the memo keys on it.
  const bool transposed = dir == ReductionDir::kAlongRow;
  const int64_t rows = std::min(l.extent.rows, (transposed ? kScoredGroups * t.tn : kScoredKSteps * t.tk));
  const int64_t cols = std::min(l.extent.cols, (transposed ? kScoredKSteps * t.tk : kScoredGroups * t.tn));
  const TileGeometry& g = l.tile;
  std::vector<int64_t> key = {g.tileH, g.tileW, static_cast<int>(g.intra), g.blockH, g.blockW, g.lh, g.lw,
                              static_cast<int>(l.inter), rows, cols, transposed, t.tm, t.tn, t.tk, t.workItems, t.wave};
  for (const TextureL1& l1 : l1s) key.insert(key.end(), {l1.lines, l1.blockH, l1.blockW});
  thread_local std::map<std::vector<int64_t>, double> memo;
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  // Every texel of the window located once; each staging order and L1 reads them again.
  const int64_t texelsWide = ceilDiv(cols, kTexelLanes);
  std::vector<std::pair<int64_t, int64_t>> at(static_cast<size_t>(rows * texelsWide));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < texelsWide; ++c) {
      const TexelCoord tc = l.map(0, r, c * kTexelLanes);
      at[static_cast<size_t>(r * texelsWide + c)] = {tc.x, tc.y};
    }
  StagedOperand op;
  op.texel = [&at, texelsWide](int64_t r, int64_t c) { return at[static_cast<size_t>(r * texelsWide + c / kTexelLanes)]; };
  op.rows = rows, op.cols = cols, op.transposed = transposed;
  const int64_t n = transposed ? rows : cols, k = transposed ? cols : rows;
  const StagingChoice s = bestStaging(t.tm, n, k, op, /*left=*/false, StagedOperand{}, t, l1s);
  double sum = 0;
  for (size_t i = 0; i < l1s.size(); ++i) {
    const FootprintCount& c = s.counts[i];
    sum += c.misses == 0 ? 1.0 : c.texels * double{kTexelBytes} / (static_cast<double>(c.misses) * l1s[i].lineBytes());
  }
  const double e = sum / static_cast<double>(l1s.size());
  memo.emplace(key, e);
  return e;
}

RTileCost waveFootprintPerformance(const RTileLayout& l, const std::vector<ReductionUse>& uses,
                                   const profile::HardwareProfile& p) {
  return sumEq2(l.tile, memEfficiency(l.tile, l.extent, p), uses,
                [&](const ReductionUse& u, profile::AccessPattern) { return waveEfficiency(l, u.dir, p); });
}

}  // namespace fbl::layout
