// The R-Tile cost function "tile-traversal-performance": the paper's Eq. 2 objective,
//
//   R-Tile* = argmax_tile  sum_{op in consuming reductions}  Performance(tile, op)
//   Performance(tile, op) = weight(op) * Throughput(pattern(tile, op)) * MemEfficiency(tile)
//
// where
//   - pattern(tile, op) is the Figure-4 access pattern a wave produces when it walks the tile's
//     texels along op's reduction direction: row strips walked along a row read "row", row strips
//     walked along a column read "column", 2D-blocked tiles read "block4"/"block8" either way;
//   - Throughput is that pattern's row of the profile's access table, averaged (geometric mean)
//     over the measured thread counts up to the wave size (a wave walking a tile has between one
//     and wave-size lanes on distinct texel lines, depending on the tile's shape), divided by the
//     same average for column-major (the paper normalises Figure 4 the same way), so measured GB/s
//     and published ratios are interchangeable; it stands in for the paper's measured GFLOPS, since
//     a reduction over a texture is bandwidth-bound and its FLOPs per byte do not depend on the tile;
//   - MemEfficiency = MinimalBytes / ActualBytes: the tensor's bytes over the bytes of the texture
//     cache blocks its tiles cover (Eq. 1 summed over tiles), so padding and partly used blocks
//     cost in proportion.
// docs/rtile.md derives each term; the constants of the model are the named ones below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/profile/profile.h"

namespace fbl::layout {

inline constexpr const char* kRTileCostName = "tile-traversal-performance";

// Scores closer than this (relative) are ties, broken by shape (see rtile.h) rather than by the
// measurement: run-to-run noise of `fblc profile` is a few percent, and two profiling runs must
// select the same tiles.
inline constexpr double kScoreTieTolerance = 0.05;

// Bytes per element and elements per texel of the RGBA/FLOAT image2d storage R-Tile targets.
inline constexpr int kElementBytes = 4;
inline constexpr int kTexelLanes = 4;
inline constexpr int kTexelBytes = kElementBytes * kTexelLanes;

// Which way a consuming reduction walks the tensor's 2D view [rows x cols].
enum class ReductionDir {
  kAlongRow,     // sums over the column index (e.g. Y = X W reads X along rows)
  kAlongColumn,  // sums over the row index (e.g. dW = X^T dY reads X along columns)
};

struct ReductionUse {
  ReductionDir dir = ReductionDir::kAlongRow;
  double weight = 1.0;   // how much this consumer counts (e.g. its share of the step's work)
  std::string consumer;  // node name, for reports
};

enum class IntraMapping {
  kRowStrips,  // element (r, c) of the tile at texel (c/4, r): tile_w <= C_w texels
  kBlocked,    // compact 2D blocks folded into the texture block (tile_w > C_w texels)
};
const char* intraMappingName(IntraMapping m);

// One tile shape with its intra-tile mapping resolved; everything the cost and the index map need.
struct TileGeometry {
  int64_t tileH = 0, tileW = 0;  // elements
  IntraMapping intra = IntraMapping::kRowStrips;
  // kBlocked: a physical block of blockH x blockW texels holds a logical lh x lw element block.
  int blockH = 0, blockW = 0;
  int lh = 0, lw = 0;
  int64_t rectH = 0, rectW = 0;  // texels the tile occupies
};

// The tensor as R-Tile sees it: `batch` independent [rows x cols] matrices, padded per matrix.
struct TensorExtent {
  int64_t batch = 1, rows = 0, cols = 0;
};

struct UseCost {
  ReductionUse use;
  profile::AccessPattern pattern = profile::AccessPattern::kColumn;
  double throughput = 0;     // relative to column-major (patternThroughput ratio)
  double memEfficiency = 0;  // MinimalBytes / ActualBytes
  double performance = 0;    // weight * throughput * memEfficiency
};

struct RTileCost {
  double score = 0;  // Eq. 2's sum
  std::vector<UseCost> uses;
};

// Geometric mean of `pattern`'s throughput over the table's thread counts <= waveSize (the
// smallest count when none is).
double patternThroughput(const profile::AccessTable& table, profile::AccessPattern pattern, int waveSize);

// The 2D block width (texels) the profile's benchmark prefers: block8 over block4 only when it
// measured better by more than kScoreTieTolerance; otherwise the one nearer C_w.
int preferredBlockWidth(const profile::HardwareProfile& p);

// Figure-4 pattern of a wave walking a tile with mapping `m` along `d`.
profile::AccessPattern walkPattern(IntraMapping m, int blockW, ReductionDir d);

// Eq. 1 for the tile's physical rectangle: texture cache blocks it touches.
int64_t cacheBlocksPerTile(const TileGeometry& t, const profile::TextureBlock& b);

double memEfficiency(const TileGeometry& t, const TensorExtent& e, const profile::HardwareProfile& p);

// Eq. 2's sum: each use's `throughputOf(use)` times the tile's MemEfficiency `eff`, weighted;
// the pattern reported beside each is the Figure-4 walk the tile induces. Both costs use it.
template <typename ThroughputOf>
RTileCost sumEq2(const TileGeometry& t, double eff, const std::vector<ReductionUse>& uses, ThroughputOf throughputOf) {
  RTileCost cost;
  for (const ReductionUse& u : uses) {
    UseCost c;
    c.use = u;
    c.pattern = walkPattern(t.intra, t.blockW, u.dir);
    c.throughput = throughputOf(u, c.pattern);
    c.memEfficiency = eff;
    c.performance = u.weight * c.throughput * eff;
    cost.score += c.performance;
    cost.uses.push_back(c);
  }
  return cost;
}

// Requires p.accessTable (callers check; rtile.h reports a missing table as an error).
RTileCost tileTraversalPerformance(const TileGeometry& t, const TensorExtent& e,
                                   const std::vector<ReductionUse>& uses,
                                   const profile::HardwareProfile& p);

}  // namespace fbl::layout
