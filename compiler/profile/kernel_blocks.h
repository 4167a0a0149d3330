// The profile's blocks for the kernel generator, typed: "matmul" (the MatMul tilings a cost model
// picks from, with their measured efficiencies, and the narrow kernel's settings) and "kernels"
// (the per-device numbers of codegen's tiling rules, over its device class's defaults). They are
// parsed and checked with the rest of the profile (profileFromJson) and written back by
// profileToJson; codegen's rules (codegen/matmul_tiling.h, the emitters) read them.
// docs/profiles.md lists every field.
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compiler/support/result.h"

namespace fbl::profile {

// What kind of OpenCL device runs the plan (CL_DEVICE_TYPE, the profile's "device_class"):
// kernels take a CPU's or a GPU's tilings and defaults.
enum class DeviceClass { kCpu, kGpu };
const char* deviceClassName(DeviceClass d);  // "cpu", "gpu"

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
  friend bool operator==(const MatmulTiling&, const MatmulTiling&) = default;
};

// The tuned set (splitK 0: per product, chooseSplitK): GPUs (hundreds of lanes per CU, 32+ KB
// local memory) get 128x128x16 tiles with 8x8 per work-item (256 work-items, 16.5 KB local) and
// register prefetch; CPUs (PoCL: a work-group is a loop nest on one core, values live across a
// barrier go through memory) get 64x64x16 with 4x4 per work-item and no prefetch.
MatmulTiling matmulTiling(DeviceClass d);

// "TMxTNxTK/RMxRN" (and the pipeline depth) <-> MatmulTiling; parse errors name the text.
Result<MatmulTiling> parseTile(const std::string& text, int64_t pipeline);
// "TMxTNxTK/RMxRN[:PIPE]", as fbl-bench's --tile takes it: without ":PIPE", `defaultPipeline`.
Result<MatmulTiling> parseTileSpec(const std::string& spec, int64_t defaultPipeline);
std::string tileString(const MatmulTiling& t);

struct MatmulCandidate {
  MatmulTiling tiling;         // splitK unused: the cost model chooses it per product
  double efficiency = 1.0;     // fraction of peak FMA throughput a full wave of these tiles reaches
  int64_t groupsPerUnit = 1;   // work-groups resident on one compute unit at once
  friend bool operator==(const MatmulCandidate&, const MatmulCandidate&) = default;
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
  friend bool operator==(const NarrowOptions&, const NarrowOptions&) = default;
};

// rtile_matmul_narrow.cl's tree: partial[4][work-items] float4.
inline constexpr int64_t kNarrowLocalBytesPerWorkItem = 4 * 16;

// The "matmul" block. Fields it leaves out keep these defaults, and profileToJson writes only
// those that differ from them.
struct MatmulBlock {
  std::vector<MatmulCandidate> candidates;  // "tilings"; empty: the kernels block's matmul_tile
  double launchUs = 0;          // fixed cost of one launch (a split-K sum is one more)
  int64_t localMemoryBytes = 0; // 0: unknown (no candidate is excluded for its local tiles)
  int64_t maxSplit = 32;
  double occupancyExponent = 0.6;  // partial waves: throughput x (active / groupsPerUnit)^this
  double tileLoadGbps = 0;         // per compute unit, global -> local tile loads; 0: not modelled
  NarrowOptions narrow;
  std::string provenance, narrowProvenance;
  friend bool operator==(const MatmulBlock&, const MatmulBlock&) = default;
};

// Errors name `path` (the file) and the field. Tilings need the profile's compute units, peak
// and bandwidth (`facts` says whether it has all three).
Result<MatmulBlock> parseMatmulBlock(const nlohmann::json& block, bool facts, const std::string& path);
nlohmann::json matmulBlockToJson(const MatmulBlock& m);

// Flash attention's block tiling (attention_emitters.cc, blockTiling).
struct AttentionTuning {
  int64_t localBytes = 32 * 1024;  // local memory one work-group's tiles may take
  int64_t maxTile = 32;            // largest (power-of-two) rows of a query/key tile
  int64_t workItems = 64;          // work-items per group before the accumulator rule widens it
  int64_t maxWorkItems = 256;      // the widening stops here
  int64_t maxAccumulators = 64;    // accumulators one work-item keeps in registers
  // Rows of the smallest tile the backward's dq kernel takes with whole head dims; below it the
  // head dims pass in chunks at a larger tile. 8: whole rows wherever 8 fit, as the other kernels.
  int64_t dqMinWholeTile = 8;
  // The same for the forward and dk/dv kernels.
  int64_t minWholeTile = 8;
  // Work-groups a compute unit should have: where a kernel's blocks fall short, its streamed range
  // (keys for the forward and dq, queries for dk/dv) splits among work-groups whose partials a
  // last kernel combines (streamSplits). 0: never split (PoCL, phones: blocks already fill them).
  int64_t minGroupsPerUnit = 0;
  friend bool operator==(const AttentionTuning&, const AttentionTuning&) = default;
};

// Built-in launch shapes of the conversion and split-K sum kernels (rtile_kernels.h), the same
// for every device class; a profile may still set its own.
inline constexpr std::array<int64_t, 2> kConvertWorkgroup = {16, 4};
inline constexpr int64_t kSplitKSumWorkgroup = 64;

struct DeviceTuning {
  // MatMul tiling where the profile has no "matmul" cost model (split-K by chooseSplitK).
  MatmulTiling matmulTile;
  AttentionTuning attention;
  // Row reductions (reduceGroupSize): the widest tree of work-items per row; 1: one work-item
  // per row (a CPU runs a work-group as a loop on one core, a tree buys nothing there).
  int64_t reduceMaxWorkgroup = 1;
  // Softmax cross-entropy's work-items per row (sceLossShape), rounded down to a power of two.
  int64_t lossWorkgroup = 64;
  std::array<int64_t, 2> convertWorkgroup = kConvertWorkgroup;  // 4x4 elements per work-item
  int64_t splitKSumWorkgroup = kSplitKSumWorkgroup;              // one texel per work-item
  // Output elements per work-item of elementwise.cl's kernels (elementwiseLaunch): a GPU needs
  // several loads in flight per work-item to cover memory latency; 1 is one element each.
  int64_t elementwiseItems = 1;
  friend bool operator==(const DeviceTuning&, const DeviceTuning&) = default;
};

// The built-in numbers of each device class; `workgroup` is the profile's 1-D work-group
// (opencl.workgroup_size), which bounds the CPU's loss and the GPU's reduction work-groups.
DeviceTuning defaultTuning(DeviceClass d, int64_t workgroup = 64);

// The "kernels" block: the numbers it sets (`set` holds their JSON names, "matmul_tile",
// "attention.local_bytes", ...), each replacing the device class's default; the rest of `values`
// is unused. profileToJson writes back exactly the fields the file set.
struct KernelsBlock {
  DeviceTuning values;
  std::set<std::string> set;
  std::string provenance;
  DeviceTuning over(DeviceTuning base) const;
  friend bool operator==(const KernelsBlock&, const KernelsBlock&) = default;
};

// An unknown key is an error (a typo would silently keep the default), and so is a block without
// its "provenance" string. `base` is what the block's numbers are checked against together
// (attention's work_items within max_work_items).
Result<KernelsBlock> parseKernelsBlock(const nlohmann::json& block, const DeviceTuning& base, const std::string& path);
nlohmann::json kernelsBlockToJson(const KernelsBlock& k);

}  // namespace fbl::profile
