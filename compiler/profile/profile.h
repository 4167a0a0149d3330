// A GPU hardware profile: the facts R-Tile's pruning and cost function read (wave size, image
// limits, texture cache geometry, Figure-4 access throughput). One JSON file per GPU lives in
// profiles/; every number carries its provenance (measured here, queried from the driver, taken
// from public vendor material, estimated, or pending measurement) so a reader can tell a fact
// from a guess. docs/profiles.md cites the source of every public number.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/profile/kernel_blocks.h"
#include "compiler/support/result.h"

namespace fbl::profile {

// The four access patterns of the paper's Figure 4 (supplement, "Texture spatial data locality"):
// each thread streams through its own section of an RGBA-float image2d.
enum class AccessPattern {
  kRow,     // fixed y, iterating x
  kColumn,  // fixed x, iterating y
  kBlock4,  // 4 texels wide, row by row down the section
  kBlock8,  // 8 texels wide, row by row down the section
};
inline constexpr AccessPattern kAllAccessPatterns[] = {AccessPattern::kRow, AccessPattern::kColumn,
                                                       AccessPattern::kBlock4,
                                                       AccessPattern::kBlock8};
const char* accessPatternName(AccessPattern p);  // "row", "column", "block4", "block8"

// Figure 4 as a table: throughput for each pattern at each work-group thread count. `unit` is
// "GB/s" when measured, or "relative" when the values are ratios to column-major (as the paper
// prints them). Only ratios between patterns at one thread count are used by the cost function,
// so both units serve it.
struct AccessTable {
  std::string unit = "GB/s";
  std::vector<int> threads;
  std::map<AccessPattern, std::vector<double>> throughput;  // one value per entry of `threads`

  // Throughput of `p` at the largest measured thread count <= `t` (the smallest if none is).
  double at(AccessPattern p, int t) const;
};

// The texture cache block the hardware fetches on a miss, in texels (the paper's C_h x C_w).
struct TextureBlock {
  int h = 1;
  int w = 1;
};

// The planner's OpenCL settings, the profile's optional "opencl" block with its own
// "provenance" string: the work-group size of 1-D launches, the alignment of tensor offsets in
// the arena (a multiple of every target's base alignment), and options appended to
// -cl-std=CL1.2 when the driver builds the plan's program (vendor flags such as a register cap).
struct OpenClOptions {
  bool present = false;
  int64_t workgroupSize = 64;
  int64_t bufferAlignment = 512;
  std::string buildOptions;
  std::string provenance;
};

// Where a number came from. The JSON spells it "<kind>" or "<kind>: <detail>".
enum class SourceKind { kMeasured, kQueried, kPublic, kDerived, kEstimated, kPending };
const char* sourceKindName(SourceKind k);  // "measured", "queried", "public", "derived", ...

// Image (texture) storage for whole-model plans: whether the device has images at all
// (CL_DEVICE_IMAGE_SUPPORT), whether its image reads go through a texture cache that buffer reads
// bypass (what makes `--storage auto` choose images), whether an image can be created over a
// buffer (cl_khr_image2d_from_buffer: images could then share the arena) and the row pitch that
// needs, in pixels (CL_DEVICE_IMAGE_PITCH_ALIGNMENT).
struct ImageStorage {
  bool supported = false;
  bool textureCache = false;
  bool fromBuffer = false;
  int64_t pitchAlignmentPixels = 0;  // 0: unknown or not applicable
};

// What the device lets a plan allocate. global_bytes: CL_DEVICE_GLOBAL_MEM_SIZE;
// max_alloc_bytes: CL_DEVICE_MAX_MEM_ALLOC_SIZE, the largest single buffer or image (1 GiB on
// Adreno 7xx); app_budget_bytes: what an app may use before the OS kills it (about 3 GB on iOS,
// near 4 GB of 8 under Android's lmkd). Each is absent (JSON null) while pending measurement;
// the whole block is optional, and a profile without it says nothing about memory.
struct MemoryLimits {
  bool present = false;
  std::optional<int64_t> globalBytes;
  std::optional<int64_t> maxAllocBytes;
  std::optional<int64_t> appBudgetBytes;
};
inline constexpr const char* kMemoryFields[] = {"global_bytes", "max_alloc_bytes", "app_budget_bytes"};

// What `fblc compile` does for this device unless the command line says otherwise: a phone's
// profile makes the plan fit an app (docs/profiles.md, "Compile defaults"). Optional; its
// provenance key is "compile_defaults". base_weights: fp32, fp16, int8 or int4 (--base-weights);
// precision: fp32, fp16 or bf16 (--precision); memory_budget: "auto" or a number of bytes
// (--memory-budget).
struct CompileDefaults {
  bool present = false;
  std::string baseWeights;
  std::string precision;
  std::string memoryBudget;
};

// How R-Tile candidates are scored (compiler/layout/rtile_cost.h), the profile's optional
// "rtile_cost" block; its provenance key is "rtile_cost". Without it: the paper's per-thread walk
// table (tile-traversal-performance). {"model": "wave-footprint", "tile": [TM, TN, TK],
// "work_items": W}: the texture-L1 lines the waves of rtile_matmul.cl's staging fetch
// (compiler/layout/wave_footprint.h) with the kernel tiling named here, which must be the one the
// planner gives its MatMuls (plan/profile.cc refuses a profile where they differ).
struct WaveFootprintScoring {
  int64_t tm = 0, tn = 0, tk = 0, workItems = 0;
};

// The values a number no public source pins down may take, from the profile's optional
// "bracket" block (provenance key "bracket" gives each end's source); every list holds the
// profile's own value. The wave-footprint cost scores tiles and staging orders across the texture
// L1's sizes and line shapes, and `fbl-bench waves` reports every combination, so a verdict says
// which unknown it rests on. An empty list: the profile's value only.
struct Bracket {
  std::vector<int64_t> l1TextureBytes;     // l1_texture_cache_bytes
  std::vector<TextureBlock> textureBlocks;  // texture_block: the texture-L1 line's shape
  std::vector<double> l2GBs;               // memory_model.l2_bandwidth_gbps
  // Cache levels no model has yet, 0 standing for absent (the models' own value, so every list
  // holds 0): a cluster cache between the texture L1s and L2 (Adreno 7xx/8xx), and a system-level
  // cache behind L2. The estimates cost the SLC in their DRAM term; a cluster cache could only
  // lower their L2 term, so they report whether that term binds anywhere.
  std::vector<int64_t> clusterCacheBytes;  // cluster_cache_bytes
  std::vector<int64_t> slcBytes;           // slc_bytes
};

struct HardwareProfile {
  std::string name;    // file stem, e.g. "adreno-830"
  std::string device;  // the device as its vendor or driver names it
  std::string notes;   // one line: how this profile was made
  DeviceClass deviceClass = DeviceClass::kGpu;

  int waveSize = 0;  // threads a SIMD instruction runs in lock-step (warp, wave, sub-group)
  int64_t image2dMaxWidth = 0;
  int64_t image2dMaxHeight = 0;
  std::vector<std::string> texelFormats;  // "RGBA/FLOAT", "RGBA/HALF_FLOAT", ...
  int64_t l1TextureCacheBytes = 0;
  int cacheLineBytes = 0;
  TextureBlock textureBlock;
  int64_t l2CacheBytes = 0;
  int computeUnits = 0;
  ImageStorage imageStorage;
  // Pending-measurement numbers are absent rather than invented.
  std::optional<double> bandwidthGBs;
  std::optional<double> peakGflops;
  std::optional<AccessTable> accessTable;
  MemoryLimits memory;  // provenance keys "memory.global_bytes", ...
  CompileDefaults compileDefaults;
  std::optional<WaveFootprintScoring> waveFootprint;
  Bracket bracket;
  OpenClOptions opencl;
  // The kernel generator's blocks (kernel_blocks.h), typed; absent where the file has none.
  std::optional<MatmulBlock> matmul;
  std::optional<KernelsBlock> kernels;

  // Field name (as in the JSON) -> provenance text; every field above has one.
  std::map<std::string, std::string> provenance;
  // Fields this version does not know: kept so a rewrite loses nothing another tool wrote.
  nlohmann::json extra = nlohmann::json::object();
};

// Parses and validates. Errors are one line naming `origin` (the file) and the field.
Result<HardwareProfile> profileFromJson(const nlohmann::json& j, const std::string& origin);
nlohmann::json profileToJson(const HardwareProfile& p);

Result<HardwareProfile> loadProfile(const std::string& path);

// The top-level keys of `j` this schema does not define (other tools' fields in the same file,
// e.g. the simulator's "memory_model"), so that rewriting a profile keeps them.
nlohmann::json extraFields(const nlohmann::json& j);
Status saveProfile(const HardwareProfile& p, const std::string& path);

// The numbers codegen's tiling rules get on this device: its class's defaults (defaultTuning over
// opencl.workgroup_size), attention within matmul.local_memory_bytes where that is set, and the
// kernels block over them.
DeviceTuning deviceTuning(const HardwareProfile& p);

// Checks the invariants every consumer relies on (positive sizes, a table per pattern, a
// provenance per field); profileFromJson calls it, and so should anyone who builds one by hand.
Status validateProfile(const HardwareProfile& p, const std::string& origin);

}  // namespace fbl::profile
