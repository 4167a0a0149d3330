// What the runtime checks of a plan before the device sees any of it. The checksum only says the
// file is the one that was written; these checks say its contents are consistent, so that an
// edited or mis-generated plan is refused with one line instead of reaching clEnqueueNDRangeKernel
// with a launch the device cannot run, or a kernel with an offset outside the arena.
// docs/security.md lists the checks; the program's OpenCL C itself is trusted, not checked.
//
//  1. parse (runtime/plan_file.h): magic, version, checksum, JSON, every index in range;
//  2. checkPlan: every tensor's dtype, shape, bytes, offset, image and blob extent; the staging
//     tensor, loss, step, inputs, trainables, state and commits; each launch's phase, arguments
//     (declared bytes, the kernel's parameter list and element types) and work sizes; no two
//     tensors live at the same time share a byte;
//  3. checkLaunchGeometry: work sizes against the device's limits.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "runtime/plan_file.h"
#include "runtime/status.h"

namespace fbl::rt {

// What the device allows a launch (clGetDeviceInfo).
struct DeviceLimits {
  uint32_t maxDims = 3;                         // CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS
  std::array<uint64_t, 3> maxItemSizes{1, 1, 1};  // CL_DEVICE_MAX_WORK_ITEM_SIZES
  uint64_t maxGroupSize = 1;                    // CL_DEVICE_MAX_WORK_GROUP_SIZE
  uint32_t addressBits = 32;                    // CL_DEVICE_ADDRESS_BITS
  uint64_t maxAllocBytes = 0;                   // CL_DEVICE_MAX_MEM_ALLOC_SIZE
  uint64_t globalBytes = 0;                     // CL_DEVICE_GLOBAL_MEM_SIZE
};

// Every check that needs no device; a refusal is one line naming the launch or tensor and the
// field.
Status checkPlan(const planfile::Plan& plan);
// Each launch's and transfer's work sizes against the device's limits.
Status checkLaunchGeometry(const planfile::Plan& plan, const DeviceLimits& limits);
// parse, checkPlan and (with limits) checkLaunchGeometry; a refusal starts "plan 'PATH': ".
Result<planfile::Plan> loadPlan(const std::string& bytes, const std::string& path, const DeviceLimits* limits);
// The plan in the file `path`: readWholeFile's refusals (no such file, a directory, a failed
// read) in one line naming it, then loadPlan's. What the runtime and every tool that reads a
// plan file (fblc print-plan, explain, diff; fbl-bench estimate) open plans with.
Result<planfile::Plan> readPlanFile(const std::string& path, const DeviceLimits* limits = nullptr);
// "launch 12 (k3_mul, node 'node_mul_3')" or "transfer 4 (...)": how messages name a launch.
std::string launchName(const planfile::Plan& plan, size_t index, bool transfer);

}  // namespace fbl::rt
