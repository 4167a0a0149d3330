// Launch batching: launches of one narrow-product kernel that do not depend on each other run as
// one launch (plan_builder.cc, after the launch list is built and before memory is planned).
//
// A narrow product (LoRA's x A, dy B, t^T dy, x^T dt) moves a few MB, which the H200 streams in
// about a microsecond, while every launch costs 4-6 us before its kernel runs
// (docs/kernels.md, "Narrow products"). Siblings share their shapes and layouts, so their
// kernels are one source: q, k and v's x A read the same x; their x^T dt too; k and v's dy B
// and t^T dy have the same shapes under GQA; gate and up likewise. One launch runs them all
// (rtile_matmul_narrow.cl's batched entry, codegen::narrowBatchEntry), each product a range of
// its work-groups, tiled for the whole launch (codegen::LaunchSpec::tiledForBatch: the fill
// target counts every product, so each takes longer K slices than it would alone).
//
// The rule: a launch may move to any point between the last launch before it that it depends
// on and the first launch after it that depends on it (a conflict: one writes a tensor the
// other reads or writes). Launches with one batch key join a group while their ranges still
// share a point and none depends on another; the group runs at the earliest such point. Groups
// form one at a time, first launch first, each on the order the previous ones left, so that no
// two moves cross, in passes until one forms none (a group that moved a dependent later may
// have made room for an earlier launch). Moving a launch keeps values alive longer (its inputs
// when it runs later, its outputs when it runs earlier): a group may lengthen the lives of
// transient values by at most the bytes its launches write, so that q's x^T dt never waits a
// layer for another layer's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::plan {

// What batching needs of one launch.
struct LaunchAccess {
  std::vector<int32_t> args;    // the tensors it reads or writes
  std::vector<int32_t> writes;  // of which those it writes
  // Launches may run as one only with equal, non-empty keys: the kernel source, the phase and
  // the work sizes (plan_builder.cc).
  std::string batchKey;
};

struct BatchLimits {
  int64_t maxProducts = 1;  // launches per batch; below 2 nothing is batched
  int64_t maxArgs = 30;     // arguments of a batched launch (kMaxBatchedArgs)
};

// OpenCL 1.2 promises a kernel 256 bytes of arguments (CL_DEVICE_MAX_PARAMETER_SIZE, embedded
// profile; 1024 in the full profile): 16 bytes a buffer argument, its pool and its offset.
constexpr int64_t kMaxBatchedArgs = 16;

// The launch order after batching: each entry holds the launches (indices into `launches`) that
// run as one launch there, in their original order; an entry of one index is a launch as it was.
// `transientBytes`: per tensor, its bytes when its life is planned (0 for tensors that live
// through the whole step).
std::vector<std::vector<size_t>> batchIndependentLaunches(const std::vector<LaunchAccess>& launches,
                                                          const std::vector<int64_t>& transientBytes,
                                                          const BatchLimits& limits);

}  // namespace fbl::plan
