// Runs layout-parameterised kernels (codegen/rtile_kernels.h) on an OpenCL device: tensors in any
// Layout (images or buffers), uploaded and downloaded row-major, each kernel timed by OpenCL
// events. A harness for the kernel tests and `fbl-bench`, outside the
// compiler; whole-model plans run on the runtime (runtime/).
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/rtile_kernels.h"
#include "compiler/layout/layout.h"
#include "compiler/support/result.h"

namespace fbl::harness {

class ClSession {
 public:
  // deviceIndex counts devices over all platforms in order; -1: the first GPU, else the first.
  static Result<std::unique_ptr<ClSession>> open(int deviceIndex = -1);
  ~ClSession();
  ClSession(const ClSession&) = delete;
  ClSession& operator=(const ClSession&) = delete;

  const std::string& deviceName() const { return name_; }
  profile::DeviceClass deviceClass() const { return class_; }
  int64_t computeUnits() const { return computeUnits_; }
  // Options every later build gets after -cl-std=CL1.2: a plan's profile's (Profile::buildOptions),
  // so benchmarks build kernels as the runtime builds the plan's program.
  void setBuildOptions(std::string options) { buildOptions_ = std::move(options); }

  // Storage for `l`: an RGBA/FLOAT image or a float buffer; owned by the session.
  Result<cl_mem> allocate(const layout::Layout& l);
  Result<cl_mem> buffer(size_t floats, const float* init = nullptr);
  // What a narrow kernel with K in chunks takes after its operands (RTileKernel::
  // chunkPartialFloats, chunkArrivals): the partial planes, filled with NaN so that a plane read
  // before it is written shows, and the counts at zero. None for any other kernel. Release each.
  Result<std::vector<cl_mem>> chunkBuffers(const codegen::RTileKernel& k);
  void release(cl_mem m);
  // `rowMajor` holds the logical tensor. Up to kHostPackMaxElements plain-f32 elements are packed
  // on the host through the layout's map (Layout::locate), padding NaN so that a kernel that reads
  // it shows; larger tensors, or all with convertOnDevice(true), are converted on the device by
  // rtile_convert.cl, which writes no padding.
  Status upload(cl_mem dst, const layout::Layout& l, const std::vector<float>& rowMajor);
  Result<std::vector<float>> download(cl_mem src, const layout::Layout& l);
  Result<std::vector<float>> readBuffer(cl_mem b, size_t floats);
  // Host packing builds no kernel, where a conversion kernel costs a small test more than the
  // kernel it tests (a PoCL build each); device conversion leaves what it wrote in the device's
  // caches, which `fbl-bench cache` relies on, and does no host arithmetic over millions of elements.
  static constexpr int64_t kHostPackMaxElements = int64_t{1} << 20;
  void convertOnDevice(bool yes) { convertOnDevice_ = yes; }

  // Builds (once per source) and enqueues; returns the kernel's device time in ms once `wait`.
  Result<double> run(const codegen::RTileKernel& k, const std::vector<cl_mem>& args);
  // `count` launches of `k` queued back to back as the runtime queues a step (no event but the
  // first's and the last's, no wait between them): the device ms from the first's start to the
  // last's end, over `count`. What a launch costs in a step, where launches overlap their overheads.
  Result<double> runQueued(const codegen::RTileKernel& k, const std::vector<cl_mem>& args, int count);

 private:
  ClSession() = default;
  Result<cl_kernel> kernel(const codegen::RTileKernel& k);
  // kernel(k) with `args` bound.
  Result<cl_kernel> bound(const codegen::RTileKernel& k, const std::vector<cl_mem>& args);
  Status enqueue(cl_kernel kern, const codegen::RTileKernel& k, cl_event* ev);
  bool packOnHost(const layout::Layout& l) const;
  // The whole storage of `m` (an image's texels RGBA), read or written in one blocking transfer.
  Status writeStorage(cl_mem m, const layout::Layout& l, const std::vector<float>& physical);
  Result<std::vector<float>> readStorage(cl_mem m, const layout::Layout& l);
  cl_context ctx_ = nullptr;
  cl_device_id dev_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::string name_;
  std::string buildOptions_;
  profile::DeviceClass class_ = profile::DeviceClass::kCpu;
  int64_t computeUnits_ = 1;
  bool convertOnDevice_ = false;
  std::map<std::string, std::pair<cl_program, cl_kernel>> built_;
  std::vector<cl_mem> owned_;
};

}  // namespace fbl::harness
