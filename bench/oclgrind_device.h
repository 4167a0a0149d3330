// OpenCL work of this process run on Oclgrind with the cache-simulator plugin
// (sim/oclgrind_plugin.cc), and the plugin's per-launch records read back.
//
//  1. useOclgrind() points the ICD loader at Oclgrind alone (OCL_ICD_VENDORS: a folder holding
//     one .icd file) and Oclgrind at the plugin (OCLGRIND_PLUGINS). ocl-icd reads the vendors
//     once, at the process's first OpenCL call, so it must run before any. It also defines
//     `restrict` away in Oclgrind's builds (the -46 CL_INVALID_KERNEL_NAME of plans, see .cc).
//  2. setModels() writes the memory models the next OpenCL context's plugin simulates, all
//     from the same accesses.
//  3. take() returns the launches recorded since the last call, in execution order, with one
//     set of counters per model.
#pragma once

#include <string>
#include <vector>

#include "compiler/support/result.h"
#include "sim/access_counters.h"
#include "sim/memory_model.h"

namespace fbl::bench {

struct LaunchRecord {
  std::string kernel;
  std::vector<sim::AccessCounters> counters;  // per model, in setModels' order
};

class OclgrindDevice {
 public:
  static Result<OclgrindDevice> useOclgrind();
  Status setModels(const std::vector<sim::MemoryModel>& models);
  Result<std::vector<LaunchRecord>> take();
  const std::string& folder() const { return dir_; }

 private:
  std::string dir_, records_, model_;
  size_t consumed_ = 0;  // bytes of the records file already returned
  size_t models_ = 0;
};

}  // namespace fbl::bench
