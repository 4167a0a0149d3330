// Runs layout-parameterised kernels (codegen/rtile_kernels.h) on an OpenCL device: tensors in any
// Layout (images or buffers), host upload/download through conversion kernels (a row-major
// buffer converted on the device, so no host-side index arithmetic over millions of elements),
// and the MatMul strategy plans of strategy.h, timed by OpenCL events. Used by the kernel tests
// and by `fbl-bench matmul`; the whole-model runtime (runtime/) has its own executor.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/rtile_kernels.h"
#include "compiler/strategy/strategy.h"

namespace fbl::strategy {

class ClSession {
 public:
  // deviceIndex counts devices over all platforms in order; -1: the first GPU, else the first.
  static Result<std::unique_ptr<ClSession>> open(int deviceIndex = -1);
  ~ClSession();
  ClSession(const ClSession&) = delete;
  ClSession& operator=(const ClSession&) = delete;

  const std::string& deviceName() const { return name_; }
  codegen::DeviceClass deviceClass() const { return class_; }
  int64_t computeUnits() const { return computeUnits_; }
  // Options every later build gets after -cl-std=CL1.2: a plan's profile's (Profile::buildOptions),
  // so benchmarks build kernels as the runtime builds the plan's program.
  void setBuildOptions(std::string options) { buildOptions_ = std::move(options); }

  // Storage for `l`: an RGBA/FLOAT image or a float buffer; owned by the session.
  Result<cl_mem> allocate(const layout::Layout& l);
  Result<cl_mem> buffer(size_t floats, const float* init = nullptr);
  void release(cl_mem m);
  // `rowMajor` holds the logical [rows x cols] matrix.
  Status upload(cl_mem dst, const layout::Layout& l, const std::vector<float>& rowMajor);
  Result<std::vector<float>> download(cl_mem src, const layout::Layout& l);
  Result<std::vector<float>> readBuffer(cl_mem b, size_t floats);

  // Builds (once per source) and enqueues; returns the kernel's device time in ms once `wait`.
  Result<double> run(const codegen::RTileKernel& k, const std::vector<cl_mem>& args);

 private:
  ClSession() = default;
  Result<cl_kernel> kernel(const codegen::RTileKernel& k);
  cl_context ctx_ = nullptr;
  cl_device_id dev_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::string name_;
  std::string buildOptions_;
  codegen::DeviceClass class_ = codegen::DeviceClass::kCpu;
  int64_t computeUnits_ = 1;
  std::map<std::string, std::pair<cl_program, cl_kernel>> built_;
  std::vector<cl_mem> owned_;
};

struct MatmulData {
  std::vector<float> a, b, dc;  // inputs, row-major [M x K], [K x N], [M x N]
  std::vector<float> c, da, db; // outputs
};

// Device times of one execution of a plan, per pass: the product and the conversions before it.
struct PassTime {
  double kernelMs = 0, conversionMs = 0;
  double totalMs() const { return kernelMs + conversionMs; }
};

struct MatmulRun {
  MatmulData data;                              // inputs and the outputs of the last repeat
  std::vector<std::map<MatmulPass, PassTime>> repeats;
};

// The tiling of one [m x k] x [k x n] product, splitK resolved.
using TilingFor = std::function<codegen::MatmulTiling(int64_t m, int64_t n, int64_t k)>;
// One tiling for every product; splitK 0: chosen per product for this device (chooseSplitK).
TilingFor fixedTiling(const codegen::MatmulTiling& tiling, int64_t computeUnits);

// Uploads A, B, dC into the plan's layouts, runs forward, dA and dB `repeats` times (after one
// warm-up that also builds the kernels), and downloads C, dA, dB. Each product is tiled by
// `tilingFor`; the split-K sum counts as product time.
Result<MatmulRun> runMatmulPlan(ClSession& s, const MatmulPlan& plan, const TilingFor& tilingFor, MatmulData data,
                                int repeats);

}  // namespace fbl::strategy
