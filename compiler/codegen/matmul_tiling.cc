#include "compiler/codegen/matmul_tiling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "compiler/support/int_math.h"

namespace fbl::codegen {

int64_t chooseSplitK(int64_t m, int64_t n, int64_t k, const MatmulTiling& t, int64_t computeUnits, int64_t batch) {
  const int64_t groups = batch * ((m + t.tm - 1) / t.tm) * ((n + t.tn - 1) / t.tn);
  int64_t split = 1;
  while (groups * split < kMinGroupsPerComputeUnit * computeUnits && k / (split * 2) >= kMinSplitSlice) split *= 2;
  return split;
}

int64_t matmulLocalBytes(const MatmulTiling& t) {
  return (t.pipeline >= 2 ? 2 : 1) * t.tk * (t.tm + 4 + t.tn + 4) * 4;
}

bool splitFits(int64_t k, int64_t split, const MatmulTiling& t) {
  if (split < 1) return false;
  const int64_t slice = ceilDiv(ceilDiv(k, split), t.tk) * t.tk;
  return ceilDiv(k, slice) == split;
}

MatmulEstimate estimateMatmul(const MatmulCostModel& model, const MatmulCandidate& c, int64_t m, int64_t n,
                              int64_t k, int64_t batch, int64_t split) {
  const MatmulTiling& t = c.tiling;
  MatmulEstimate e;
  const int64_t slice = ceilDiv(ceilDiv(k, split), t.tk) * t.tk;
  e.groups = batch * ceilDiv(m, t.tm) * ceilDiv(n, t.tn) * split;
  const int64_t slots = std::max<int64_t>(1, model.computeUnits * c.groupsPerUnit);
  e.waves = ceilDiv(e.groups, slots);
  // GFLOP/s per compute unit at this efficiency, shared by the groups resident on it.
  const double unitGflops = model.peakGflops / static_cast<double>(std::max<int64_t>(1, model.computeUnits)) *
                            std::max(1e-6, c.efficiency);
  const double groupFlop = 2.0 * static_cast<double>(t.tm * t.tn * slice);
  // A unit shares its throughput among the groups resident on it: a full wave holds
  // groupsPerUnit of them, a lone partial wave fewer.
  const int64_t cus = std::max<int64_t>(1, model.computeUnits);
  const int64_t active = std::min(c.groupsPerUnit, ceilDiv(e.groups, cus));
  // Fewer resident groups hide less latency: the unit reaches (active / groupsPerUnit)^exponent
  // of its full-wave throughput.
  const double occupancy = std::pow(static_cast<double>(active) / static_cast<double>(c.groupsPerUnit),
                                    model.occupancyExponent);
  // Each group also streams its TM x Kslice and Kslice x TN panels into local memory, at the
  // unit's tile-load rate: what makes narrow tiles lose on wide products.
  const double groupBytes = 4.0 * static_cast<double>((t.tm + t.tn) * slice);
  const double loadGBs = model.tileLoadGbps > 0 ? model.tileLoadGbps : 1e12;
  e.computeUs = static_cast<double>(e.waves) * static_cast<double>(active) / occupancy *
                (groupFlop / unitGflops + groupBytes / loadGBs) * 1e-3;
  const double mn = static_cast<double>(batch * m * n);
  const double bytes = 4.0 * (static_cast<double>(batch) * static_cast<double>(m * k + k * n) + mn * split);
  const double bw = std::max(1.0, model.bandwidthGbps);
  e.memoryUs = bytes / bw * 1e-3;
  if (split > 1) e.sumUs = model.launchUs + 4.0 * mn * static_cast<double>(2 * split + 1) / bw * 1e-3;
  e.us = model.launchUs + std::max(e.computeUs, e.memoryUs) + e.sumUs;
  return e;
}

MatmulTiling chooseMatmulTiling(const MatmulCostModel& model, DeviceClass d, int64_t m, int64_t n, int64_t k,
                                int64_t batch, MatmulEstimate* estimate) {
  return chooseMatmulTiling(model, matmulTiling(d), m, n, k, batch, estimate);
}

MatmulTiling chooseMatmulTiling(const MatmulCostModel& model, const MatmulTiling& fallback, int64_t m, int64_t n,
                                int64_t k, int64_t batch, MatmulEstimate* estimate) {
  if (model.candidates.empty() || model.peakGflops <= 0 || model.bandwidthGbps <= 0) {
    MatmulTiling t = fallback;
    t.splitK = chooseSplitK(m, n, k, t, model.computeUnits, batch);
    if (estimate) *estimate = {};
    return t;
  }
  MatmulTiling best;
  MatmulEstimate bestE;
  bool found = false;
  for (const MatmulCandidate& c : model.candidates) {
    if (model.localMemoryBytes > 0 && matmulLocalBytes(c.tiling) > model.localMemoryBytes) continue;
    // Every split count, not only powers of two: 3 slices of 132 SMs' worth of tiles can fill
    // the waves that 2 or 4 leave part empty.
    for (int64_t split = 1; split <= model.maxSplit; ++split) {
      if (!splitFits(k, split, c.tiling)) continue;
      const MatmulEstimate e = estimateMatmul(model, c, m, n, k, batch, split);
      if (!found || e.us < bestE.us) {
        best = c.tiling;
        best.splitK = split;
        bestE = e;
        found = true;
      }
    }
  }
  if (!found) {  // every candidate needs more local memory than the device has
    MatmulCostModel none = model;
    none.candidates.clear();
    return chooseMatmulTiling(none, fallback, m, n, k, batch, estimate);
  }
  if (estimate) *estimate = bestE;
  return best;
}

MatmulSchedule chooseMatmulSchedule(const MatmulCostModel& model, const MatmulTiling& fallback, int64_t m, int64_t n,
                                    int64_t k, int64_t batch) {
  MatmulSchedule best;
  best.main = chooseMatmulTiling(model, fallback, m, n, k, batch, &best.estimate);
  best.mainCols = n;
  if (model.candidates.empty() || model.peakGflops <= 0 || model.bandwidthGbps <= 0) return best;
  const int64_t units = std::max<int64_t>(1, model.computeUnits);
  for (const MatmulCandidate& c : model.candidates) {
    const MatmulTiling& t = c.tiling;
    if (model.localMemoryBytes > 0 && matmulLocalBytes(t) > model.localMemoryBytes) continue;
    const int64_t rowTiles = batch * ceilDiv(m, t.tm), colTiles = ceilDiv(n, t.tn);
    const int64_t slots = units * c.groupsPerUnit;
    const int64_t wholeWaves = rowTiles * colTiles / slots;
    const int64_t mainColTiles = wholeWaves * slots / rowTiles;
    if (wholeWaves == 0 || mainColTiles == 0 || mainColTiles >= colTiles) continue;
    const int64_t mainCols = mainColTiles * t.tn;
    const MatmulEstimate mainE = estimateMatmul(model, c, m, mainCols, k, batch, 1);
    MatmulEstimate tailE;
    const MatmulTiling tail = chooseMatmulTiling(model, fallback, m, n - mainCols, k, batch, &tailE);
    if (mainE.us + tailE.us >= best.estimate.us) continue;
    best.main = t;
    best.main.splitK = 1;
    best.mainCols = mainCols;
    best.tail = tail;
    best.estimate.us = mainE.us + tailE.us;
    best.estimate.computeUs = mainE.computeUs + tailE.computeUs;
    best.estimate.memoryUs = mainE.memoryUs + tailE.memoryUs;
    best.estimate.sumUs = tailE.sumUs;
    best.estimate.groups = mainE.groups + tailE.groups;
    best.estimate.waves = mainE.waves + tailE.waves;
  }
  return best;
}

bool isNarrowProduct(const MatmulCostModel& model, int64_t m, int64_t n) {
  return model.narrow.maxSide > 0 && std::min(m, n) <= model.narrow.maxSide;
}

NarrowOrder chooseNarrowOrder(int64_t m, int64_t n, bool lhsTransposed, bool rhsTransposed, const NarrowOptions& o) {
  if (m < n) return rhsTransposed ? NarrowOrder::kSlices : NarrowOrder::kTexels;
  if (lhsTransposed) return NarrowOrder::kRowBlocks;
  const bool texelWalk = !rhsTransposed && o.texelWalkMinSide > 0 && n >= o.texelWalkMinSide;
  return texelWalk ? NarrowOrder::kTexels : NarrowOrder::kSlices;
}

namespace {

int64_t pow2Ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// K cut into chunks of whole rounds for tiling `t` (its tm, tn, ks set), a group each: as many as
// o.fillWorkItems asks for (without one, slices of kMinNarrowSliceTexels), one where it asks for
// none.
void cutIntoChunks(NarrowTiling& t, int64_t m, int64_t n, int64_t k, const NarrowOptions& o, int64_t batch) {
  const int64_t tiles = batch * ((m + t.tm - 1) / t.tm) * ((n + t.tn - 1) / t.tn);
  const int64_t round = 4 * t.ks, rounds = (k + round - 1) / round;
  const int64_t wanted = o.fillWorkItems > 0 ? (o.fillWorkItems / t.workItems() + tiles - 1) / tiles
                                             : (k + 3) / 4 / (t.ks * kMinNarrowSliceTexels);
  const int64_t chunks = std::clamp<int64_t>(wanted, 1, rounds);
  t.chunkK = (rounds + chunks - 1) / chunks * round;
  t.chunks = (k + t.chunkK - 1) / t.chunkK;
}

// A narrow N's tiles of o.chunkRows rows by all of N, K cut into chunks (chooseNarrowTiling):
// as many groups as o.fillWorkItems asks for (without one, slices of kMinNarrowSliceTexels), each
// slice a round of texels at least. chunks 1 where K does not split.
NarrowTiling chooseChunkedTiling(int64_t m, int64_t n, int64_t k, const NarrowOptions& o, int64_t batch) {
  NarrowTiling t;
  const int64_t texels = std::min(pow2Ceil((n + 3) / 4), o.workItems);
  const int64_t rowBlocks = std::min({pow2Ceil(std::max<int64_t>(o.chunkRows / 4, 1)), pow2Ceil((m + 3) / 4),
                                      o.workItems / texels});
  t.tm = 4 * rowBlocks;
  t.tn = 4 * texels;
  t.ks = o.workItems / (rowBlocks * texels);
  cutIntoChunks(t, m, n, k, o, batch);
  return t;
}

// The narrow side whole in each work-item, a group o.wideRun texels of the wide side by the K
// slices that fit, K in chunks where the tiles are too few to fill the device (chooseNarrowTiling);
// nothing where `order` does not walk the wide side or the narrow side is wider than 16.
std::optional<NarrowTiling> chooseWideRunTiling(int64_t m, int64_t n, int64_t k, const NarrowOptions& o,
                                                int64_t batch, NarrowOrder order) {
  const bool narrowN = n <= m;
  if (narrowN ? order != NarrowOrder::kRowBlocks : order != NarrowOrder::kTexels) return std::nullopt;
  const int64_t narrowBlocks = (std::min(m, n) + 3) / 4, wideBlocks = (std::max(m, n) + 3) / 4;
  if (narrowBlocks > 4) return std::nullopt;
  NarrowTiling t;
  const int64_t run = std::min(pow2Ceil(std::min(o.wideRun, o.workItems)), pow2Ceil(wideBlocks));
  t.ks = o.workItems / run;
  // No more slices than K has texels.
  while (t.ks > 1 && (k + 3) / 4 < t.ks) t.ks /= 2;
  (narrowN ? t.bn : t.bm) = narrowBlocks;
  t.tm = 4 * (narrowN ? run : narrowBlocks);
  t.tn = 4 * (narrowN ? narrowBlocks : run);
  cutIntoChunks(t, m, n, k, o, batch);
  return t;
}

}  // namespace

NarrowTiling chooseNarrowTiling(int64_t m, int64_t n, int64_t k, const NarrowOptions& o, int64_t batch,
                                NarrowOrder order) {
  if (o.chunkMinK > 0 && k >= o.chunkMinK && n < m && order == NarrowOrder::kSlices) {
    const NarrowTiling chunked = chooseChunkedTiling(m, n, k, o, batch);
    if (chunked.chunks > 1) return chunked;
  }
  if (o.wideRun > 0)
    if (std::optional<NarrowTiling> run = chooseWideRunTiling(m, n, k, o, batch, order)) return *run;
  NarrowTiling t;
  // Output texels of a narrow N that neighbour each other span the group first; so do the row
  // blocks of a narrow M from rowsInGroupMinSide.
  const bool texelsFirst = order == NarrowOrder::kTexels && n <= m;
  const bool rowsFirst = m < n && o.rowsInGroupMinSide > 0 && m >= o.rowsInGroupMinSide;
  const int64_t narrowBlocks = texelsFirst ? pow2Ceil((n + 3) / 4) : rowsFirst ? pow2Ceil((m + 3) / 4) : 1;
  const int64_t sliceRoom = o.workItems / std::min(narrowBlocks, o.workItems);
  const int64_t kTexels = (k + 3) / 4;
  while (t.ks * 2 <= sliceRoom && kTexels / (t.ks * 2) >= kMinNarrowSliceTexels) t.ks *= 2;
  const int64_t productBlocks = batch * ((m + 3) / 4) * ((n + 3) / 4);
  while (t.ks * 2 <= sliceRoom && kTexels / (t.ks * 2) >= 1 && productBlocks * t.ks < o.fillWorkItems) t.ks *= 2;
  const int64_t blocks = o.workItems / t.ks;
  // One side takes what it needs of the group's blocks, the other the rest.
  const int64_t rowBlocks = pow2Ceil((m + 3) / 4), texels = pow2Ceil((n + 3) / 4);
  int64_t rb, cb;
  if (rowsFirst) {
    rb = std::min(rowBlocks, blocks);
    cb = std::min(texels, blocks / rb);
  } else {
    cb = std::min(texels, blocks);
    rb = std::min(rowBlocks, blocks / cb);
  }
  t.tm = 4 * rb;
  t.tn = 4 * cb;
  return t;
}

int64_t narrowLocalBytes(const NarrowTiling& t, bool staged) {
  const int64_t tree = t.workItems() * kNarrowLocalBytesPerWorkItem;
  return staged ? tree + (4 * t.ks * (t.tn / 4) + t.ks) * 16 : tree;
}

MatmulCostModel matmulCostModel(const profile::HardwareProfile& p) {
  MatmulCostModel m;
  if (p.matmul) static_cast<profile::MatmulBlock&>(m) = *p.matmul;
  m.computeUnits = p.computeUnits;
  m.peakGflops = p.peakGflops.value_or(0.0);
  m.bandwidthGbps = p.bandwidthGBs.value_or(0.0);
  return m;
}

}  // namespace fbl::codegen
