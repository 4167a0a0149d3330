// The per-device numbers of codegen's tiling rules: work-group sizes, tile bounds and local
// memory budgets, read from a profile's "kernels" block (docs/profiles.md). The rules that use
// them stay in code (attentionTiling, reduceGroupSize, chooseMatmulTiling, ...); a profile without
// the block gets defaultTuning of its device class, which docs/profiles.md lists.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "compiler/codegen/matmul_tiling.h"
#include "compiler/support/result.h"

namespace fbl::codegen {

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
};

// The built-in numbers of each device class; `workgroup` is the profile's 1-D work-group
// (opencl.workgroup_size), which bounds the CPU's loss and the GPU's reduction work-groups.
DeviceTuning defaultTuning(DeviceClass d, int64_t workgroup = 64);

// `block` (the profile's "kernels" object) over `base`: every key it sets replaces base's value.
// Errors name `path` and the field; an unknown key is an error (a typo would silently keep the
// default), and so is a block without its "provenance" string.
Result<DeviceTuning> parseDeviceTuning(const nlohmann::json& block, DeviceTuning base, const std::string& path);

}  // namespace fbl::codegen
