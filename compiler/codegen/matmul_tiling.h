// How a MatMul is tiled on a device: the profile lists candidate tilings of rtile_matmul.cl, each
// with the efficiency it was measured to reach (`fbl-bench matmul --sweep`), and a cost model
// picks, per product, the candidate and split-K with the least estimated time. Narrow products
// (LoRA's rank-8 sides) then get narrow tiles instead of 128 x 128 tiles that are 94% padding, and
// products with too few tiles to fill the device get split along K.
//
// The estimate, per candidate c and split s of an [M x K] x [K x N] product (batch B):
//   groups  = B * ceil(M / TM) * ceil(N / TN) * s
//   waves   = ceil(groups / (computeUnits * c.groupsPerUnit))
//   active  = min(c.groupsPerUnit, ceil(groups / computeUnits))     (groups sharing one unit)
//   compute = waves * active / occupancy * (2 TM TN Kslice / (peak / computeUnits * c.efficiency)
//                                            + 4 (TM + TN) Kslice bytes / tileLoadGbps)
//   occupancy = (active / c.groupsPerUnit)^occupancyExponent         (fewer groups hide less latency)
//   memory  = (B (MK + KN) + s B M N) * 4 bytes / bandwidth          (each operand read once)
//   sum     = s > 1 ? launch + (2 s + 1) B M N * 4 bytes / bandwidth : 0
//   time    = launch + max(compute, memory) + sum
// Padding is paid in full (a tile computes TM x TN outputs whatever is real), which is what makes
// narrow tiles win on narrow products. Profiles without a "matmul" block keep their "kernels"
// block's matmul_tile (profile/kernel_blocks.h) and the split-K rule of chooseSplitK.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/profile/profile.h"

namespace fbl::codegen {

// CPUs (PoCL: a work-group is a loop nest on one core) and GPUs want different matmul tilings.
using profile::DeviceClass;

// The profile's kernel settings (profile/kernel_blocks.h), which the rules here and the emitters
// read: MatMul tilings, the narrow kernel's options, and the per-device numbers of the kernels block.
using profile::AttentionTuning;
using profile::defaultTuning;
using profile::DeviceTuning;
using profile::kConvertWorkgroup;
using profile::kSplitKSumWorkgroup;
using profile::MatmulCandidate;
using profile::MatmulTiling;
using profile::matmulTiling;
using profile::NarrowOptions;
using profile::parseTile;
using profile::parseTileSpec;
using profile::tileString;
using profile::kNarrowLocalBytesPerWorkItem;

// Split-K for an M x N output over K: a product with fewer output tiles than
// kMinGroupsPerComputeUnit per compute unit leaves compute units idle (Figure 16's dA: 512 x 2048
// outputs are 64 tiles of 128 x 128 for 132 SMs), so K is halved until there are enough
// work-groups, keeping every slice at least kMinSplitSlice long (the partial planes cost
// SPLIT x M x N floats written and read once).
inline constexpr int64_t kMinGroupsPerComputeUnit = 1;
inline constexpr int64_t kMinSplitSlice = 512;
// `batch` products of M x N count together.
int64_t chooseSplitK(int64_t m, int64_t n, int64_t k, const MatmulTiling& t, int64_t computeUnits,
                     int64_t batch = 1);

// The profile's matmul block with the device facts it is costed by.
struct MatmulCostModel : profile::MatmulBlock {
  int64_t computeUnits = 0;
  double peakGflops = 0, bandwidthGbps = 0;
};

// rtile_matmul_narrow.cl's tile: a work-group computes TM x TN outputs in 4 x 4 blocks, each
// block's K walk split into KS interleaved slices (one work-item each).
struct NarrowTiling {
  int64_t tm = 4, tn = 4, ks = 1;
  // K in `chunks` chunks of chunkK (a multiple of 4 ks), a group each; 1: a group walks all of K.
  int64_t chunks = 1, chunkK = 0;
  // 4 x 4 blocks a work-item owns: bm row blocks by bn output texels (NarrowOptions::wideRun).
  int64_t bm = 1, bn = 1;
  int64_t workItems() const { return tm / (4 * bm) * (tn / (4 * bn)) * ks; }
};

// Does the model send an M x N product to the narrow kernel?
bool isNarrowProduct(const MatmulCostModel& model, int64_t m, int64_t n);

// The index that neighbouring work-items of rtile_matmul_narrow.cl differ in (its FAST), so that
// they read neighbouring texels of the larger operand: K slices where it is stored along K, else
// its row blocks (L transposed) or output texels (narrow M). Where R is the narrow operand stored
// along K (B in dy B) and N >= o.texelWalkMinSide, output texels too: a slice's rows of R are
// then read whole.
enum class NarrowOrder { kSlices = 0, kRowBlocks = 1, kTexels = 2 };
NarrowOrder chooseNarrowOrder(int64_t m, int64_t n, bool lhsTransposed, bool rhsTransposed, const NarrowOptions& o);
// Slices first (each at least kMinNarrowSliceTexels texels of K long, so a slice's loads
// outweigh its share of the tree; shorter, down to one texel, while the product's `batch` x
// blocks x slices stay under o.fillWorkItems), then the output texels, then row blocks, all
// powers of two within o.workItems (a power of two); a group never covers more blocks than the
// product has. Where `order` makes output texels of a narrow N neighbours, the group takes all
// of them first and the slices the rest; so it does a narrow M's row blocks from
// o.rowsInGroupMinSide. From o.chunkMinK, a narrow N's tiles are o.chunkRows rows by all of N
// with K in chunks (NarrowTiling::chunks): enough groups for o.fillWorkItems, each slice at
// least a round of texels. With o.wideRun, where `order` walks the wide side, a work-item owns
// all of the narrow side (NarrowTiling::bm, bn) and a group o.wideRun texels of the wide side by
// the slices that fit.
inline constexpr int64_t kMinNarrowSliceTexels = 8;
// The local memory of the narrow kernel at tiling `t`: the tree, and with `staged` the round's
// 4 KS rows of the group's TN columns plus a texel of padding every 4 rows.
int64_t narrowLocalBytes(const NarrowTiling& t, bool staged);
NarrowTiling chooseNarrowTiling(int64_t m, int64_t n, int64_t k, const NarrowOptions& o, int64_t batch = 1,
                                NarrowOrder order = NarrowOrder::kSlices);

struct MatmulEstimate {
  double us = 0, computeUs = 0, memoryUs = 0, sumUs = 0;
  int64_t groups = 0, waves = 0;
};

// Local memory one work-group of `t` uses (both tiles, both buffers when t.pipeline >= 2).
int64_t matmulLocalBytes(const MatmulTiling& t);
// Can `t` run K = k in `split` slices of whole TK steps, none empty?
bool splitFits(int64_t k, int64_t split, const MatmulTiling& t);

MatmulEstimate estimateMatmul(const MatmulCostModel& model, const MatmulCandidate& c, int64_t m, int64_t n,
                              int64_t k, int64_t batch, int64_t split);

// The tiling (with splitK set) for one product: the cheapest candidate and split (any count up to
// maxSplit whose slices fit, splitFits) by estimateMatmul, ties to the earlier candidate and the
// smaller split. Without candidates (or
// without peak/bandwidth figures): matmulTiling(d) and chooseSplitK.
MatmulTiling chooseMatmulTiling(const MatmulCostModel& model, DeviceClass d, int64_t m, int64_t n, int64_t k,
                                int64_t batch = 1, MatmulEstimate* estimate = nullptr);
// The same with the profile's own fallback tiling (its "kernels" block's matmul_tile) for matmulTiling(d).
MatmulTiling chooseMatmulTiling(const MatmulCostModel& model, const MatmulTiling& fallback, int64_t m, int64_t n,
                                int64_t k, int64_t batch = 1, MatmulEstimate* estimate = nullptr);

// A product's launches. A product whose tiles fill W whole waves and part of one more runs as
// two: the output columns [0, mainCols) in whole waves of `main` tiles, then the rest, which would
// have been the partial wave, as a product of its own (usually split-K, so that its few tiles'
// work spreads over every compute unit). On the H200 Gemma2's 512 x 9216 outputs are 288 tiles of
// 128 x 128 for 264 resident groups: the last 24 tiles would cost a second wave of full length.
struct MatmulSchedule {
  MatmulTiling main;
  int64_t mainCols = 0;  // the output columns `main` covers; all of them where there is no tail
  MatmulTiling tail;     // columns [mainCols, N), where mainCols < N
  MatmulEstimate estimate;
};

// The cheaper of chooseMatmulTiling's single launch and, for each candidate whose tiles overrun
// a whole wave, its whole waves at split 1 plus the remaining columns' own choice.
MatmulSchedule chooseMatmulSchedule(const MatmulCostModel& model, const MatmulTiling& fallback, int64_t m, int64_t n,
                                    int64_t k, int64_t batch = 1);

// The cost model of a profile: its matmul block (an empty model without one) and the compute
// units, peak and bandwidth from its top level.
MatmulCostModel matmulCostModel(const profile::HardwareProfile& p);

}  // namespace fbl::codegen
