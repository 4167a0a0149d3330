// What the simulator counts for one launch (or a sum of launches), the roofline time estimate
// from those counts, and their JSON form (one object; the plugin writes one a launch).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/support/result.h"
#include "sim/memory_model.h"

namespace fbl::sim {

struct AccessCounters {
  int64_t launches = 0;
  int64_t workItems = 0;
  int64_t instructions = 0;  // LLVM IR instructions Oclgrind executed (simulator speed)
  int64_t flops = 0;         // executed FP32 add/sub/mul/div (1) and fma/mad (2) per element
  // Work-item accesses to global memory; an image read's channel loads count as one.
  int64_t loads = 0, stores = 0, loadBytes = 0, storeBytes = 0;
  int64_t imageLoads = 0, imageStores = 0;
  int64_t waveInstructions = 0;  // wave-level memory instructions after regrouping
  // L1 requests are distinct lines per wave instruction.
  int64_t l1TextureHits = 0, l1TextureMisses = 0, l1BufferHits = 0, l1BufferMisses = 0;
  // L2 requests: L1 misses' lines, and buffer loads that bypass L1. Stores are counted apart.
  int64_t l2Hits = 0, l2Misses = 0, l2StoreLines = 0;
  int64_t dramReadBytes = 0, dramWriteBytes = 0;

  int64_t l1Hits() const { return l1TextureHits + l1BufferHits; }
  int64_t l1Misses() const { return l1TextureMisses + l1BufferMisses; }
  int64_t dramBytes() const { return dramReadBytes + dramWriteBytes; }
  int64_t l2Requests() const { return l2Hits + l2Misses + l2StoreLines; }
  AccessCounters& operator+=(const AccessCounters& o);
  AccessCounters operator-(const AccessCounters& o) const;
};

// The roofline, in milliseconds: the largest of the FP32 time at the profile's peak, the DRAM
// time at its bandwidth and the time L2 takes to serve every request (L1 misses, buffer loads
// that bypass L1, stores) at the L2 bandwidth. Latency, the scheduler, the compiler and launch
// overheads are not in it.
double estimatedMs(const AccessCounters& c, const MemoryModel& m);
// The term of estimatedMs that is largest: "compute", "DRAM" or "L2".
const char* bindingTerm(const AccessCounters& c, const MemoryModel& m);

nlohmann::json countersToJson(const AccessCounters& c);
Result<AccessCounters> countersFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace fbl::sim
