#include "compiler/profile/microbench.h"

#include "compiler/support/opencl_devices.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

namespace fbl::profile {

namespace {

// Geometry of the Figure-4 benchmark: the image's first kBandRows rows are cut into bands
// kSectionWidth texels wide (32 MiB in all at 4096 texels across: more than any L2 seen here, and
// every texel is read once, so only spatial locality helps). The T threads share the bands out;
// no thread reads more than kMaxReadsPerThread texels (a lone GPU thread is latency-bound).
constexpr int kTexelBytes = 16;  // RGBA/FLOAT
constexpr int kSectionWidth = 64;
constexpr int kBandRows = 512;
constexpr int64_t kMaxReadsPerThread = int64_t{512} << 10;
constexpr int kMaxThreads = 64;  // the paper sweeps 1..64 threads of one work-group
constexpr int kProbeReads = 4096;
constexpr int kProbeMaxStride = 64;
// A knee needs the slowest stride at least this much slower than stride 1 (else: noise, no
// conclusion), and sits at the first stride within this fraction of the range from the top.
constexpr double kKneeMinRange = 1.3;
constexpr double kKneeFraction = 0.15;
constexpr double kMadTargetSeconds = 0.1;

const char* kSource = R"CL(
__constant sampler_t kSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

// Each work-item streams its own bands: band b spans x in [b*sw, (b+1)*sw) and y in [0, sh);
// work-item t of T owns bands t, t+T, t+2T ... (`bands` of them).
#define WALK(NAME, BODY)                                                                      \
  __kernel void NAME(__read_only image2d_t img, __global float* out, int sw, int sh, int bands) { \
    int t = get_local_id(0), n = get_local_size(0);                                           \
    float4 acc = (float4)(0.0f);                                                              \
    for (int k = 0; k < bands; ++k) {                                                         \
      int x0 = (t + k * n) * sw;                                                              \
      BODY                                                                                    \
    }                                                                                         \
    out[get_global_id(0)] = acc.x + acc.y + acc.z + acc.w;                                    \
  }
#define READ(X, Y) acc += read_imagef(img, kSampler, (int2)((X), (Y)))
WALK(walk_row, for (int y = 0; y < sh; ++y) for (int x = 0; x < sw; ++x) READ(x0 + x, y);)
WALK(walk_column, for (int x = 0; x < sw; ++x) for (int y = 0; y < sh; ++y) READ(x0 + x, y);)
WALK(walk_block4, for (int xb = 0; xb < sw; xb += 4) for (int y = 0; y < sh; ++y) {
  READ(x0 + xb, y); READ(x0 + xb + 1, y); READ(x0 + xb + 2, y); READ(x0 + xb + 3, y); })
WALK(walk_block8, for (int xb = 0; xb < sw; xb += 8) for (int y = 0; y < sh; ++y) {
  READ(x0 + xb, y); READ(x0 + xb + 1, y); READ(x0 + xb + 2, y); READ(x0 + xb + 3, y);
  READ(x0 + xb + 4, y); READ(x0 + xb + 5, y); READ(x0 + xb + 6, y); READ(x0 + xb + 7, y); })

// One work-item; (sx, sy) is the stride. A row (column) that runs out moves 64 rows (columns)
// on, so no texture block is visited twice. Each coordinate depends on the previous texel (whose
// channels are all below 1, so `dep` is 0): reads cannot overlap, and the time per read is the
// latency of a hit or a miss rather than the issue rate.
__kernel void stride_probe(__read_only image2d_t img, __global float* out, int sx, int sy, int n,
                           int w, int h) {
  int x = 0, y = 0;
  float4 acc = (float4)(0.0f);
  for (int i = 0; i < n; ++i) {
    float4 v = read_imagef(img, kSampler, (int2)(x, y));
    acc += v;
    int dep = (int)v.w;
    x += sx + dep;
    y += sy + dep;
    if (x >= w) { x = 0; y += 64; }
    if (y >= h) { y = 0; x += 64; }
  }
  out[0] = acc.x + acc.y + acc.z + acc.w;
}

__kernel void stream_image(__read_only image2d_t img, __global float* out, int rows_per_item) {
  int x = get_global_id(0), y0 = get_global_id(1) * rows_per_item;
  float4 acc = (float4)(0.0f);
  for (int r = 0; r < rows_per_item; ++r) acc += read_imagef(img, kSampler, (int2)(x, y0 + r));
  out[get_global_id(1) * get_global_size(0) + x] = acc.x + acc.y + acc.z + acc.w;
}

__kernel void mad_peak(__global float* out, int iters) {
  float4 m = (float4)(0.999f), c = (float4)(0.001f);
  float4 a0 = (float4)(get_global_id(0) & 7), a1 = a0 + 1.0f, a2 = a0 + 2.0f, a3 = a0 + 3.0f;
  float4 a4 = a0 + 4.0f, a5 = a0 + 5.0f, a6 = a0 + 6.0f, a7 = a0 + 7.0f;
  for (int i = 0; i < iters; ++i) {
    a0 = mad(a0, m, c); a1 = mad(a1, m, c); a2 = mad(a2, m, c); a3 = mad(a3, m, c);
    a4 = mad(a4, m, c); a5 = mad(a5, m, c); a6 = mad(a6, m, c); a7 = mad(a7, m, c);
  }
  float4 s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  out[get_global_id(0)] = s.x + s.y + s.z + s.w;
}
)CL";

constexpr int kMadFlopsPerIter = 8 * 4 * 2;  // 8 float4 chains, 2 flops per mad lane

template <typename T>
T deviceValue(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof(T), &v, nullptr);
  return v;
}

int64_t sysfsCacheBytes(int index) {
  std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", index));
  std::string s;
  if (!(in >> s) || s.empty()) return 0;
  int64_t mult = 1;
  if (s.back() == 'K') mult = 1024;
  if (s.back() == 'M') mult = 1024 * 1024;
  if (mult != 1) s.pop_back();
  return std::atoll(s.c_str()) * mult;
}

// Owns the OpenCL objects of one measurement session.
class Bench {
 public:
  ~Bench() {
    for (cl_kernel k : kernels_) clReleaseKernel(k);
    if (out_) clReleaseMemObject(out_);
    if (image_) clReleaseMemObject(image_);
    if (program_) clReleaseProgram(program_);
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }

  Status init(const ClDevice& d) {
    device_ = d.device;
    cl_int err = 0;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return clError("clCreateContext", err);
    queue_ = clCreateCommandQueue(context_, device_, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) return clError("clCreateCommandQueue", err);
    program_ = clCreateProgramWithSource(context_, 1, &kSource, nullptr, &err);
    if (err != CL_SUCCESS) return clError("clCreateProgramWithSource", err);
    if (clBuildProgram(program_, 1, &device_, "-cl-std=CL1.2", nullptr, nullptr) != CL_SUCCESS) {
      size_t n = 0;
      clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
      std::string log(n, '\0');
      clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
      std::replace(log.begin(), log.end(), '\n', ' ');
      return makeError("OpenCL: benchmark kernels failed to build: {}", log.substr(0, 300));
    }
    return Status::success();
  }

  Result<cl_kernel> kernel(const char* name) {
    cl_int err = 0;
    cl_kernel k = clCreateKernel(program_, name, &err);
    if (err != CL_SUCCESS) return clError(name, err);
    kernels_.push_back(k);
    return k;
  }

  // A width x height RGBA/FLOAT image filled with small distinct values, and an output buffer.
  Status makeImage(int64_t width, int64_t height, size_t outFloats) {
    width_ = width;
    height_ = height;
    std::vector<float> host(static_cast<size_t>(width * height * 4));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1024) * (1.0f / 1024);
    cl_image_format fmt{CL_RGBA, CL_FLOAT};
    cl_int err = 0;
    cl_image_desc desc{};
    desc.image_type = CL_MEM_OBJECT_IMAGE2D;
    desc.image_width = static_cast<size_t>(width);
    desc.image_height = static_cast<size_t>(height);
    image_ = clCreateImage(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, &fmt, &desc, host.data(), &err);
    if (err != CL_SUCCESS) return clError("clCreateImage", err);
    out_ = clCreateBuffer(context_, CL_MEM_WRITE_ONLY, outFloats * sizeof(float), nullptr, &err);
    if (err != CL_SUCCESS) return clError("clCreateBuffer", err);
    return Status::success();
  }

  // Seconds of one run (profiling events).
  Result<double> run(cl_kernel k, cl_uint dims, const size_t* global, const size_t* local) {
    cl_event ev = nullptr;
    FBL_CL(clEnqueueNDRangeKernel(queue_, k, dims, nullptr, global, local, 0, nullptr, &ev), "clEnqueueNDRangeKernel");
    cl_int err = clWaitForEvents(1, &ev);
    cl_ulong t0 = 0, t1 = 0;
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, nullptr);
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, nullptr);
    clReleaseEvent(ev);
    if (err != CL_SUCCESS) return clError("kernel run", err);
    return std::max(1e-9, static_cast<double>(t1 - t0) * 1e-9);
  }

  // Fastest of `reps` runs after a warm-up: other work on a shared device only adds time, so
  // the minimum is the steadiest estimate of what the access pattern itself costs.
  Result<double> timed(cl_kernel k, cl_uint dims, const size_t* global, const size_t* local, int reps) {
    FBL_TRY(run(k, dims, global, local));
    double best = 1e30;
    for (int i = 0; i < reps; ++i) {
      FBL_ASSIGN(double s, run(k, dims, global, local));
      best = std::min(best, s);
    }
    return best;
  }

  Status setImageArgs(cl_kernel k) {
    FBL_CL(clSetKernelArg(k, 0, sizeof(cl_mem), &image_), "clSetKernelArg(image)");
    FBL_CL(clSetKernelArg(k, 1, sizeof(cl_mem), &out_), "clSetKernelArg(out)");
    return Status::success();
  }

  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  cl_mem image_ = nullptr, out_ = nullptr;
  int64_t width_ = 0, height_ = 0;
  std::vector<cl_kernel> kernels_;
};

// Keeps `digits` significant digits: more would be noise in the committed JSON.
double roundTo(double x, int digits) {
  if (x <= 0) return x;
  double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(x))));
  return std::round(x * scale) / scale;
}

Status setInt(cl_kernel k, cl_uint i, int v) {
  FBL_CL(clSetKernelArg(k, i, sizeof(int), &v), "clSetKernelArg(int)");
  return Status::success();
}

// Figure 4 (step 3).
Result<AccessTable> measureAccessTable(Bench& b, int maxThreads, int reps) {
  AccessTable t;
  t.unit = "GB/s";
  for (int n = 1; n <= std::min(kMaxThreads, maxThreads); n *= 2) t.threads.push_back(n);
  const char* names[] = {"walk_row", "walk_column", "walk_block4", "walk_block8"};
  std::vector<cl_kernel> kernels;
  for (AccessPattern p : kAllAccessPatterns) {
    FBL_ASSIGN(cl_kernel k, b.kernel(names[static_cast<int>(p)]));
    FBL_TRY(b.setImageArgs(k));
    FBL_TRY(setInt(k, 2, kSectionWidth));
    FBL_TRY(setInt(k, 3, kBandRows));
    kernels.push_back(k);
  }
  int64_t allBands = b.width_ / kSectionWidth;
  auto bandsFor = [&](int threads) {
    return std::max<int64_t>(1, std::min(allBands / threads,
                                         kMaxReadsPerThread / (int64_t{kSectionWidth} * kBandRows)));
  };
  // Rounds visit every (pattern, threads) once, so a burst of other work on a shared device
  // slows one round of all patterns rather than one pattern's every run.
  std::vector<double> best(kernels.size() * t.threads.size(), 1e30);
  for (int round = 0; round <= reps; ++round) {  // round 0 warms up
    for (size_t pi = 0; pi < kernels.size(); ++pi)
      for (size_t ti = 0; ti < t.threads.size(); ++ti) {
        FBL_TRY(setInt(kernels[pi], 4, static_cast<int>(bandsFor(t.threads[ti]))));
        size_t g = static_cast<size_t>(t.threads[ti]);
        FBL_ASSIGN(double s, b.run(kernels[pi], 1, &g, &g));
        if (round > 0) best[pi * t.threads.size() + ti] = std::min(best[pi * t.threads.size() + ti], s);
      }
  }
  for (size_t pi = 0; pi < kernels.size(); ++pi)
    for (size_t ti = 0; ti < t.threads.size(); ++ti) {
      int threads = t.threads[ti];
      double bytes = static_cast<double>(threads) * bandsFor(threads) * kSectionWidth * kBandRows * kTexelBytes;
      t.throughput[kAllAccessPatterns[pi]].push_back(roundTo(bytes / best[pi * t.threads.size() + ti] * 1e-9, 4));
    }
  return t;
}

// Step 2 on GPUs: stride (texels) at which the per-read cost stops growing; 0 if unclear.
Result<int> probeBlockExtent(Bench& b, cl_kernel k, bool horizontal, int reps, std::string& trace) {
  std::vector<int> strides;
  std::vector<double> cost;
  for (int s = 1; s <= kProbeMaxStride; s *= 2) {
    FBL_TRY(setInt(k, 2, horizontal ? s : 0));
    FBL_TRY(setInt(k, 3, horizontal ? 0 : s));
    FBL_TRY(setInt(k, 4, kProbeReads));
    FBL_TRY(setInt(k, 5, static_cast<int>(b.width_)));
    FBL_TRY(setInt(k, 6, static_cast<int>(b.height_)));
    size_t one = 1;
    FBL_ASSIGN(double sec, b.timed(k, 1, &one, &one, reps));
    strides.push_back(s);
    cost.push_back(sec);
    trace += fmt::format(" {}:{:.1f}ns", s, sec / kProbeReads * 1e9);
  }
  double lo = cost.front(), hi = *std::max_element(cost.begin(), cost.end());
  if (hi < lo * kKneeMinRange) return 0;  // no clear knee: the caller falls back to the cache line
  double threshold = hi - kKneeFraction * (hi - lo);
  for (size_t i = 0; i < cost.size(); ++i)
    if (cost[i] >= threshold) return strides[i];
  return 0;
}

}  // namespace

Result<std::vector<std::string>> listDevices() {
  FBL_ASSIGN(std::vector<ClDevice> ds, listClDevices());
  std::vector<std::string> out;
  for (size_t i = 0; i < ds.size(); ++i) out.push_back(fmt::format("{}: {}", i, ds[i].label));
  return out;
}

namespace {

// Step 1: what the driver says of the device, its images and its cache line.
void queryDeviceFacts(cl_device_id d, bool isCpu, HardwareProfile& p) {
  p.deviceClass = isCpu ? DeviceClass::kCpu : DeviceClass::kGpu;
  p.provenance["device_class"] = "queried: CL_DEVICE_TYPE";
  p.computeUnits = static_cast<int>(deviceValue<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
  p.provenance["compute_units"] = "queried: CL_DEVICE_MAX_COMPUTE_UNITS";
  p.memory.present = true;
  p.memory.globalBytes = static_cast<int64_t>(deviceValue<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
  p.provenance["memory.global_bytes"] = "queried: CL_DEVICE_GLOBAL_MEM_SIZE";
  p.memory.maxAllocBytes = static_cast<int64_t>(deviceValue<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
  p.provenance["memory.max_alloc_bytes"] = "queried: CL_DEVICE_MAX_MEM_ALLOC_SIZE";
  if (!p.memory.appBudgetBytes)  // a base profile's budget stays: no OpenCL query gives one
    p.provenance["memory.app_budget_bytes"] =
        "pending measurement: what the OS lets an app use is not an OpenCL query; set it for the phone and OS";
  p.image2dMaxWidth = static_cast<int64_t>(deviceValue<size_t>(d, CL_DEVICE_IMAGE2D_MAX_WIDTH));
  p.image2dMaxHeight = static_cast<int64_t>(deviceValue<size_t>(d, CL_DEVICE_IMAGE2D_MAX_HEIGHT));
  p.provenance["image2d_max"] = "queried: CL_DEVICE_IMAGE2D_MAX_WIDTH/HEIGHT";
  {
    // Images over buffers need the extension; its pitch alignment is then queryable (0x104A is
    // CL_DEVICE_IMAGE_PITCH_ALIGNMENT, the same enum as the KHR name the 1.2 headers may lack).
    const std::string extensions = clDeviceString(d, CL_DEVICE_EXTENSIONS);
    p.imageStorage.supported = true;
    p.imageStorage.fromBuffer = extensions.find("cl_khr_image2d_from_buffer") != std::string::npos;
    p.imageStorage.pitchAlignmentPixels = 0;
    if (p.imageStorage.fromBuffer) {
      cl_uint pitch = 0;
      if (clGetDeviceInfo(d, 0x104A, sizeof pitch, &pitch, nullptr) == CL_SUCCESS)
        p.imageStorage.pitchAlignmentPixels = pitch;
    }
    p.imageStorage.textureCache = !isCpu;
    p.provenance["image_storage"] = fmt::format(
        "queried: CL_DEVICE_IMAGE_SUPPORT, cl_khr_image2d_from_buffer {} in CL_DEVICE_EXTENSIONS{}; texture_cache "
        "derived from the device type ({})",
        p.imageStorage.fromBuffer ? "listed" : "not listed",
        p.imageStorage.fromBuffer ? ", CL_DEVICE_IMAGE_PITCH_ALIGNMENT" : "",
        isCpu ? "a CPU samples images in software through its data caches" : "a GPU reads images through its texture units");
  }
  p.cacheLineBytes = static_cast<int>(deviceValue<cl_uint>(d, CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE));
  p.provenance["cache_line_bytes"] = "queried: CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE";
  if (p.cacheLineBytes <= 0) {
    p.cacheLineBytes = 64;
    p.provenance["cache_line_bytes"] = "estimated: the driver reports none; 64 B is the common line";
  }

}

// The texel formats a read-only image2d takes; R-Tile needs RGBA/FLOAT.
Status queryTexelFormats(Bench& b, const std::string& label, HardwareProfile& p) {
    cl_uint n = 0;
  clGetSupportedImageFormats(b.context_, CL_MEM_READ_ONLY, CL_MEM_OBJECT_IMAGE2D, 0, nullptr, &n);
  std::vector<cl_image_format> fmts(n);
  clGetSupportedImageFormats(b.context_, CL_MEM_READ_ONLY, CL_MEM_OBJECT_IMAGE2D, n, fmts.data(), nullptr);
  p.texelFormats.clear();
  for (auto [type, name] : {std::pair{CL_FLOAT, "RGBA/FLOAT"}, std::pair{CL_HALF_FLOAT, "RGBA/HALF_FLOAT"}})
    for (const auto& f : fmts)
      if (f.image_channel_order == CL_RGBA && f.image_channel_data_type == static_cast<cl_uint>(type)) {
        p.texelFormats.push_back(name);
        break;
      }
  if (p.texelFormats.empty() || p.texelFormats.front() != "RGBA/FLOAT")
    return makeError("device '{}' cannot read RGBA/FLOAT image2d", label);
  p.provenance["texel_formats"] = "queried: clGetSupportedImageFormats (read-only image2d, RGBA)";
  return {};
}

// The wave size (of the benchmark kernel) and the cache sizes: sysfs for a CPU device, the driver
// (or --base's published numbers) for a GPU. Returns the kernel's largest work-group.
Result<size_t> queryWaveAndCaches(Bench& b, cl_device_id d, bool isCpu, const MeasureOptions& opts,
                                  const std::string& label, HardwareProfile& p) {
  FBL_ASSIGN(cl_kernel rowKernel, b.kernel("walk_row"));
  size_t waveMultiple = 0, maxGroup = 0;
  clGetKernelWorkGroupInfo(rowKernel, d, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof waveMultiple,
                           &waveMultiple, nullptr);
  clGetKernelWorkGroupInfo(rowKernel, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof maxGroup, &maxGroup, nullptr);
  p.waveSize = static_cast<int>(std::max<size_t>(1, waveMultiple));
  p.provenance["wave_size"] = "queried: CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE of the benchmark kernel";
  if (isCpu) {
    p.l1TextureCacheBytes = sysfsCacheBytes(0);
    p.provenance["l1_texture_cache_bytes"] =
        "queried: /sys/devices/system/cpu/cpu0/cache/index0 (L1 data; a CPU device samples images through it)";
    p.l2CacheBytes = sysfsCacheBytes(2);
    p.provenance["l2_cache_bytes"] = "queried: /sys/devices/system/cpu/cpu0/cache/index2 (L2 per core)";
  } else {
    // NVIDIA's driver reports 32 KiB per SM here rather than the L2, so a published size given
    // through --base wins over the query.
    auto baseL2 = p.provenance.find("l2_cache_bytes");
    bool publicL2 = opts.base && baseL2 != p.provenance.end() && baseL2->second.rfind("public", 0) == 0;
    if (!publicL2) {
      p.l2CacheBytes = static_cast<int64_t>(deviceValue<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE));
      p.provenance["l2_cache_bytes"] = "queried: CL_DEVICE_GLOBAL_MEM_CACHE_SIZE";
    }
    if (!opts.base) {
      p.l1TextureCacheBytes = 16 * 1024;
      p.provenance["l1_texture_cache_bytes"] =
          "estimated: OpenCL does not report it; 16 KiB, pass --base with the vendor's number";
    }
  }
  if (p.l1TextureCacheBytes <= 0 || p.l2CacheBytes <= 0)
    return makeError("device '{}': cache sizes unavailable (sysfs or driver); pass --base", label);

  return maxGroup;
}

// Step 2: the texture cache block, probed on a GPU, one cache line of one row on a CPU.
Status measureTextureBlock(Bench& b, bool isCpu, const MeasureOptions& opts, HardwareProfile& p) {
  auto log = [&](const std::string& s) {
    if (opts.log) opts.log(s);
  };
  if (isCpu) {
    p.textureBlock = {1, std::max(1, p.cacheLineBytes / 16)};
    p.provenance["texture_block"] =
        "derived: a CPU device stores image2d rows linearly, so a cache line holds line/16 RGBA-float texels of one row";
  } else {
    FBL_ASSIGN(cl_kernel probe, b.kernel("stride_probe"));
    FBL_TRY(b.setImageArgs(probe));
    std::string traceW, traceH;
    FBL_ASSIGN(int cw, probeBlockExtent(b, probe, true, opts.reps, traceW));
    FBL_ASSIGN(int ch, probeBlockExtent(b, probe, false, opts.reps, traceH));
    log("stride probe, time per read: horizontal" + traceW + "; vertical" + traceH);
    if (cw > 0 && ch > 0) {
      p.textureBlock = {ch, cw};
      p.provenance["texture_block"] = "measured: single work-item stride probe (cost per read stops growing)";
    } else {
      p.textureBlock = {1, std::max(1, p.cacheLineBytes / 16)};
      p.provenance["texture_block"] = "estimated: stride probe showed no knee; one cache line of one row";
    }
  }
  log(fmt::format("texture block {}x{} texels", p.textureBlock.h, p.textureBlock.w));

  return {};
}

// Step 4: whole-device image bandwidth and peak multiply-add throughput.
Status measureThroughput(Bench& b, bool isCpu, int64_t width, int64_t height, const MeasureOptions& opts,
                         HardwareProfile& p) {
  {
    FBL_ASSIGN(cl_kernel k, b.kernel("stream_image"));
    FBL_TRY(b.setImageArgs(k));
    FBL_TRY(setInt(k, 2, 16));
    size_t global[2] = {static_cast<size_t>(width), static_cast<size_t>(height / 16)};
    FBL_ASSIGN(double s, b.timed(k, 2, global, nullptr, std::max(3, opts.reps / 2)));
    p.bandwidthGBs = roundTo(static_cast<double>(width * height * 16) / s * 1e-9, 4);
    p.provenance["bandwidth_gbps"] =
        "measured: whole-device RGBA-float image2d read, neighbouring work-items on neighbouring texels";
  }
  {
    FBL_ASSIGN(cl_kernel k, b.kernel("mad_peak"));
    FBL_CL(clSetKernelArg(k, 0, sizeof(cl_mem), &b.out_), "clSetKernelArg(out)");
    size_t global = static_cast<size_t>(p.computeUnits) * (isCpu ? 256 : 2048);
    global = std::min<size_t>(global, static_cast<size_t>(width * height / 16));
    int iters = 256;
    FBL_TRY(setInt(k, 1, iters));
    FBL_ASSIGN(double probeSec, b.run(k, 1, &global, nullptr));
    iters = static_cast<int>(std::clamp(iters * kMadTargetSeconds / probeSec, 256.0, 1e8));
    FBL_TRY(setInt(k, 1, iters));
    FBL_ASSIGN(double s, b.timed(k, 1, &global, nullptr, 3));
    p.peakGflops = roundTo(static_cast<double>(global) * iters * kMadFlopsPerIter / s * 1e-9, 4);
    p.provenance["peak_gflops"] = "measured: independent float4 mad chains on every compute unit";
  }
  return {};
}

}  // namespace

Result<HardwareProfile> measureProfile(const MeasureOptions& opts) {
  auto log = [&](const std::string& s) {
    if (opts.log) opts.log(s);
  };
  FBL_ASSIGN(std::vector<ClDevice> devices, listClDevices());
  if (opts.device < 0 || opts.device >= static_cast<int>(devices.size()))
    return makeError("--device {}: there are {} OpenCL devices (0..{})", opts.device, devices.size(),
                     devices.size() - 1);
  const ClDevice& dev = devices[static_cast<size_t>(opts.device)];
  cl_device_id d = dev.device;
  if (!deviceValue<cl_bool>(d, CL_DEVICE_IMAGE_SUPPORT))
    return makeError("device '{}' has no image support; R-Tile needs image2d", dev.label);
  log("device: " + dev.label);

  HardwareProfile p = opts.base ? *opts.base : HardwareProfile{};
  p.name = opts.name.empty() ? p.name : opts.name;
  p.device = clDeviceString(d, CL_DEVICE_NAME);
  bool isCpu = (deviceValue<cl_device_type>(d, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_CPU) != 0;
  queryDeviceFacts(d, isCpu, p);

  Bench b;
  FBL_TRY(b.init(dev));
  FBL_TRY(queryTexelFormats(b, dev.label, p));
  FBL_ASSIGN(size_t maxGroup, queryWaveAndCaches(b, d, isCpu, opts, dev.label, p));

  int64_t width = std::min<int64_t>(4096, p.image2dMaxWidth), height = std::min<int64_t>(4096, p.image2dMaxHeight);
  if (width < kSectionWidth * kMaxThreads)
    return makeError("device '{}': image2d width {} is below the {} the benchmark needs", dev.label, width,
                     kSectionWidth * kMaxThreads);
  FBL_TRY(b.makeImage(width, height, static_cast<size_t>(width * height / 16)));
  FBL_TRY(measureTextureBlock(b, isCpu, opts, p));

  // Step 3.
  FBL_ASSIGN(AccessTable table, measureAccessTable(b, static_cast<int>(maxGroup), opts.reps));
  p.accessTable = std::move(table);
  p.provenance["access_table"] = fmt::format(
      "measured: one work-group, each thread streams its own {}-texel-wide bands of an RGBA-float image2d; "
      "fastest of {} runs",
      kSectionWidth, opts.reps);
  log("access table measured");

  FBL_TRY(measureThroughput(b, isCpu, width, height, opts, p));
  return p;
}

}  // namespace fbl::profile
