// tile-traversal-performance: definitions and rationale in rtile_cost.h and docs/rtile.md.
#include "compiler/layout/rtile_cost.h"

#include <cmath>

#include "compiler/support/int_math.h"
#include "compiler/support/result.h"

namespace fbl::layout {

const char* intraMappingName(IntraMapping m) {
  return m == IntraMapping::kRowStrips ? "row-strips" : "blocked";
}

double patternThroughput(const profile::AccessTable& table, profile::AccessPattern pattern, int waveSize) {
  const std::vector<double>& v = table.throughput.at(pattern);
  double logSum = 0;
  int n = 0;
  for (size_t i = 0; i < table.threads.size(); ++i)
    if (table.threads[i] <= waveSize) {
      logSum += std::log(v[i]);
      ++n;
    }
  if (n == 0) return table.at(pattern, 1);
  return std::exp(logSum / n);
}

int preferredBlockWidth(const profile::HardwareProfile& p) {
  using profile::AccessPattern;
  int nearer = p.textureBlock.w >= 8 ? 8 : 4;  // geometric choice when the benchmark cannot tell
  if (!p.accessTable) return nearer;
  double b4 = patternThroughput(*p.accessTable, AccessPattern::kBlock4, p.waveSize);
  double b8 = patternThroughput(*p.accessTable, AccessPattern::kBlock8, p.waveSize);
  if (b8 > b4 * (1 + kScoreTieTolerance)) return 8;
  if (b4 > b8 * (1 + kScoreTieTolerance)) return 4;
  return nearer;
}

profile::AccessPattern walkPattern(IntraMapping m, int blockW, ReductionDir d) {
  using profile::AccessPattern;
  if (m == IntraMapping::kBlocked) return blockW >= 8 ? AccessPattern::kBlock8 : AccessPattern::kBlock4;
  return d == ReductionDir::kAlongRow ? AccessPattern::kRow : AccessPattern::kColumn;
}

int64_t cacheBlocksPerTile(const TileGeometry& t, const profile::TextureBlock& b) {
  return ceilDiv(t.rectH, b.h) * ceilDiv(t.rectW, b.w);
}

double memEfficiency(const TileGeometry& t, const TensorExtent& e, const profile::HardwareProfile& p) {
  int64_t tiles = e.batch * ceilDiv(e.rows, t.tileH) * ceilDiv(e.cols, t.tileW);
  double blockBytes = static_cast<double>(p.textureBlock.h) * p.textureBlock.w * kTexelBytes;
  double actual = static_cast<double>(tiles) * cacheBlocksPerTile(t, p.textureBlock) * blockBytes;
  double minimal = static_cast<double>(e.batch) * e.rows * e.cols * kElementBytes;
  FBL_ASSERT(actual >= minimal);
  return minimal / actual;
}

RTileCost tileTraversalPerformance(const TileGeometry& t, const TensorExtent& e,
                                   const std::vector<ReductionUse>& uses,
                                   const profile::HardwareProfile& p) {
  FBL_ASSERT(p.accessTable.has_value());
  const profile::AccessTable& table = *p.accessTable;
  const double column = patternThroughput(table, profile::AccessPattern::kColumn, p.waveSize);
  return sumEq2(t, memEfficiency(t, e, p), uses, [&](const ReductionUse&, profile::AccessPattern pattern) {
    return patternThroughput(table, pattern, p.waveSize) / column;
  });
}

}  // namespace fbl::layout
