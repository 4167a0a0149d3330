// The memory hierarchy `fbl-bench cache` simulates for one GPU: the parameters of its caches,
// the path each kind of access takes, and the rates of its roofline. Most numbers are fields a
// hardware profile already has (wave size, compute units, texture L1 size and block, L2 size,
// DRAM bandwidth, FP32 peak); the rest (associativity, replacement, line sizes, whether buffers
// go through an L1) live in the profile's `memory_model` block, each with its provenance like
// every other profile field (docs/cache.md lists them and their sources).
//
// The model, in order of an access's path:
//  1. A wave issues one memory instruction for up to `waveSize` lanes; lanes touching one line
//     make one request for it.
//  2. Image reads go through the texture L1 of the work-group's compute unit, whose lines are
//     blocks of textureBlock.h x textureBlock.w texels (images are stored tiled in those blocks).
//  3. Buffer loads go through the compute unit's buffer L1 when the GPU has one (Mali: the
//     load/store cache), else straight to L2 (Adreno: buffers bypass the texture L1).
//  4. An L1 miss fetches the L1 line's bytes from L2, one L2 line at a time; an L2 miss reads
//     the L2 line from DRAM.
//  5. Stores go to L2 (write-allocate, write-back, no fetch); dirty lines reach DRAM when evicted
//     and at the end of every launch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/support/result.h"

namespace fbl::sim {

enum class Replacement { kLru, kFifo };
const char* replacementName(Replacement r);  // "lru", "fifo"

struct CacheGeometry {
  int64_t bytes = 0;      // capacity
  int64_t lineBytes = 0;  // for the texture L1: the texel block's bytes at 16 B a texel
  int ways = 1;           // 0: fully associative
  Replacement replacement = Replacement::kLru;

  int64_t lines() const { return lineBytes > 0 ? bytes / lineBytes : 0; }
  // Sets of `ways` lines each (1 when fully associative).
  int64_t sets() const;
};

struct TexelBlock {
  int h = 1, w = 1;  // texels
};

struct MemoryModel {
  std::string profile;  // the profile's name
  int waveSize = 1;
  int computeUnits = 1;
  TexelBlock textureBlock;
  CacheGeometry textureL1;               // per compute unit; lineBytes = block texels x 16 B
  std::optional<CacheGeometry> bufferL1;  // per compute unit; absent: buffers go to L2
  CacheGeometry l2;                      // shared by all compute units
  double dramGBs = 0;                    // DRAM bandwidth of the roofline
  double l2GBs = 0;                      // L2-to-L1 bandwidth of the roofline (all compute units)
  double peakGflops = 0;                 // FP32 rate of the roofline
  // Field of the `memory_model` block (or of the profile) -> its provenance text.
  std::map<std::string, std::string> provenance;
};

// The model of a profile file: its `memory_model` block plus the profile fields named above.
// Errors are one line naming the file and the field.
Result<MemoryModel> loadMemoryModel(const std::string& profilePath);
Result<MemoryModel> memoryModelFromProfileJson(const nlohmann::json& profile, const std::string& origin);

// The resolved model as flat JSON (what the Oclgrind plugin reads) and back.
nlohmann::json memoryModelToJson(const MemoryModel& m);
Result<MemoryModel> memoryModelFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace fbl::sim
