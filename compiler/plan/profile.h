// The planner's view of a hardware profile (profiles/<name>.json, read and validated once by
// profile::loadProfile): the constants codegen and the planner need for one kind of GPU, from
// the profile's facts and its typed "opencl", "matmul" and "kernels" blocks. Heuristics live
// here, not inline in passes.
#pragma once

#include <cstdint>
#include <vector>
#include <string>

#include "compiler/codegen/matmul_tiling.h"
#include "compiler/layout/wave_footprint.h"
#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::plan {

struct Profile {
  std::string name;
  // The profile's opencl block (profile::OpenClOptions, whose defaults these are): work-items
  // per group for 1-D launches, and sub-buffer offsets, a multiple of every target's alignment.
  int64_t workgroupSize = profile::OpenClOptions{}.workgroupSize;
  int64_t bufferAlignment = profile::OpenClOptions{}.bufferAlignment;
  int64_t computeUnits = 0;      // 0: unknown (split-K stays off)
  // The device's largest allocation (profile memory.max_alloc_bytes): the arena's pools are no
  // larger. 0: unknown, one pool.
  int64_t maxAllocBytes = 0;
  // The profile's device_class: a CPU (PoCL) takes CPU tilings.
  profile::DeviceClass deviceClass = profile::DeviceClass::kGpu;
  // Options the driver's OpenCL compiler gets for the plan's program, after -cl-std=CL1.2
  // (profile "opencl.build_options"). Vendor-specific by nature, hence in the per-GPU profile:
  // the H200's caps registers so that two MatMul work-groups share a multiprocessor.
  std::string buildOptions;
  // MatMul tilings and the cost model that picks one per product (codegen/matmul_tiling.h).
  codegen::MatmulCostModel matmul;
  // The tiling rules' per-device numbers: the "kernels" block over the device class's defaults
  // (profile::deviceTuning).
  codegen::DeviceTuning tuning;
  // The tiling a MatMul gets without a cost model's choice: the first candidate of the `matmul`
  // block, else kernels.matmul_tile.
  const codegen::MatmulTiling& productTiling() const {
    return matmul.candidates.empty() ? tuning.matmulTile : matmul.candidates.front().tiling;
  }
  // The profile's texture L1, and its bracket's, where it scores R-Tiles by wave footprint
  // ("rtile_cost"): MatMuls then stage their image operands in the order that fetches the fewest
  // bytes of them. Empty otherwise.
  std::vector<layout::TextureL1> textureL1s;
  int64_t waveSize = 1;
};

// `origin` (the file) names the profile in errors.
Result<Profile> plannerProfile(const profile::HardwareProfile& hw, const std::string& origin);

}  // namespace fbl::plan
