// R-Tile selection; the numbered algorithm is at the top of rtile.h, the cost in rtile_cost.h.
#include "compiler/layout/rtile.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "compiler/layout/layout.h"
#include "compiler/layout/rtile_wave_cost.h"
#include "compiler/support/int_math.h"

namespace fbl::layout {

namespace {

// The most square lh x lw element block holding `elements` with lw a multiple of the texel width;
// ties go to the wider block (rows are the cheaper direction on every profile seen so far).
std::pair<int, int> squareLogicalBlock(int elements) {
  std::pair<int, int> best{0, 0};
  double bestSkew = 1e30;
  for (int lh = 1; lh <= elements; ++lh) {
    if (elements % lh) continue;
    int lw = elements / lh;
    if (lw % kTexelLanes) continue;
    double skew = std::fabs(std::log2(static_cast<double>(lh) / lw));
    if (skew < bestSkew - 1e-9 || (std::fabs(skew - bestSkew) < 1e-9 && lw > best.second)) {
      best = {lh, lw};
      bestSkew = skew;
    }
  }
  return best;
}

// Checks steps 2, 4, 5, 6 for one shape; returns the first constraint broken.
CandidateVerdict judge(int64_t th, int64_t tw, const RTileProblem& prob,
                       const profile::HardwareProfile& p, const RTileOptions& opts) {
  CandidateVerdict v{th, tw, Constraint::kNone, {}};
  auto fail = [&](Constraint c, std::string why) {
    v.failed = c;
    v.reason = std::move(why);
    return v;
  };
  if (tw % kTexelLanes)
    return fail(Constraint::kC1Isa, fmt::format("tile_w {} is not a multiple of the {} RGBA lanes", tw, kTexelLanes));
  int64_t texels = th * tw / kTexelLanes;
  if (texels % p.waveSize)
    return fail(Constraint::kC1Wave, fmt::format("{} texels is not a multiple of wave size {}", texels, p.waveSize));
  TileGeometry g = tileGeometry(th, tw, p);
  int64_t bytes = g.rectH * g.rectW * kTexelBytes;
  if (bytes > p.l1TextureCacheBytes)
    return fail(Constraint::kC2Cache, fmt::format("{} bytes exceed the {}-byte L1 texture cache", bytes, p.l1TextureCacheBytes));
  if (g.intra == IntraMapping::kBlocked && (th % g.lh || tw % g.lw))
    return fail(Constraint::kC2Align, fmt::format("{}x{} does not fold into {}x{} blocks", th, tw, g.lh, g.lw));
  if (g.rectH % p.textureBlock.h || g.rectW % p.textureBlock.w)
    return fail(Constraint::kC2Align, fmt::format("{}x{} texels cover texture blocks of {}x{} partially",
                                                  g.rectH, g.rectW, p.textureBlock.h, p.textureBlock.w));
  double pad = paddingRatio(th, tw, prob.extent);
  if (pad > opts.maxPaddingRatio)
    return fail(Constraint::kC3Padding, fmt::format("padding {:.1f}% exceeds {:.0f}%", pad * 100, opts.maxPaddingRatio * 100));
  RTileLayout l{prob.extent, g, chooseInterOrder(g, prob.extent, prob.uses)};
  // A texture past the image limit still fits when its tile grid wraps into bands
  // (layout::imageWrap); only one that fits neither way loses the candidate.
  if (!fitsImage(l.textureWidth(), l.textureHeight(), g.rectW, g.rectH, p.image2dMaxWidth, p.image2dMaxHeight))
    return fail(Constraint::kImageLimits, fmt::format("texture {}x{} exceeds image2d limit {}x{}, wrapped or not",
                                                      l.textureWidth(), l.textureHeight(), p.image2dMaxWidth,
                                                      p.image2dMaxHeight));
  return v;
}

// Step 7's tie-break: less padding, larger tile, squarer, lower tile_h. Smaller tuple wins.
auto tieKey(const RTileChoice& c) {
  const TileGeometry& t = c.layout.tile;
  double skew = std::fabs(std::log2(static_cast<double>(t.tileH) / t.tileW));
  return std::make_tuple(c.paddingRatio, -t.tileH * t.tileW, skew, t.tileH);
}

}  // namespace

RTileCost scoreRTile(const RTileLayout& l, const std::vector<ReductionUse>& uses, const profile::HardwareProfile& p) {
  if (p.waveFootprint) return waveFootprintPerformance(l, uses, p);
  return tileTraversalPerformance(l.tile, l.extent, uses, p);
}

bool canScoreRTiles(const profile::HardwareProfile& p) { return p.waveFootprint || p.accessTable; }

double streamThroughput(const profile::HardwareProfile& p) {
  if (p.waveFootprint || !p.accessTable) return 1.0;
  return patternThroughput(*p.accessTable, profile::AccessPattern::kRow, p.waveSize) /
         patternThroughput(*p.accessTable, profile::AccessPattern::kColumn, p.waveSize);
}

const char* interOrderName(InterOrder o) {
  return o == InterOrder::kColsAlongX ? "cols-along-x" : "rows-along-x";
}

int64_t RTileLayout::tilesR() const { return ceilDiv(extent.rows, tile.tileH); }
int64_t RTileLayout::tilesC() const { return ceilDiv(extent.cols, tile.tileW); }

int64_t RTileLayout::textureWidth() const {
  return (inter == InterOrder::kColsAlongX ? tilesC() : tilesR()) * tile.rectW;
}
int64_t RTileLayout::textureHeight() const {
  return extent.batch * (inter == InterOrder::kColsAlongX ? tilesR() : tilesC()) * tile.rectH;
}

TexelCoord RTileLayout::map(int64_t b, int64_t r, int64_t c) const {
  int64_t ti = r / tile.tileH, tj = c / tile.tileW;
  int64_t ir = r % tile.tileH, ic = c % tile.tileW;
  int64_t lx, ly;
  int lane = static_cast<int>(ic % kTexelLanes);
  if (tile.intra == IntraMapping::kRowStrips) {
    lx = ic / kTexelLanes;
    ly = ir;
  } else {
    // Fold the logical lh x lw block into the blockH x blockW texel block in row-major texel
    // order: a logical column then zig-zags inside one texture cache block (the paper's Z path).
    int64_t bi = ir / tile.lh, bj = ic / tile.lw;
    int64_t linear = (ir % tile.lh) * (tile.lw / kTexelLanes) + (ic % tile.lw) / kTexelLanes;
    lx = bj * tile.blockW + linear % tile.blockW;
    ly = bi * tile.blockH + linear / tile.blockW;
  }
  bool colsAlongX = inter == InterOrder::kColsAlongX;
  int64_t gx = colsAlongX ? tj : ti, gy = colsAlongX ? ti : tj;
  int64_t gridH = colsAlongX ? tilesR() : tilesC();
  return {gx * tile.rectW + lx, (b * gridH + gy) * tile.rectH + ly, lane};
}

TileGeometry tileGeometry(int64_t tileH, int64_t tileW, const profile::HardwareProfile& p) {
  TileGeometry g;
  g.tileH = tileH;
  g.tileW = tileW;
  int64_t texelsWide = std::max<int64_t>(1, tileW / kTexelLanes);
  if (texelsWide <= p.textureBlock.w) {
    g.intra = IntraMapping::kRowStrips;
    g.rectW = texelsWide;
    g.rectH = tileH;
    return g;
  }
  g.intra = IntraMapping::kBlocked;
  g.blockH = p.textureBlock.h;
  g.blockW = std::max(p.textureBlock.w, preferredBlockWidth(p));
  std::tie(g.lh, g.lw) = squareLogicalBlock(kTexelLanes * g.blockH * g.blockW);
  g.rectW = ceilDiv(tileW, g.lw) * g.blockW;
  g.rectH = ceilDiv(tileH, g.lh) * g.blockH;
  return g;
}

double paddingRatio(int64_t tileH, int64_t tileW, const TensorExtent& e) {
  double logical = static_cast<double>(e.rows) * e.cols;
  double padded = static_cast<double>(ceilDiv(e.rows, tileH) * tileH) * (ceilDiv(e.cols, tileW) * tileW);
  return (padded - logical) / logical;
}

std::vector<CandidateVerdict> pruneCandidates(const RTileProblem& prob, const profile::HardwareProfile& p,
                                              const RTileOptions& opts) {
  std::vector<CandidateVerdict> out;
  for (int64_t th : opts.tileSizes)
    for (int64_t tw : opts.tileSizes) out.push_back(judge(th, tw, prob, p, opts));
  return out;
}

InterOrder chooseInterOrder(const TileGeometry& t, const TensorExtent& e,
                            const std::vector<ReductionUse>& uses) {
  double alongX = 0, alongY = 0;  // weighted tiles walked per reduction, per grid direction
  for (const ReductionUse& u : uses) {
    if (u.dir == ReductionDir::kAlongRow)
      alongX += u.weight * static_cast<double>(ceilDiv(e.cols, t.tileW));
    else
      alongY += u.weight * static_cast<double>(ceilDiv(e.rows, t.tileH));
  }
  return alongY > alongX ? InterOrder::kRowsAlongX : InterOrder::kColsAlongX;
}

Result<RTileChoice> selectRTile(const RTileProblem& prob, const profile::HardwareProfile& p,
                                const RTileOptions& opts) {
  if (prob.uses.empty())
    return makeError("tensor '{}': R-Tile needs at least one consuming reduction", prob.tensor);
  if (prob.extent.rows <= 0 || prob.extent.cols <= 0 || prob.extent.batch <= 0)
    return makeError("tensor '{}': empty extent {}x{}x{}", prob.tensor, prob.extent.batch, prob.extent.rows,
                     prob.extent.cols);
  if (!canScoreRTiles(p))
    return makeError("tensor '{}': profile '{}' has no access table (pending measurement); run `fblc profile` "
                     "on the device first",
                     prob.tensor, p.name);
  std::vector<CandidateVerdict> verdicts = pruneCandidates(prob, p, opts);
  std::vector<RTileChoice> survivors;
  for (const CandidateVerdict& v : verdicts) {
    if (v.failed != Constraint::kNone) continue;
    RTileChoice c;
    c.tensor = prob.tensor;
    c.layout.extent = prob.extent;
    c.layout.tile = tileGeometry(v.tileH, v.tileW, p);
    c.layout.inter = chooseInterOrder(c.layout.tile, prob.extent, prob.uses);
    c.paddingRatio = paddingRatio(v.tileH, v.tileW, prob.extent);
    c.cost = scoreRTile(c.layout, prob.uses, p);
    survivors.push_back(std::move(c));
  }
  if (survivors.empty()) {
    int counts[7] = {};
    for (const auto& v : verdicts) ++counts[static_cast<int>(v.failed)];
    return makeError("tensor '{}' [{}x{}x{}]: no R-Tile candidate survives on '{}' (C1 {}, C2 {}, C3 {}, image2d {} "
                     "removed); keep its linear layout",
                     prob.tensor, prob.extent.batch, prob.extent.rows, prob.extent.cols, p.name,
                     counts[1] + counts[2], counts[3] + counts[4], counts[5], counts[6]);
  }
  double best = 0;
  for (const auto& c : survivors) best = std::max(best, c.cost.score);
  const RTileChoice* pick = nullptr;
  for (const auto& c : survivors) {
    if (c.cost.score < best * (1 - kScoreTieTolerance)) continue;
    if (!pick || tieKey(c) < tieKey(*pick)) pick = &c;
  }
  RTileChoice out = *pick;
  out.verdicts = std::move(verdicts);
  return out;
}

TensorExtent matrixView(const ir::Shape& shape) {
  TensorExtent e;
  size_t n = shape.size();
  e.cols = n >= 1 ? shape[n - 1] : 1;
  e.rows = n >= 2 ? shape[n - 2] : 1;
  e.batch = 1;
  for (size_t i = 0; i + 2 < n; ++i) e.batch *= shape[i];
  return e;
}

Result<ReductionDir> reductionDirForAxis(const std::string& tensor, int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) return makeError("tensor '{}': reduction axis {} out of range for rank {}", tensor, axis, rank);
  if (a == r - 1) return ReductionDir::kAlongRow;
  if (a == r - 2) return ReductionDir::kAlongColumn;
  return makeError("tensor '{}': reduction over batch axis {} of rank {} is not a tile reduction", tensor, axis, rank);
}

}  // namespace fbl::layout
