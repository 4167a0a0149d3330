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
// block's matmul_tile (device_tuning.h) and the split-K rule of chooseSplitK.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::codegen {

// CPUs (PoCL: a work-group is a loop nest on one core) and GPUs want different matmul tilings.
using profile::DeviceClass;

// Work-group tiling of rtile_matmul.cl: a TM x TN output tile per work-group, K walked TK at a
// time, RM x RN outputs per work-item (both multiples of 4); splitK > 1 splits K into that many
// slices summed by a second kernel (emitRTileSplitKSum); 0 means "choose" (chooseSplitK), which
// the caller resolves before emitting.
struct MatmulTiling {
  int64_t tm = 64, tn = 64, tk = 16, rm = 4, rn = 4;
  int64_t splitK = 1;
  // 0: none; 1: prefetch the next K tile into registers during the current one; 2: that, and two
  // local buffers so a K step needs one barrier; 3: that, and the next k's fragments read from
  // local memory during the current k's FMAs.
  int pipeline = 0;
  int64_t wgX() const { return tn / rn; }
  int64_t wgY() const { return tm / rm; }
};

// The tuned set (splitK 0: per product, chooseSplitK): GPUs (hundreds of lanes per CU, 32+ KB
// local memory) get 128x128x16 tiles with 8x8 per work-item (256 work-items, 16.5 KB local) and
// register prefetch; CPUs (PoCL: a work-group is a loop nest on one core, values live across a
// barrier go through memory) get 64x64x16 with 4x4 per work-item and no prefetch.
MatmulTiling matmulTiling(DeviceClass d);

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

struct MatmulCandidate {
  MatmulTiling tiling;         // splitK unused: the cost model chooses it per product
  double efficiency = 1.0;     // fraction of peak FMA throughput a full wave of these tiles reaches
  int64_t groupsPerUnit = 1;   // work-groups resident on one compute unit at once
};

// rtile_matmul_narrow.cl's settings, the profile's "matmul.narrow" block: {"max_side",
// "work_items", "fill_work_items", "stage_narrow_operand"}. Products whose narrow side
// min(M, N) is at most maxSide (LoRA's rank side) run there instead of the tiled kernel: one
// launch, K split among a group's work-items and summed in local memory, where tiles would be
// mostly padding and split-K a second launch.
struct NarrowOptions {
  int64_t maxSide = 0;  // 0: never
  int64_t workItems = 64;
  // Work-items a narrow launch should have in all before its K slices lengthen: a small
  // product (x A: 512 x 8 outputs) has too few blocks to keep enough loads in flight to cover
  // the memory's latency, so it takes shorter slices down to one texel. A launch that runs
  // several products (batchProducts) counts them all, so each takes longer slices and a
  // shallower tree. 0: slices of kMinNarrowSliceTexels whatever the product's size.
  int64_t fillWorkItems = 0;
  // Copy the narrow operand through local memory when it is a buffer stored along K and
  // neighbouring work-items are K slices (B in dy B): read in place, they read rows 4 apart
  // (rtile_matmul_narrow.cl, STAGE_R). Only where the copy and the tree fit local memory.
  bool stageNarrowOperand = false;
  // Where R is the narrow operand stored along K and N is at least this wide, neighbouring
  // work-items are the output texels of one K slice instead, and the group spans all of N: a
  // warp reads R's rows whole (chooseNarrowOrder). 0: never.
  int64_t texelWalkMinSide = 0;
  // Where M is the narrow side (t^T dy) and at least this wide, a group holds all of its row
  // blocks, which then share each texel of the wide operand R, and the output texels the rest;
  // otherwise a group is output texels first, and each texel of R is read by M / 4 groups. 0: never.
  int64_t rowsInGroupMinSide = 0;
  // Store a weight (a host-written matrix the compiler keeps linear) that is at most maxSide
  // wide and that a product reduces along its columns transposed, so that its K walk is
  // contiguous: lora_B in dy B is then read as x A^T reads lora_A (plan/layout_lowering.h).
  bool kContiguousWeights = false;
  // Independent narrow products of one kernel (q, k and v's x A) run as one launch, up to this
  // many (compiler/plan/launch_batching.h); 1: a launch each.
  int64_t batchProducts = 1;
  // Where N is the narrow side, neighbouring work-items are K slices and K is at least this
  // long (x A^T and dy B at the MLP's width), K is cut into chunks, a group each, of tiles of
  // chunkRows rows by all of N, and the group that finishes a tile last adds its chunks' sums
  // (rtile_matmul_narrow.cl, KC). A group per 4 x 4 block reads the wide operand once per texel
  // of N and the narrow one once per 4 rows; these tiles read each once per tile. 0: never.
  int64_t chunkMinK = 0;
  int64_t chunkRows = 32;
  // Where neighbouring work-items walk the wide side (a narrow N's row blocks with L transposed:
  // x^T dt, dy^T h; a narrow M's output texels: t^T dy), a work-item owns every 4 x 4 block of
  // the narrow side (up to 16 wide), and a group's neighbouring work-items cover this many texels
  // of the wide side (a power of two), the rest of the group being K slices. Each texel of the
  // wide operand is then read by one work-item of one group: with a block a work-item, the
  // other blocks of the narrow side read it again, and a warp's lanes repeat each other's
  // loads. 0: never.
  int64_t wideRun = 0;
};

struct MatmulCostModel {
  std::vector<MatmulCandidate> candidates;  // empty: the fallback tiling (kernels.matmul_tile)
  int64_t computeUnits = 0;
  double peakGflops = 0, bandwidthGbps = 0;
  double launchUs = 0;          // fixed cost of one launch (a split-K sum is one more)
  int64_t localMemoryBytes = 0; // 0: unknown (no candidate is excluded for its local tiles)
  int64_t maxSplit = 32;
  double occupancyExponent = 0.6;  // partial waves: throughput x (active / groupsPerUnit)^this
  double tileLoadGbps = 0;         // per compute unit, global -> local tile loads; 0: not modelled
  NarrowOptions narrow;
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
// rtile_matmul_narrow.cl's tree: partial[4][work-items] float4.
inline constexpr int64_t kNarrowLocalBytesPerWorkItem = 4 * 16;
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

// "TMxTNxTK/RMxRN" (and the pipeline depth) <-> MatmulTiling; parse errors name the text.
Result<MatmulTiling> parseTile(const std::string& text, int64_t pipeline);
// "TMxTNxTK/RMxRN[:PIPE]", as fbl-bench's --tile takes it: without ":PIPE", `defaultPipeline`.
Result<MatmulTiling> parseTileSpec(const std::string& spec, int64_t defaultPipeline);
std::string tileString(const MatmulTiling& t);

// The profile's "matmul" block (absent: an empty model); compute units, peak and bandwidth from
// the profile's top level. Errors name `path` and the field.
Result<MatmulCostModel> parseMatmulCostModel(const nlohmann::json& profile, const std::string& path);

}  // namespace fbl::codegen
