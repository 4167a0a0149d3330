// Times narrow_lab.cl's variants of a narrow product (x A^T, dy B) against the floors, alone
// (min of RUNS single launches, each waited for) and back to back (BATCH launches queued, first
// start to last end / BATCH, as a step queues them), each checked against a double-precision loop.
// Lab code, not product code. Build: g++ -O2 -std=c++17 narrow_lab.cc -lOpenCL -o narrow_lab
// Run:   ./narrow_lab narrow_lab.cl [device index]
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

void check(cl_int err, const char* what) {
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "error: %s: %d\n", what, err);
    std::exit(1);
  }
}

struct Variant {
  const char* kernel;
  unsigned ks, rb, unroll;
};

struct Timing {
  double aloneUs, queuedUs, bareUs, wallUs;
};

Timing timeKernel(cl_command_queue q, cl_kernel k, size_t global, size_t local, int runs, int batch) {
  auto span = [](cl_event a, cl_event b) {
    cl_ulong t0 = 0, t1 = 0;
    clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, nullptr);
    clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, nullptr);
    return static_cast<double>(t1 - t0) * 1e-3;
  };
  Timing t{1e30, 1e30, 1e30, 1e30};
  for (int r = -1; r < runs; ++r) {
    cl_event ev;
    check(clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, &ev), "enqueue");
    clWaitForEvents(1, &ev);
    if (r >= 0) t.aloneUs = std::min(t.aloneUs, span(ev, ev));
    clReleaseEvent(ev);
  }
  for (int rep = 0; rep < 3; ++rep) {
    cl_event first = nullptr, last = nullptr;
    for (int b = 0; b < batch; ++b) {
      cl_event ev;
      check(clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, &ev), "enqueue");
      if (b == 0) first = ev;
      else if (b == batch - 1) last = ev;
      else clReleaseEvent(ev);
    }
    clWaitForEvents(1, &last);
    t.queuedUs = std::min(t.queuedUs, span(first, last) / batch);
    clReleaseEvent(first);
    clReleaseEvent(last);
  }
  // As the runtime queues a step when not profiling: no event but the first and the last; and
  // the host's wall clock over the same, to the queue's drain.
  for (int rep = 0; rep < 3; ++rep) {
    cl_event first = nullptr, last = nullptr;
    clFinish(q);
    const auto w0 = std::chrono::steady_clock::now();
    for (int b = 0; b < batch; ++b)
      check(clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr,
                                   b == 0 ? &first : b == batch - 1 ? &last : nullptr),
            "enqueue");
    clFinish(q);
    const double wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - w0).count();
    t.bareUs = std::min(t.bareUs, span(first, last) / batch);
    t.wallUs = std::min(t.wallUs, wall / batch);
    clReleaseEvent(first);
    clReleaseEvent(last);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: narrow_lab KERNELS.cl [device]\n"), 2;
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string source = ss.str();
  const int want = argc > 2 ? std::atoi(argv[2]) : 0;
  const int runs = 20, batch = 100;

  cl_uint np = 0;
  clGetPlatformIDs(0, nullptr, &np);
  std::vector<cl_platform_id> plats(np);
  clGetPlatformIDs(np, plats.data(), nullptr);
  std::vector<cl_device_id> devs;
  for (cl_platform_id p : plats) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS) continue;
    std::vector<cl_device_id> d(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, d.data(), nullptr);
    devs.insert(devs.end(), d.begin(), d.end());
  }
  if (want >= static_cast<int>(devs.size())) return std::fprintf(stderr, "no device %d\n", want), 1;
  cl_device_id dev = devs[want];
  char name[256] = {};
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(name), name, nullptr);
  std::printf("device %d: %s\n", want, name);
  cl_int err;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  check(err, "context");
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "queue");

  const unsigned M = 512, K = 2048;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  const std::vector<Variant> variants{{"block", 256, 1, 0},        {"block_planes", 256, 1, 0}, {"block_planes", 128, 1, 1},
                                      {"slab_short", 128, 1, 1},  {"stream", 256, 1, 0},       {"empty", 256, 1, 0}};
  std::printf("%-6s %3s %2s %-13s %4s %3s %6s %9s %9s %9s %9s %9s\n", "prod", "N", "RT", "kernel", "KS", "RB",
              "unroll", "alone us", "queued us", "bare us", "wall us", "max err");
  for (unsigned N : {8u, 16u})
    for (unsigned rt : {1u, 0u}) {
      std::vector<float> l(M * K), r(K * N), ref(M * N);
      for (float& v : l) v = dist(rng);
      for (float& v : r) v = dist(rng);
      for (unsigned m = 0; m < M; ++m)
        for (unsigned n = 0; n < N; ++n) {
          double s = 0;
          for (unsigned k = 0; k < K; ++k) s += double(l[m * K + k]) * (rt ? r[n * K + k] : r[k * N + n]);
          ref[m * N + n] = static_cast<float>(s);
        }
      cl_mem bl = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, l.size() * 4, l.data(), &err);
      cl_mem br = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, r.size() * 4, r.data(), &err);
      cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ref.size() * 4, nullptr, &err);
      for (const Variant& v : variants) {
        const std::string opts = "-DM=" + std::to_string(M) + "u -DK=" + std::to_string(K) + "u -DN=" +
                                 std::to_string(N) + "u -DRT=" + std::to_string(rt) + " -DKS=" + std::to_string(v.ks) +
                                 "u -DRB=" + std::to_string(v.rb) + "u -DUNROLL=" + std::to_string(v.unroll);
        const char* src = source.c_str();
        cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
        if (clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr) != CL_SUCCESS) {
          size_t len = 0;
          clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
          std::string log(len, ' ');
          clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, &log[0], nullptr);
          std::fprintf(stderr, "build %s (%s) failed:\n%s\n", v.kernel, opts.c_str(), log.c_str());
          return 1;
        }
        cl_kernel k = clCreateKernel(prog, v.kernel, &err);
        check(err, "kernel");
        clSetKernelArg(k, 0, sizeof(cl_mem), &bl);
        clSetKernelArg(k, 1, sizeof(cl_mem), &br);
        clSetKernelArg(k, 2, sizeof(cl_mem), &bc);
        const std::string kn = v.kernel;
        size_t local = v.ks, groups = 1;
        if (kn == "block" || kn == "block_planes") groups = M / 4 * (N / 4);
        else if (kn == "slab" || kn == "slab_short") groups = M / v.rb, local = v.rb * v.ks;
        else if (kn == "stream") local = 256, groups = (M * K / 4 + K * N / 4 + 255) / 256;
        else local = 256, groups = 1;
        std::vector<float> zero(ref.size(), 0.0f);
        clEnqueueWriteBuffer(q, bc, CL_TRUE, 0, zero.size() * 4, zero.data(), 0, nullptr, nullptr);
        const Timing t = timeKernel(q, k, groups * local, local, runs, batch);
        std::vector<float> got(ref.size());
        clEnqueueReadBuffer(q, bc, CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr);
        double worst = 0;
        if (kn != "stream" && kn != "empty")
          for (size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::fabs(got[i] - ref[i]) / (std::fabs(ref[i]) + 1.0));
        std::printf("%-6s %3u %2u %-13s %4u %3u %6u %9.2f %9.2f %9.2f %9.2f %9.2g%s\n", rt ? "xA^T" : "dyB", N, rt,
                    v.kernel, v.ks, v.rb, v.unroll, t.aloneUs, t.queuedUs, t.bareUs, t.wallUs, worst,
                    worst > 1e-4 ? "  WRONG" : "");
        clReleaseKernel(k);
        clReleaseProgram(prog);
      }
      clReleaseMemObject(bl);
      clReleaseMemObject(br);
      clReleaseMemObject(bc);
    }
  return 0;
}
