// OpenCL execution of layout-parameterised kernels:
//  1. open: the chosen device, a profiling queue;
//  2. tensors: images (RGBA/FLOAT, the layout's width x height) or buffers, owned by the session;
//  3. upload/download: packed on the host through the layout's map, or (large tensors) a
//     row-major buffer converted on the device by rtile_convert.cl;
//  4. run: builds a kernel once per source, enqueues it and returns its event time.
#include "harness/cl_session.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "compiler/support/opencl_devices.h"

namespace fbl::harness {

using codegen::RTileKernel;
using layout::Layout;

Result<std::unique_ptr<ClSession>> ClSession::open(int deviceIndex) {
  FBL_ASSIGN(std::vector<ClDevice> listed, listClDevices());
  std::vector<cl_device_id> devices;
  for (const ClDevice& d : listed) devices.push_back(d.device);
  cl_device_id dev = devices.front();
  if (deviceIndex >= 0) {
    if (deviceIndex >= static_cast<int>(devices.size()))
      return makeError("OpenCL: device {} requested, {} found", deviceIndex, devices.size());
    dev = devices[deviceIndex];
  } else {
    for (cl_device_id d : devices) {
      cl_device_type t = 0;
      clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof(t), &t, nullptr);
      if (t & CL_DEVICE_TYPE_GPU) {
        dev = d;
        break;
      }
    }
  }
  std::unique_ptr<ClSession> s(new ClSession());
  s->dev_ = dev;
  s->name_ = clDeviceString(dev, CL_DEVICE_NAME);
  cl_device_type t = 0;
  clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof(t), &t, nullptr);
  s->class_ = (t & CL_DEVICE_TYPE_GPU) ? profile::DeviceClass::kGpu : profile::DeviceClass::kCpu;
  cl_uint cus = 1;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cus), &cus, nullptr);
  s->computeUnits_ = cus;
  cl_int err = CL_SUCCESS;
  s->ctx_ = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return clError("clCreateContext", err);
  s->queue_ = clCreateCommandQueue(s->ctx_, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) return clError("clCreateCommandQueue", err);
  return s;
}

ClSession::~ClSession() {
  if (queue_) clFinish(queue_);
  for (cl_mem m : owned_) clReleaseMemObject(m);
  for (auto& [src, pk] : built_) {
    clReleaseKernel(pk.second);
    clReleaseProgram(pk.first);
  }
  if (queue_) clReleaseCommandQueue(queue_);
  if (ctx_) clReleaseContext(ctx_);
}

Result<cl_mem> ClSession::allocate(const Layout& l) {
  cl_int err = CL_SUCCESS;
  cl_mem m = nullptr;
  if (l.storage() == layout::Storage::Image2D) {
    cl_image_format fmt{CL_RGBA, CL_FLOAT};
    cl_image_desc desc{};
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = static_cast<size_t>(l.imageWidth());
    desc.image_height = static_cast<size_t>(l.imageHeight());
    // Checked here: NVIDIA's driver creates an image past its limit and the first kernel that
    // reads it faults (error -9999 at the next wait).
    size_t maxW = 0, maxH = 0;
    clGetDeviceInfo(dev_, CL_DEVICE_IMAGE2D_MAX_WIDTH, sizeof maxW, &maxW, nullptr);
    clGetDeviceInfo(dev_, CL_DEVICE_IMAGE2D_MAX_HEIGHT, sizeof maxH, &maxH, nullptr);
    if (desc.image_width > maxW || desc.image_height > maxH)
      return makeError("OpenCL: an image of {}x{} texels for {} exceeds the device's {}x{}", desc.image_width, desc.image_height, l.str(), maxW, maxH);
    m = clCreateImage(ctx_, CL_MEM_READ_WRITE, &fmt, &desc, nullptr, &err);
    if (err != CL_SUCCESS)
      return makeError("OpenCL: clCreateImage {}x{} texels for {} failed (error {})", desc.image_width,
                       desc.image_height, l.str(), err);
  } else {
    m = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, static_cast<size_t>(l.bufferSize()) * sizeof(float), nullptr, &err);
    if (err != CL_SUCCESS) return clError("clCreateBuffer", err);
  }
  owned_.push_back(m);
  return m;
}

Result<cl_mem> ClSession::buffer(size_t floats, const float* init) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(ctx_, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0),
                            std::max<size_t>(floats, 1) * sizeof(float), const_cast<float*>(init), &err);
  if (err != CL_SUCCESS) return clError("clCreateBuffer", err);
  owned_.push_back(m);
  return m;
}

Result<std::vector<cl_mem>> ClSession::chunkBuffers(const codegen::RTileKernel& k) {
  if (k.chunkArrivals == 0) return std::vector<cl_mem>{};
  const auto floats = static_cast<size_t>(k.chunkPartialFloats), counts = static_cast<size_t>(k.chunkArrivals);
  FBL_ASSIGN(cl_mem planes, buffer(floats, std::vector<float>(floats, std::nanf("")).data()));
  auto arrivals = buffer(counts, std::vector<float>(counts, 0.0f).data());  // int 0 is float 0.0f's bytes
  if (!arrivals.ok()) {
    release(planes);
    return arrivals.error();
  }
  return std::vector<cl_mem>{planes, *arrivals};
}

void ClSession::release(cl_mem m) {
  std::erase(owned_, m);
  clReleaseMemObject(m);
}

static std::string buildLog(cl_program prog, cl_device_id dev) {
  size_t n = 0;
  clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  return log;
}

// FBL_CL_DUMP_DIR=DIR writes each built program's source to DIR/NAME.cl and its binary to
// DIR/NAME.bin (PTX on NVIDIA): what the driver's compiler made of a kernel (vector local loads,
// fused multiply-adds) can be read without the vendor's tools, and the source rebuilt offline.
// Benchmarks only, like FBL_CL_BUILD_LOG.
static void writeFile(const std::string& path, const std::string& bytes) {
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
}

static void dumpProgram(cl_program prog, const char* dir, const std::string& name, const std::string& source) {
  writeFile(fmt::format("{}/{}.cl", dir, name), source);
  size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS || size == 0) return;
  std::string binary(size, '\0');
  unsigned char* data = reinterpret_cast<unsigned char*>(binary.data());
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr) != CL_SUCCESS) return;
  writeFile(fmt::format("{}/{}.bin", dir, name), binary);
}

Result<cl_kernel> ClSession::kernel(const RTileKernel& k) {
  auto it = built_.find(k.source);
  if (it != built_.end()) return it->second.second;
  const char* src = k.source.c_str();
  cl_int err = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(ctx_, 1, &src, nullptr, &err);
  if (err != CL_SUCCESS) return clError("clCreateProgramWithSource", err);
  // FBL_CL_OPTIONS adds build options (-cl-nv-verbose on NVIDIA reports registers and spills);
  // FBL_CL_BUILD_LOG=1 prints every build log to stderr. Benchmarks only: plans never read them.
  const char* extra = std::getenv("FBL_CL_OPTIONS");
  std::string options = "-cl-std=CL1.2";
  for (const char* more : {buildOptions_.c_str(), extra})
    if (more && *more) options += std::string(" ") + more;
  err = clBuildProgram(prog, 1, &dev_, options.c_str(), nullptr, nullptr);
  if (const char* dir = std::getenv("FBL_CL_DUMP_DIR"); err == CL_SUCCESS && dir) dumpProgram(prog, dir, k.name, k.source);
  if (err == CL_SUCCESS && std::getenv("FBL_CL_BUILD_LOG"))
    std::fprintf(stderr, "build log of '%s':\n%s\n", k.name.c_str(), buildLog(prog, dev_).c_str());
  if (err != CL_SUCCESS) {
    const std::string log = buildLog(prog, dev_);
    clReleaseProgram(prog);
    return makeError("OpenCL: building kernel '{}' failed: {}", k.name, log);
  }
  cl_kernel kern = clCreateKernel(prog, k.name.c_str(), &err);
  if (err != CL_SUCCESS) {
    clReleaseProgram(prog);
    return clError("clCreateKernel", err);
  }
  built_.emplace(k.source, std::make_pair(prog, kern));
  return kern;
}

Result<cl_kernel> ClSession::bound(const RTileKernel& k, const std::vector<cl_mem>& args) {
  FBL_ASSIGN(cl_kernel kern, kernel(k));
  if (args.size() != k.args.size())
    return makeError("kernel '{}': {} arguments bound, {} expected", k.name, args.size(), k.args.size());
  for (size_t i = 0; i < args.size(); ++i)
    FBL_CL(clSetKernelArg(kern, static_cast<cl_uint>(i), sizeof(cl_mem), &args[i]), "clSetKernelArg");
  return kern;
}

Status ClSession::enqueue(cl_kernel kern, const RTileKernel& k, cl_event* ev) {
  FBL_CL(clEnqueueNDRangeKernel(queue_, kern, static_cast<cl_uint>(k.global.size()), nullptr, k.global.data(),
                                k.local.empty() ? nullptr : k.local.data(), 0, nullptr, ev),
         "clEnqueueNDRangeKernel");
  return {};
}

namespace {

// Device ms from `first`'s start to `last`'s end; releases both.
double spanMs(cl_event first, cl_event last) {
  cl_ulong t0 = 0, t1 = 0;
  clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, nullptr);
  clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, nullptr);
  clReleaseEvent(first);
  if (last != first) clReleaseEvent(last);
  return static_cast<double>(t1 - t0) * 1e-6;
}

}  // namespace

Result<double> ClSession::run(const RTileKernel& k, const std::vector<cl_mem>& args) {
  FBL_ASSIGN(cl_kernel kern, bound(k, args));
  cl_event ev = nullptr;
  if (Status st = enqueue(kern, k, &ev); !st.ok()) return st.error();
  FBL_CL(clWaitForEvents(1, &ev), "clWaitForEvents");
  return spanMs(ev, ev);
}

Result<double> ClSession::runQueued(const RTileKernel& k, const std::vector<cl_mem>& args, int count) {
  if (count < 2) return makeError("runQueued: {} launches; it times at least 2", count);
  FBL_ASSIGN(cl_kernel kern, bound(k, args));
  FBL_CL(clFinish(queue_), "clFinish");
  cl_event first = nullptr, last = nullptr;
  for (int i = 0; i < count; ++i) {
    Status st = enqueue(kern, k, i == 0 ? &first : i == count - 1 ? &last : nullptr);
    if (!st.ok()) {
      if (first) clReleaseEvent(first);
      return st.error();
    }
  }
  FBL_CL(clWaitForEvents(1, &last), "clWaitForEvents");
  return spanMs(first, last) / count;
}

namespace {

// Each logical element's offset in the layout's storage, row-major over the logical index: a
// buffer's element, or an image's float (texel (x, y), lane l at (y * width + x) * 4 + l).
std::vector<size_t> storageOffsets(const Layout& l) {
  const ir::Shape& shape = l.shape();
  const int64_t n = ir::numElements(shape);
  const bool image = l.storage() == layout::Storage::Image2D;
  const int64_t width = image ? l.imageWidth() : 0;
  std::vector<size_t> offsets(static_cast<size_t>(n));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int64_t> at = l.locate(index);
    offsets[static_cast<size_t>(i)] = static_cast<size_t>(image ? (at[1] * width + at[0]) * layout::kLanes + at[2] : at[0]);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return offsets;
}

size_t storageFloats(const Layout& l) {
  return static_cast<size_t>(l.storage() == layout::Storage::Image2D ? l.imageWidth() * l.imageHeight() * layout::kLanes
                                                                     : l.bufferSize());
}

}  // namespace

bool ClSession::packOnHost(const Layout& l) const {
  return !convertOnDevice_ && l.encoding().plain() && ir::numElements(l.shape()) <= kHostPackMaxElements;
}

Status ClSession::writeStorage(cl_mem m, const Layout& l, const std::vector<float>& physical) {
  if (l.storage() == layout::Storage::Image2D) {
    const size_t origin[3] = {0, 0, 0};
    const size_t region[3] = {static_cast<size_t>(l.imageWidth()), static_cast<size_t>(l.imageHeight()), 1};
    FBL_CL(clEnqueueWriteImage(queue_, m, CL_TRUE, origin, region, 0, 0, physical.data(), 0, nullptr, nullptr),
           "clEnqueueWriteImage");
  } else {
    FBL_CL(clEnqueueWriteBuffer(queue_, m, CL_TRUE, 0, physical.size() * sizeof(float), physical.data(), 0, nullptr,
                                nullptr),
           "clEnqueueWriteBuffer");
  }
  return {};
}

Result<std::vector<float>> ClSession::readStorage(cl_mem m, const Layout& l) {
  if (l.storage() != layout::Storage::Image2D) return readBuffer(m, storageFloats(l));
  std::vector<float> physical(storageFloats(l));
  const size_t origin[3] = {0, 0, 0};
  const size_t region[3] = {static_cast<size_t>(l.imageWidth()), static_cast<size_t>(l.imageHeight()), 1};
  FBL_CL(clEnqueueReadImage(queue_, m, CL_TRUE, origin, region, 0, 0, physical.data(), 0, nullptr, nullptr),
         "clEnqueueReadImage");
  return physical;
}

Status ClSession::upload(cl_mem dst, const Layout& l, const std::vector<float>& rowMajor) {
  const ir::Shape& shape = l.shape();
  if (static_cast<int64_t>(rowMajor.size()) != ir::numElements(shape))
    return makeError("upload: {} values for {}", rowMajor.size(), ir::shapeToString(shape));
  if (packOnHost(l)) {
    std::vector<float> physical(storageFloats(l), std::nanf(""));
    const std::vector<size_t> offsets = storageOffsets(l);
    for (size_t i = 0; i < offsets.size(); ++i) physical[offsets[i]] = rowMajor[i];
    return writeStorage(dst, l, physical);
  }
  Layout host = Layout::rowMajor(shape);
  FBL_ASSIGN(cl_mem staging, buffer(rowMajor.size(), rowMajor.data()));
  FBL_ASSIGN(RTileKernel k, codegen::emitRTileConvert("fbl_upload", host, false, l));
  auto t = run(k, {staging, dst});
  release(staging);
  return t.ok() ? Status{} : Status(t.error());
}

Result<std::vector<float>> ClSession::readBuffer(cl_mem b, size_t floats) {
  std::vector<float> out(floats);
  FBL_CL(clEnqueueReadBuffer(queue_, b, CL_TRUE, 0, floats * sizeof(float), out.data(), 0, nullptr, nullptr),
         "clEnqueueReadBuffer");
  return out;
}

Result<std::vector<float>> ClSession::download(cl_mem src, const Layout& l) {
  const size_t n = static_cast<size_t>(ir::numElements(l.shape()));
  if (packOnHost(l)) {
    FBL_ASSIGN(std::vector<float> physical, readStorage(src, l));
    const std::vector<size_t> offsets = storageOffsets(l);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = physical[offsets[i]];
    return out;
  }
  Layout host = Layout::rowMajor(l.shape());
  FBL_ASSIGN(cl_mem staging, buffer(n));
  FBL_ASSIGN(RTileKernel k, codegen::emitRTileConvert("fbl_download", l, false, host));
  auto t = run(k, {src, staging});
  if (!t.ok()) return t.error();
  auto out = readBuffer(staging, n);
  release(staging);
  return out;
}

}  // namespace fbl::harness
