// What a plan asks of a device's memory, against what its profile says the device gives
// (profile::MemoryLimits): the compile report's `memory` block, the line `fblc compile` prints,
// and the first lines of `fblc explain`.
//
// memoryReport:
// 1. Allocations: the arena's pools (buffers of at most the profile's max_alloc_bytes) and each
//    image object; the peak is their sum (every allocation lives for the whole session), the
//    largest is what CL_DEVICE_MAX_MEM_ALLOC_SIZE must admit.
// 2. By role: buffer tensors of the persistent roles (frozen weights, trainables, optimizer state,
//    constants, inputs) by their bytes; images by the role of the tensors they hold; the rest of
//    the arena is the transient region at its peak (activations kept for the backward pass,
//    gradients, scratch, and alignment).
// 3. Fits: the largest allocation against max_alloc_bytes, the peak against app_budget_bytes and
//    global_bytes, each unknown (null) where the profile does not say.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/profile/profile.h"
#include "runtime/plan_file.h"

namespace fbl::report {

struct MemoryReport {
  int64_t arenaBytes = 0;
  int64_t imageBytes = 0;
  int64_t peakBytes = 0;
  int64_t allocations = 0;       // pools and image objects
  int64_t pools = 0;             // the arena's buffers (Plan::poolCount)
  int64_t largestAllocationBytes = 0;
  std::string largestAllocation;  // "the arena, one pool", "pool 0 of N" or "image object N (tensor)"
  // The peak by role (2 above).
  int64_t frozenWeightBytes = 0;
  int64_t trainableBytes = 0;
  int64_t optimizerStateBytes = 0;
  int64_t constantBytes = 0;
  int64_t inputBytes = 0;
  int64_t transientBytes = 0;
  profile::MemoryLimits limits;
  std::optional<bool> fitsMaxAlloc, fitsBudget, fitsGlobal;
  // Every limit the profile gives holds (true when it gives none).
  bool fits() const { return fitsMaxAlloc.value_or(true) && fitsBudget.value_or(true) && fitsGlobal.value_or(true); }
};

MemoryReport memoryReport(const planfile::Plan& plan, const profile::MemoryLimits& limits);
nlohmann::json memoryReportJson(const MemoryReport& r);

// One line: the peak, the largest allocation and whether the profile's device takes them, e.g.
// "memory: peak 7.32 GB in 26 allocations, largest 2.37 GB (the arena): over adreno-830's
// max_alloc_bytes 1.07 GB".
std::string memorySummaryLine(const MemoryReport& r, const std::string& profileName);

// 1.07 GB, 512 KB, 300 B: decimal units, three significant digits.
std::string humanBytes(int64_t bytes);

}  // namespace fbl::report
