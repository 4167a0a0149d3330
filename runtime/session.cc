// Opening a plan:
//  1. read and verify the plan file whole (runtime/plan_check.h: version, checksum, indices,
//     every size, offset, argument and work size);
//  2. pick the device, check each launch's work sizes against its limits, create context and
//     in-order queue, check alignment and allocation limits;
//  3. allocate the arena as plan.poolCount() pools, none larger than the device's largest
//     allocation (the profile's, which the compiler planned for);
//  4. build the program (or load it from the cache) and create one kernel object per launch with
//     its arguments bound: per buffer tensor its pool and its byte offset there;
//  5. upload constants from the blob and zero the optimizer state.
// Image tensors live in the plan's image objects (one per image slot, created beside the pools)
// and are bound to their kernel parameters as images. A tensor stored in another layout than
// row-major (an R-Tile, an image) is written and read through the plan's transfer launches:
// the host's row-major bytes go to the staging tensor, a pack launch lays them out, and an
// unpack launch brings them back, so weights, checkpoints and adapters stay row-major.
// Every input write is checked on the host first (runtime/input_check.h), so a launch only ever
// sees inputs within the plan's bounds; a step refuses to start while an input was never written.
// A step then only writes the step counter, enqueues the launches and copies the commits,
// reporting progress and honouring a cancel request up to the optimizer phase
// (runtime/step_control.h). Weights and checkpoints are checked whole before anything is written.
// With OpenOptions::profileLaunches the queue profiles and every launch keeps its event until
// the call's clFinish, when the events' start and end times become launchTimes().
#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "runtime/files.h"
#include "runtime/input_check.h"
#include "runtime/opencl_devices.h"
#include "runtime/plan_check.h"
#include "runtime/program_cache.h"
#include "runtime/safetensors.h"
#include "runtime/weights_check.h"

namespace fbl::rt {

namespace {

Error clErr(const std::string& what, cl_int st) { return Error{what + " failed (OpenCL error " + std::to_string(st) + ")"}; }
Status clCheck(cl_int st, const std::string& what) { return st == CL_SUCCESS ? Status::success() : clErr(what, st); }

struct Dev {
  cl_platform_id platform;
  cl_device_id id;
  DeviceInfo info;
};

std::vector<Dev> allDevices() {
  std::vector<Dev> out;
  for (const ClDeviceEntry& e : enumerateClDevices()) {
    cl_device_type type = 0;
    clGetDeviceInfo(e.device, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
    out.push_back({e.platform, e.device,
                   {e.platformName, clDeviceString(e.device, CL_DEVICE_NAME), clDeviceString(e.device, CL_DRIVER_VERSION),
                    (type & CL_DEVICE_TYPE_GPU) != 0}});
  }
  return out;
}

DeviceLimits limitsOf(cl_device_id d) {
  DeviceLimits l;
  cl_uint dimsCount = 0;
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, sizeof dimsCount, &dimsCount, nullptr);
  l.maxDims = dimsCount;
  std::vector<size_t> sizes(std::max<cl_uint>(dimsCount, 3), 1);
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof(size_t) * dimsCount, sizes.data(), nullptr);
  for (size_t i = 0; i < 3; ++i) l.maxItemSizes[i] = sizes[i];
  size_t group = 0;
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof group, &group, nullptr);
  l.maxGroupSize = group;
  cl_uint bits = 32;
  clGetDeviceInfo(d, CL_DEVICE_ADDRESS_BITS, sizeof bits, &bits, nullptr);
  l.addressBits = bits;
  cl_ulong bytes = 0;
  clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof bytes, &bytes, nullptr);
  l.maxAllocBytes = bytes;
  bytes = 0;
  clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof bytes, &bytes, nullptr);
  l.globalBytes = bytes;
  return l;
}

// A kernel's own limits on its work-group, which the program build decides: the largest group
// (registers, local memory) and a reqd_work_group_size the local size must equal.
Status checkKernelGroup(cl_kernel k, cl_device_id d, const planfile::Plan& plan, size_t index, bool transfer) {
  const planfile::Launch& l = transfer ? plan.transfers[index] : plan.launches[index];
  size_t most = 0, required[3] = {0, 0, 0};
  clGetKernelWorkGroupInfo(k, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof most, &most, nullptr);
  clGetKernelWorkGroupInfo(k, d, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof required, required, nullptr);
  const std::string who = launchName(plan, index, transfer);
  if (required[0] != 0) {
    bool same = !l.local.empty();
    for (size_t i = 0; same && i < 3; ++i) same = required[i] == (i < l.local.size() ? static_cast<size_t>(l.local[i]) : 1);
    if (!same)
      return Error{who + ": local size differs from the kernel's reqd_work_group_size (" + std::to_string(required[0]) + ", " +
                   std::to_string(required[1]) + ", " + std::to_string(required[2]) + ")"};
  }
  size_t group = 1;
  for (int64_t x : l.local) group *= static_cast<size_t>(x);
  if (!l.local.empty() && most > 0 && group > most)
    return Error{who + ": a work-group of " + std::to_string(group) + " work-items exceeds the kernel's " + std::to_string(most) + " on this device"};
  return Status::success();
}

}  // namespace

std::vector<DeviceInfo> listDevices() {
  std::vector<DeviceInfo> out;
  for (const Dev& d : allDevices()) out.push_back(d.info);
  return out;
}

struct Session::Impl {
  planfile::Plan plan;
  std::string planPath;
  Dev dev{};
  DeviceLimits limits;
  cl_context ctx = nullptr;
  cl_command_queue queue = nullptr;
  std::vector<cl_mem> pools;        // the arena, plan.poolBytes each
  std::vector<cl_mem> images;      // one per image slot
  cl_program program = nullptr;
  bool fromCache = false;
  std::vector<cl_kernel> kernels;  // one per launch, arguments bound
  std::vector<cl_kernel> transferKernels;  // one per transfer launch
  std::vector<bool> loaded;        // weights/trainables filled by loadWeights or a checkpoint
  int64_t step = 0;
  int32_t accumulated = 0;         // micro-batches since the last optimizer step
  double baseLr = 0;               // the schedule's base lr (plan.loop.lr, or setLearningRate's)
  std::string baseWeights;         // the loaded frozen weights' identity (checkWeights), "" before loadWeights
  bool profiling = false;
  std::vector<std::pair<int32_t, cl_event>> events;  // launch index, its event (profiling only)
  std::vector<LaunchTime> times;
  StepControl control;
  bool cancelled = false;          // the last step or evaluation returned because it was cancelled

  ~Impl() {
    // The queue first, drained, then the objects its commands used.
    if (queue) {
      clFinish(queue);
      clReleaseCommandQueue(queue);
      queue = nullptr;
    }
    dropEvents();
    for (cl_kernel k : kernels) clReleaseKernel(k);
    for (cl_kernel k : transferKernels) clReleaseKernel(k);
    if (program) clReleaseProgram(program);
    for (cl_mem m : images) clReleaseMemObject(m);
    for (cl_mem m : pools) clReleaseMemObject(m);
    if (queue) clReleaseCommandQueue(queue);
    if (ctx) clReleaseContext(ctx);
  }

  std::string where() const { return "plan '" + planPath + "'"; }

  // A buffer tensor's pool, and its offset there.
  cl_mem poolOf(int32_t t) const { return pools[static_cast<size_t>(plan.poolOf(plan.tensors[t]))]; }
  size_t offsetOf(int32_t t) const { return static_cast<size_t>(plan.offsetInPool(plan.tensors[t])); }

  // The tensor's row-major bytes (`bytes` == planfile::hostBytes), packed if it has a layout.
  Status write(int32_t t, const void* data, size_t bytes) {
    if (bytes == 0) return Status::success();
    const planfile::Tensor& pt = plan.tensors[t];
    if (pt.pack < 0 && pt.image()) return Error{"tensor '" + pt.name + "' lives in an image the host cannot write"};
    if (pt.pack < 0) {
      const cl_int st = clEnqueueWriteBuffer(queue, poolOf(t), CL_TRUE, offsetOf(t), bytes, data, 0, nullptr, nullptr);
      return clCheck(st, "writing tensor '" + pt.name + "'");
    }
    const auto* host = static_cast<const unsigned char*>(data);
    return forEachChunk(pt, bytes, [&](size_t at, size_t n) -> Status {
      const cl_int st = clEnqueueWriteBuffer(queue, poolOf(plan.staging), CL_TRUE, offsetOf(plan.staging), n, host + at, 0, nullptr, nullptr);
      if (st != CL_SUCCESS) return clErr("writing tensor '" + pt.name + "'", st);
      return transfer(pt.pack);
    });
  }

  Status read(int32_t t, std::vector<unsigned char>* out) {
    const planfile::Tensor& pt = plan.tensors[t];
    if (!pt.encoding.empty())
      return Error{"tensor '" + pt.name + "' is stored " + pt.encoding + "; its values are in the weights file"};
    out->resize(static_cast<size_t>(pt.unpack >= 0 ? planfile::logicalBytes(pt) : pt.bytes));
    if (out->empty()) return Status::success();
    if (pt.unpack < 0 && pt.image()) return Error{"tensor '" + pt.name + "' lives in an image the host cannot read"};
    if (pt.unpack < 0) {
      const cl_int st = clEnqueueReadBuffer(queue, poolOf(t), CL_TRUE, offsetOf(t), out->size(), out->data(), 0, nullptr, nullptr);
      return clCheck(st, "reading tensor '" + pt.name + "'");
    }
    return forEachChunk(pt, out->size(), [&](size_t at, size_t n) -> Status {
      FBL_TRY(transfer(pt.unpack));
      const cl_int st = clEnqueueReadBuffer(queue, poolOf(plan.staging), CL_TRUE, offsetOf(plan.staging), n, out->data() + at, 0, nullptr, nullptr);
      return clCheck(st, "reading tensor '" + pt.name + "'");
    });
  }

  // Runs `move(host offset, bytes)` once per chunk of Tensor::transferRows rows of a packed
  // tensor's `bytes` row-major bytes, with the chunk's first row written for its transfer launch.
  // The queue is in order, so a chunk's launch is done before the next chunk overwrites the
  // staging tensor; the last clFinish makes the packed tensor whole before anyone uses it.
  template <typename Move>
  Status forEachChunk(const planfile::Tensor& pt, size_t bytes, Move move) {
    const auto rows = static_cast<size_t>(planfile::transferRows(pt.shape));
    const auto rowBytes = static_cast<size_t>(planfile::transferRowBytes(pt.shape, pt.dtype));
    const auto chunk = static_cast<size_t>(pt.transferRows);
    for (size_t first = 0; first < rows; first += chunk) {
      const auto firstRow = static_cast<cl_long>(first);
      cl_int st = clEnqueueWriteBuffer(queue, poolOf(plan.transferFirstRow), CL_TRUE, offsetOf(plan.transferFirstRow),
                                       sizeof firstRow, &firstRow, 0, nullptr, nullptr);
      if (st != CL_SUCCESS) return clErr("moving tensor '" + pt.name + "'", st);
      FBL_TRY(move(first * rowBytes, std::min(chunk, rows - first) * rowBytes));
    }
    const cl_int st = clFinish(queue);
    return clCheck(st, "moving tensor '" + pt.name + "'");
  }

  Status fill(int32_t t, unsigned char value) {
    std::vector<unsigned char> z(static_cast<size_t>(planfile::logicalBytes(plan.tensors[t])), value);
    if (z.empty()) return Status::success();
    return write(t, z.data(), z.size());
  }

  Status transfer(int32_t i) {
    const planfile::Launch& l = plan.transfers[i];
    return enqueueKernel(transferKernels[i], l, nullptr);
  }

  // The arguments of a launch: per tensor its image object, or its pool and its offset there.
  Status bind(cl_kernel k, const planfile::Launch& l) {
    cl_uint index = 0;
    for (size_t a = 0; a < l.args.size(); ++a) {
      const int32_t t = l.args[a];
      cl_int st = CL_SUCCESS;
      if (plan.tensors[t].image()) {
        st = clSetKernelArg(k, index++, sizeof(cl_mem), &images[plan.tensors[t].imageSlot]);
      } else {
        const cl_mem pool = poolOf(t);
        const auto offset = static_cast<cl_ulong>(offsetOf(t));
        st = clSetKernelArg(k, index++, sizeof(cl_mem), &pool);
        if (st == CL_SUCCESS) st = clSetKernelArg(k, index++, sizeof offset, &offset);
      }
      if (st != CL_SUCCESS)
        return clErr("binding argument " + std::to_string(a) + " of " + plan.kernelNames[l.kernel] + " (node '" + l.node + "')", st);
    }
    return Status::success();
  }

  Status enqueueKernel(cl_kernel k, const planfile::Launch& l, cl_event* ev) {
    size_t global[3], local[3];
    for (size_t d = 0; d < l.global.size(); ++d) global[d] = static_cast<size_t>(l.global[d]);
    for (size_t d = 0; d < l.local.size(); ++d) local[d] = static_cast<size_t>(l.local[d]);
    const cl_int st = clEnqueueNDRangeKernel(queue, k, static_cast<cl_uint>(l.global.size()), nullptr, global,
                                             l.local.empty() ? nullptr : local, 0, nullptr, ev);
    if (st != CL_SUCCESS) return clErr("launching " + plan.kernelNames[l.kernel] + " for node '" + l.node + "'", st);
    return Status::success();
  }

  // Launches [begin, end) of a step, reporting progress (done counts from the step's first
  // launch). A cancellable range stops at the first launch boundary after a cancel request, once
  // what it enqueued has finished, and says so in *stopped.
  Status runRange(size_t begin, size_t end, int64_t stepNumber, int32_t total, bool cancellable, bool* stopped) {
    *stopped = false;
    for (size_t i = begin; i < end; ++i) {
      if (cancellable && control.requested()) {
        *stopped = true;
        const cl_int st = clFinish(queue);
        return clCheck(st, "clFinish");
      }
      FBL_TRY(enqueue(i));
      const bool phaseEnd = i + 1 == end || plan.launches[i + 1].phase != plan.launches[i].phase;
      const auto done = static_cast<int32_t>(i + 1);
      if (control.due(done, phaseEnd)) {
        const cl_int st = clFinish(queue);
        if (st != CL_SUCCESS) return clErr("clFinish", st);
        control.report({stepNumber, plan.launches[i].phase.c_str(), done, total});
      }
    }
    return Status::success();
  }

  // A step that honoured a cancel request: the request is consumed and the queue drained.
  Status cancel(const std::string& message) {
    control.take();
    cancelled = true;
    const cl_int st = clFinish(queue);
    dropEvents();
    if (st != CL_SUCCESS) return clErr("clFinish", st);
    return Error{message};
  }

  Status enqueue(size_t i) {
    cl_event ev = nullptr;
    FBL_TRY(enqueueKernel(kernels[i], plan.launches[i], profiling ? &ev : nullptr));
    if (ev) events.emplace_back(static_cast<int32_t>(i), ev);
    return Status::success();
  }

  // Releasing the event of a command still queued is allowed: the driver keeps what it needs.
  void dropEvents() {
    for (auto& [launch, ev] : events) clReleaseEvent(ev);
    events.clear();
  }
  // A failed call leaves its events behind; the next call starts afresh.
  void beginCall() {
    dropEvents();
    times.clear();
  }

  // Once the queue is drained: the device time of every launch enqueued since the call began.
  Status collectTimes() {
    times.clear();
    for (const auto& [launch, ev] : events) {
      cl_ulong start = 0, end = 0;
      cl_int st = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
      if (st == CL_SUCCESS) st = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
      if (st != CL_SUCCESS) {
        const planfile::Launch& l = plan.launches[launch];
        beginCall();
        return clErr("timing " + plan.kernelNames[l.kernel] + " for node '" + l.node + "'", st);
      }
      times.push_back({launch, end > start ? static_cast<double>(end - start) * 1e-9 : 0.0});
    }
    dropEvents();
    return Status::success();
  }

  Status open(const OpenOptions& opts) {
    // Parsed and checked whole before any OpenCL call; geometry once the device is known.
    FBL_ASSIGN(plan, readPlanFile(planPath));
    FBL_ASSIGN(const bool cacheOn, programCacheEnabled());
    // 2. device
    const std::vector<Dev> devs = allDevices();
    if (devs.empty()) return Error{"no OpenCL device found (is an ICD installed? `clinfo -l` lists them)"};
    if (opts.device >= static_cast<int>(devs.size()))
      return Error{"device " + std::to_string(opts.device) + " does not exist (there are " + std::to_string(devs.size()) + ")"};
    if (opts.device >= 0) {
      dev = devs[opts.device];
    } else {
      dev = devs[0];
      for (const Dev& d : devs)
        if (d.info.gpu) { dev = d; break; }
    }
    limits = limitsOf(dev.id);
    if (Status e = checkLaunchGeometry(plan, limits); !e.ok()) return Error{where() + ": " + e.error().message};
    cl_int st = CL_SUCCESS;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(dev.platform), 0};
    ctx = clCreateContext(props, 1, &dev.id, nullptr, nullptr, &st);
    if (st != CL_SUCCESS) return clErr("clCreateContext", st);
    profiling = opts.profileLaunches;
    queue = clCreateCommandQueue(ctx, dev.id, profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &st);
    if (st != CL_SUCCESS) return clErr("clCreateCommandQueue", st);
    const cl_ulong maxAlloc = limits.maxAllocBytes;
    // 3. memory
    if (static_cast<cl_ulong>(plan.poolSize(0)) > maxAlloc)
      return Error{where() + ": its pools of " + std::to_string(plan.poolSize(0)) + " bytes exceed the device's largest allocation (" +
                   std::to_string(maxAlloc) + " bytes; recompile with this device's profile)"};
    for (int64_t i = 0; i < plan.poolCount(); ++i) {
      pools.push_back(clCreateBuffer(ctx, CL_MEM_READ_WRITE, static_cast<size_t>(plan.poolSize(i)), nullptr, &st));
      if (st != CL_SUCCESS) {
        pools.pop_back();
        return clErr("allocating pool " + std::to_string(i) + " of " + std::to_string(plan.poolCount()) + " (" +
                         std::to_string(plan.poolSize(i)) + " bytes)", st);
      }
    }
    if (!plan.imageSlots.empty()) {
      cl_bool imageSupport = CL_FALSE;
      size_t maxW = 0, maxH = 0;
      clGetDeviceInfo(dev.id, CL_DEVICE_IMAGE_SUPPORT, sizeof imageSupport, &imageSupport, nullptr);
      clGetDeviceInfo(dev.id, CL_DEVICE_IMAGE2D_MAX_WIDTH, sizeof maxW, &maxW, nullptr);
      clGetDeviceInfo(dev.id, CL_DEVICE_IMAGE2D_MAX_HEIGHT, sizeof maxH, &maxH, nullptr);
      if (!imageSupport) return Error{where() + ": it stores tensors in images and the device has none (recompile with --storage buffer)"};
      const cl_image_format format{CL_RGBA, CL_FLOAT};
      for (const auto& slot : plan.imageSlots) {
        if (static_cast<size_t>(slot[0]) > maxW || static_cast<size_t>(slot[1]) > maxH)
          return Error{where() + ": an image of " + std::to_string(slot[0]) + " x " + std::to_string(slot[1]) +
                       " texels exceeds the device's " + std::to_string(maxW) + " x " + std::to_string(maxH) +
                       " (recompile for this device's profile)"};
        cl_image_desc desc{};
        desc.image_type = CL_MEM_OBJECT_IMAGE2D;
        desc.image_width = static_cast<size_t>(slot[0]);
        desc.image_height = static_cast<size_t>(slot[1]);
        cl_mem m = clCreateImage(ctx, CL_MEM_READ_WRITE, &format, &desc, nullptr, &st);
        if (st != CL_SUCCESS) return clErr("allocating an image of " + std::to_string(slot[0]) + " x " + std::to_string(slot[1]) + " texels", st);
        images.push_back(m);
      }
    }
    // 4. program and kernels
    const std::string cacheDir = !opts.cachePrograms || !cacheOn ? std::string()
                                 : opts.cacheDir.empty()          ? defaultCacheDir()
                                                                  : opts.cacheDir;
    const Result<BuiltProgram> built = buildProgram(ctx, dev.id, plan.program, plan.buildOptions, cacheDir);
    if (!built.ok()) return Error{where() + ": " + built.error().message};
    program = built->program;
    fromCache = built->fromCache;
    std::vector<cl_kernel> byName(plan.kernelNames.size(), nullptr);
    for (const bool transfer : {false, true}) {
      const std::vector<planfile::Launch>& list = transfer ? plan.transfers : plan.launches;
      for (size_t i = 0; i < list.size(); ++i) {
        const planfile::Launch& l = list[i];
        cl_kernel k = clCreateKernel(program, plan.kernelNames[l.kernel].c_str(), &st);
        if (st != CL_SUCCESS) return clErr("creating kernel " + plan.kernelNames[l.kernel], st);
        (transfer ? transferKernels : kernels).push_back(k);
        if (Status e = checkKernelGroup(k, dev.id, plan, i, transfer); !e.ok()) return Error{where() + ": " + e.error().message};
        FBL_TRY(bind(k, l));
      }
    }
    // 5. constants and state
    loaded.assign(plan.tensors.size(), false);
    baseLr = plan.loop.lr;
    for (size_t t = 0; t < plan.tensors.size(); ++t) {
      const planfile::Tensor& pt = plan.tensors[t];
      if (pt.role == planfile::Role::Constant && pt.constOffset >= 0 && pt.bytes > 0)
        FBL_TRY(write(static_cast<int32_t>(t), plan.blob.data() + pt.constOffset, static_cast<size_t>(pt.bytes)));
      if (pt.role == planfile::Role::State || pt.role == planfile::Role::Counter)
        FBL_TRY(fill(static_cast<int32_t>(t), 0));
    }
    // The loop's scalars hold a first step's values until a step writes them (runPhases reads them too).
    if (plan.loop.lrTensor >= 0) {
      const auto lr = static_cast<float>(planfile::scheduledLr(plan.loop, baseLr, 1));
      FBL_TRY(write(plan.loop.lrTensor, &lr, sizeof lr));
    }
    if (plan.loop.accumKeep >= 0)
      FBL_TRY(fill(plan.loop.accumKeep, 0));
    return Status::success();
  }

  Status missingWeights() const {
    for (size_t t = 0; t < plan.tensors.size(); ++t) {
      if (plan.tensors[t].fromWeights() && !loaded[t])
        return Error{"weight '" + plan.tensors[t].source + "' was never loaded (call loadWeights with a file that has it)"};
    }
    return unwrittenInput();
  }

  // A weight, trainable or input the host never wrote holds whatever the arena held: reading
  // it, or saving it to a checkpoint or adapter, would hand out garbage.
  Status unwritten(int32_t t) const {
    const planfile::Tensor& pt = plan.tensors[t];
    if (loaded[t]) return Status::success();
    if (pt.role == planfile::Role::Input) return Error{"input '" + pt.name + "' was never written"};
    if (pt.fromWeights()) return Error{"weight '" + pt.name + "' was never loaded (load weights or a checkpoint first)"};
    return Status::success();
  }

  // An input nobody wrote holds whatever the arena held: bytes no check has seen.
  Status unwrittenInput() const {
    for (int32_t t : plan.inputs)
      if (!loaded[t]) return Error{"input '" + plan.tensors[t].name + "' was never written (write every input before a step)"};
    return Status::success();
  }

  // A tensor by name, or the error naming it.
  Status find(const std::string& name, int32_t* t) const {
    *t = plan.findTensor(name);
    if (*t < 0) return Error{"the plan has no tensor '" + name + "'"};
    return Status::success();
  }
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::open(const std::string& planPath, const OpenOptions& opts) {
  auto impl = std::make_unique<Impl>();
  impl->planPath = planPath;
  FBL_TRY(impl->open(opts));
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

const planfile::Plan& Session::plan() const { return impl_->plan; }
const DeviceInfo& Session::device() const { return impl_->dev.info; }
const DeviceLimits& Session::deviceLimits() const { return impl_->limits; }
bool Session::programFromCache() const { return impl_->fromCache; }
int64_t Session::step() const { return impl_->step; }
int32_t Session::accumulated() const { return impl_->accumulated; }

Status Session::setLearningRate(float lr) {
  if (impl_->plan.loop.schedule.empty())
    return Error{"the plan's learning rate is compiled into its kernels; compile with --lr-schedule (constant, linear or cosine) to change it"};
  if (!std::isfinite(lr) || lr <= 0) return Error{"the learning rate must be a positive number, not " + std::to_string(lr)};
  impl_->baseLr = lr;
  return Status::success();
}

double Session::learningRate() const {
  const planfile::Plan& p = impl_->plan;
  if (p.loop.schedule.empty()) return p.optimizer.value("lr", 0.0);
  return planfile::scheduledLr(p.loop, impl_->baseLr, impl_->step + 1);
}
const std::vector<LaunchTime>& Session::launchTimes() const { return impl_->times; }

Status Session::loadWeights(const std::string& path) {
  FBL_ASSIGN(const safetensors::File f, safetensors::read(path, "a weights file"));
  Impl& m = *impl_;
  // The whole file first: a refused file writes nothing.
  std::string base;
  FBL_TRY(checkWeights(m.plan, f, path, &base));
  for (size_t t = 0; t < m.plan.tensors.size(); ++t) {
    const planfile::Tensor& pt = m.plan.tensors[t];
    if (!pt.fromWeights()) continue;
    const safetensors::Entry& e = f.tensors.at(pt.source);
    // Row-major bytes; write() packs them into the tensor's layout.
    FBL_TRY(m.write(static_cast<int32_t>(t), e.data.data(), e.data.size()));
    m.loaded[t] = true;
  }
  m.baseWeights = base;
  return Status::success();
}

Status Session::checkInput(const std::string& name, const void* data, size_t bytes) const {
  int32_t t = -1;
  FBL_TRY(impl_->find(name, &t));
  return rt::checkInput(impl_->plan, t, data, bytes);
}

Status Session::checkInput(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                           const void* data, size_t bytes) const {
  int32_t t = -1;
  FBL_TRY(impl_->find(name, &t));
  return rt::checkInput(impl_->plan, t, dtype, shape, data, bytes);
}

Status Session::writeTensor(const std::string& name, const void* data, size_t bytes) {
  FBL_TRY(checkInput(name, data, bytes));
  const int32_t t = impl_->plan.findTensor(name);
  impl_->loaded[t] = true;
  return impl_->write(t, data, bytes);
}

Status Session::writeInput(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                           const void* data, size_t bytes) {
  FBL_TRY(checkInput(name, dtype, shape, data, bytes));
  const int32_t t = impl_->plan.findTensor(name);
  impl_->loaded[t] = true;
  return impl_->write(t, data, bytes);
}

Status Session::readTensor(const std::string& name, std::vector<unsigned char>* out) {
  const int32_t t = impl_->plan.findTensor(name);
  if (t < 0) return Error{"the plan has no tensor '" + name + "'"};
  return readTensor(t, out);
}

Status Session::readTensor(int32_t t, std::vector<unsigned char>* out) {
  FBL_TRY(impl_->unwritten(t));
  return impl_->read(t, out);
}

Status Session::runPhases(const std::vector<std::string>& phases) {
  Impl& m = *impl_;
  m.beginCall();
  FBL_TRY(m.unwrittenInput());
  for (size_t i = 0; i < m.plan.launches.size(); ++i) {
    bool run = false;
    for (const std::string& p : phases) run = run || p == m.plan.launches[i].phase;
    if (run)
      FBL_TRY(m.enqueue(i));
  }
  const cl_int st = clFinish(m.queue);
  if (st != CL_SUCCESS) return clErr("clFinish", st);
  return m.collectTimes();
}

Status Session::trainStep(float* loss) {
  Impl& m = *impl_;
  m.beginCall();
  m.cancelled = false;
  if (m.plan.loss < 0) return Error{"the plan has no loss"};
  FBL_TRY(m.missingWeights());
  const int64_t next = m.step + 1;
  const planfile::TrainingLoop& loop = m.plan.loop;
  // With gradient accumulation only a window's last micro-batch runs the optimizer.
  const bool update = m.accumulated + 1 >= loop.gradAccum;
  const std::string cancelled = "step " + std::to_string(next) +
                                " was cancelled before its optimizer phase; trainables, optimizer state and the step are as before";
  if (m.control.take()) return m.cancel(cancelled);
  if (m.plan.step >= 0)
    FBL_TRY(m.write(m.plan.step, &next, sizeof next));
  if (loop.lrTensor >= 0) {
    const auto lr = static_cast<float>(planfile::scheduledLr(loop, m.baseLr, next));
    FBL_TRY(m.write(loop.lrTensor, &lr, sizeof lr));
  }
  if (loop.accumKeep >= 0) {
    const float keep = m.accumulated == 0 ? 0.0f : 1.0f;
    FBL_TRY(m.write(loop.accumKeep, &keep, sizeof keep));
  }
  // Phases are in step order (runtime/plan_check.h): the optimizer launches are the tail.
  size_t optimizer = 0;
  while (optimizer < m.plan.launches.size() && m.plan.launches[optimizer].phase != "optimizer") ++optimizer;
  const auto total = static_cast<int32_t>(update ? m.plan.launches.size() : optimizer);
  bool stopped = false;
  FBL_TRY(m.runRange(0, optimizer, next, total, /*cancellable=*/true, &stopped));
  if (stopped) return m.cancel(cancelled);
  float l = 0.0f;
  cl_int st = clEnqueueReadBuffer(m.queue, m.poolOf(m.plan.loss), CL_TRUE, m.offsetOf(m.plan.loss), sizeof l, &l, 0, nullptr, nullptr);
  if (st != CL_SUCCESS) return clErr("reading the loss", st);
  if (loss) *loss = l;
  if (!std::isfinite(l)) return Error{"loss is " + std::string(std::isnan(l) ? "NaN" : "infinite") + " at step " + std::to_string(next) + "; trainables were not updated"};
  // The last moment a cancel is honoured: from here on the step runs to its end.
  if (m.control.take()) return m.cancel(cancelled);
  if (update)
    FBL_TRY(m.runRange(optimizer, m.plan.launches.size(), next, total, /*cancellable=*/false, &stopped));
  // Accumulators and updated buffers change with every micro-batch; the rest only with an update.
  auto everyMicroBatch = [&](int32_t t) {
    return std::find(loop.accumulators.begin(), loop.accumulators.end(), t) != loop.accumulators.end() ||
           std::find(m.plan.updatedBuffers.begin(), m.plan.updatedBuffers.end(), t) != m.plan.updatedBuffers.end();
  };
  for (const auto& c : m.plan.commits) {
    if (!update && !everyMicroBatch(c[1])) continue;
    st = clEnqueueCopyBuffer(m.queue, m.poolOf(c[0]), m.poolOf(c[1]), m.offsetOf(c[0]), m.offsetOf(c[1]),
                             static_cast<size_t>(m.plan.tensors[c[1]].bytes), 0, nullptr, nullptr);
    if (st != CL_SUCCESS) return clErr("committing tensor '" + m.plan.tensors[c[1]].name + "'", st);
  }
  st = clFinish(m.queue);
  if (st != CL_SUCCESS) return clErr("clFinish", st);
  if (update) {
    m.step = next;
    m.accumulated = 0;
  } else {
    ++m.accumulated;
  }
  return m.collectTimes();
}

Status Session::evalStep(float* loss) {
  Impl& m = *impl_;
  m.beginCall();
  m.cancelled = false;
  if (m.plan.loss < 0) return Error{"the plan has no loss"};
  FBL_TRY(m.missingWeights());
  const std::string cancelled = "the evaluation was cancelled; nothing was changed";
  if (m.control.take()) return m.cancel(cancelled);
  size_t forward = 0;
  bool lossComputed = false;
  for (; forward < m.plan.launches.size() && m.plan.launches[forward].phase == "forward"; ++forward)
    for (int32_t a : m.plan.launches[forward].args) lossComputed = lossComputed || a == m.plan.loss;
  if (!lossComputed) return Error{"the plan computes its loss outside the forward phase, so it cannot be evaluated alone"};
  bool stopped = false;
  FBL_TRY(m.runRange(0, forward, m.step + 1, static_cast<int32_t>(forward), /*cancellable=*/true, &stopped));
  if (stopped) return m.cancel(cancelled);
  float l = 0.0f;
  const cl_int st = clEnqueueReadBuffer(m.queue, m.poolOf(m.plan.loss), CL_TRUE, m.offsetOf(m.plan.loss), sizeof l, &l, 0, nullptr, nullptr);
  if (st != CL_SUCCESS) return clErr("reading the loss", st);
  if (loss) *loss = l;
  return m.collectTimes();
}

void Session::setProgress(ProgressFn fn, int32_t every) { impl_->control.setProgress(std::move(fn), every); }
void Session::cancel() { impl_->control.cancel(); }
bool Session::cancelled() const { return impl_->cancelled; }

Status Session::saveCheckpoint(const std::string& path) {
  Impl& m = *impl_;
  safetensors::File f;
  auto add = [&](int32_t t) -> Status {
    if (Status missing = m.unwritten(t); !missing.ok()) return Error{"cannot save a checkpoint: " + missing.error().message};
    safetensors::Entry e;
    e.dtype = safetensors::fromFblDType(m.plan.tensors[t].dtype);
    e.shape = m.plan.tensors[t].shape;
    FBL_TRY(m.read(t, &e.data));
    f.tensors[m.plan.tensors[t].name] = std::move(e);
    return Status::success();
  };
  for (const planfile::Trainable& t : m.plan.trainables)
    FBL_TRY(add(t.param));
  for (int32_t s : m.plan.state)
    FBL_TRY(add(s));
  f.metadata["format"] = "fbl-checkpoint-1";
  f.metadata["step"] = std::to_string(m.step);
  f.metadata["model"] = m.plan.model;
  if (!m.baseWeights.empty()) f.metadata[kBaseWeightsKey] = m.baseWeights;
  // The training loop's position, so that a resumed run continues exactly (runtime/training_loop.h).
  if (m.plan.loop.gradAccum > 1) f.metadata["grad_accum_position"] = std::to_string(m.accumulated);
  if (!m.plan.loop.schedule.empty()) {
    char lr[32];
    std::snprintf(lr, sizeof lr, "%.17g", m.baseLr);
    f.metadata["learning_rate"] = lr;
  }
  safetensors::addChecksum(&f);
  return safetensors::write(path, f, "a checkpoint file");
}

Status Session::loadCheckpoint(const std::string& path) {
  Impl& m = *impl_;
  FBL_ASSIGN(const safetensors::File f, safetensors::read(path, "a checkpoint file"));
  // The whole file first: a refused checkpoint leaves trainables, state and step as they were.
  int64_t step = 0;
  FBL_TRY(checkCheckpoint(m.plan, f, path, &step, m.baseWeights));
  int32_t accumulated = 0;
  double baseLr = 0;
  FBL_TRY(checkLoopState(m.plan, f, path, &accumulated, &baseLr));
  std::vector<int32_t> ids;
  for (const planfile::Trainable& t : m.plan.trainables) ids.push_back(t.param);
  ids.insert(ids.end(), m.plan.state.begin(), m.plan.state.end());
  for (int32_t t : ids) {
    const safetensors::Entry& e = f.tensors.at(m.plan.tensors[t].name);
    FBL_TRY(m.write(t, e.data.data(), e.data.size()));
    m.loaded[t] = true;
  }
  m.step = step;
  m.accumulated = accumulated;
  m.baseLr = baseLr;
  return Status::success();
}

Status Session::canExportAdapter() const {
  const planfile::Plan& p = impl_->plan;
  if (!p.adapterRefusal.empty()) return Error{p.adapterRefusal};
  if (p.adapterConfig.empty()) return Error{"the plan has no peft adapter to export (none of its trainables is peft's)"};
  return Status::success();
}

Status Session::exportAdapter(const std::string& dir) {
  Impl& m = *impl_;
  if (Status r = canExportAdapter(); !r.ok()) return Error{"cannot export the adapter: " + r.error().message};
  if (Status e = directoryRequired(dir); !e.ok())
    return Error{e.error().message + " (adapters are exported into an existing directory)"};
  safetensors::File f;
  for (const auto* list : {&m.plan.trainables, &m.plan.adapterFrozen})
    for (const planfile::Trainable& t : *list) {
      if (Status e = m.unwritten(t.param); !e.ok()) return Error{"cannot export the adapter: " + e.error().message};
      safetensors::Entry e;
      e.dtype = safetensors::fromFblDType(m.plan.tensors[t.param].dtype);
      e.shape = m.plan.tensors[t.param].shape;
      FBL_TRY(m.read(t.param, &e.data));
      f.tensors[t.adapterKey] = std::move(e);
    }
  f.metadata["format"] = "pt";
  FBL_TRY(safetensors::write(dir + "/adapter_model.safetensors", f));
  return safetensors::writeFileAtomic(dir + "/adapter_config.json", m.plan.adapterConfig.dump(2) + "\n");
}

}  // namespace fbl::rt
