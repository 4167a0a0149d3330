// Times wgrad_lab.cl's tilings of the LoRA weight gradients at the MLP's width (C = X^T T, X
// [512 x W], T [512 x R]; stored C [W x R] and C^T [R x W]) against two floors: a launch that
// streams the same bytes, and an empty launch. Each is timed alone (the fastest of RUNS single
// launches, each waited for) and queued (50 back to back, events on the first and the last, as
// a step queues them), then its output is cleared, it runs once more, and it is checked against a
// double-precision loop: that last run also shows that the chunked tilings reset their counts.
// Lab code, not product code; the same harness as ../h200-2026-12-04-s37/split_lab.cc.
// Build: g++ -O2 -std=c++17 wgrad_lab.cc -lOpenCL -o wgrad_lab
// Run:   ./wgrad_lab wgrad_lab.cl [device index [runs [W [K]]]]
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
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

struct Tiling {
  const char* kernel;
  unsigned tw, cpw, ks, g;
};

double span(cl_event a, cl_event b) {
  cl_ulong t0 = 0, t1 = 0;
  clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, nullptr);
  clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, nullptr);
  return static_cast<double>(t1 - t0) * 1e-3;
}

cl_device_id pickDevice(int want) {
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
  if (want >= static_cast<int>(devs.size())) std::fprintf(stderr, "no device %d\n", want), std::exit(1);
  return devs[want];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: wgrad_lab KERNELS.cl [device [runs [W [K]]]]\n"), 2;
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string source = ss.str();
  const int runs = argc > 3 ? std::atoi(argv[3]) : 20, batch = runs < 5 ? 5 : 50;
  const unsigned W = argc > 4 ? std::atoi(argv[4]) : 8192, K = argc > 5 ? std::atoi(argv[5]) : 512;
  cl_device_id dev = pickDevice(argc > 2 ? std::atoi(argv[2]) : 0);
  char name[256] = {};
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(name), name, nullptr);
  std::printf("device: %s; W %u, K %u\n", name, W, K);
  cl_int err;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  check(err, "context");
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "queue");

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::printf("%3s %5s %-6s %4s %4s %4s %3s %6s %9s %9s %9s\n", "R", "out", "kernel", "TW", "CPW", "KS", "G", "groups",
              "alone us", "queued us", "max err");
  for (unsigned R : {8u, 16u}) {
    const unsigned WT = W / 4;
    // The floors, then every tiling of 256 work-items a group (and 128 at TW 128) whose slices
    // walk at least 4 rows of K, up to 1024 groups.
    std::vector<Tiling> tilings = {{"empty", 1, 1, 1, 1}, {"stream", 1, 1, 1, 1}};
    for (unsigned tw : {16u, 32u, 64u, 128u, 256u})
      for (unsigned cpw : {1u, 2u})
        for (unsigned g : {1u, 2u, 4u, 8u, 16u}) {
          const unsigned ks = 256 / (tw / cpw);
          if (cpw * R > 16 || tw / cpw > 256 || ks < 1 || K / g / ks < 4 || WT % tw != 0 || WT / tw * g > 1024) continue;
          tilings.push_back({"wgrad", tw, cpw, ks, g});
        }
    std::vector<float> x(size_t{K} * W), t(size_t{K} * R), ref(size_t{W} * R);
    for (float& v : x) v = dist(rng);
    for (float& v : t) v = dist(rng);
    for (unsigned w = 0; w < W; ++w)
      for (unsigned r = 0; r < R; ++r) {
        double s = 0;
        for (unsigned k = 0; k < K; ++k) s += double(x[size_t{k} * W + w]) * t[size_t{k} * R + r];
        ref[size_t{w} * R + r] = static_cast<float>(s);
      }
    cl_mem bx = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, x.size() * 4, x.data(), &err);
    cl_mem bt = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, t.size() * 4, t.data(), &err);
    cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ref.size() * 4, nullptr, &err);
    cl_mem bs = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 16u * W * R * 4, nullptr, &err);
    std::vector<unsigned> zeros(4096, 0);
    cl_mem bn = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, zeros.size() * 4, zeros.data(), &err);
    for (unsigned outT : {0u, 1u})
      for (const Tiling& tl : tilings) {
        const std::string kn = tl.kernel;
        if (kn != "wgrad" && outT) continue;  // the floors once
        size_t local = (tl.tw / tl.cpw) * tl.ks, groups = WT / tl.tw * tl.g;
        if (kn == "stream") local = 256, groups = (size_t{K} * W / 4 + K * R / 4 + 255) / 256;
        else if (kn == "empty") local = 256, groups = 1;
        const std::string opts = "-DW=" + std::to_string(W) + "u -DK=" + std::to_string(K) + "u -DR=" + std::to_string(R) +
                                 "u -DTW=" + std::to_string(tl.tw) + "u -DCPW=" + std::to_string(tl.cpw) + "u -DKS=" +
                                 std::to_string(tl.ks) + "u -DG=" + std::to_string(tl.g) + " -DOUT_T=" + std::to_string(outT);
        const char* src = source.c_str();
        cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
        if (clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr) != CL_SUCCESS) {
          size_t len = 0;
          clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
          std::string log(len, ' ');
          clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, &log[0], nullptr);
          std::fprintf(stderr, "build %s (%s) failed:\n%s\n", tl.kernel, opts.c_str(), log.c_str());
          return 1;
        }
        cl_kernel k = clCreateKernel(prog, tl.kernel, &err);
        check(err, "kernel");
        for (cl_uint a = 0; a < 5; ++a)
          clSetKernelArg(k, a, sizeof(cl_mem), a == 0 ? &bx : a == 1 ? &bt : a == 2 ? &bc : a == 3 ? &bs : &bn);
        auto launch = [&](cl_event* ev) {
          const size_t global = groups * local;
          check(clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, ev), "enqueue");
        };
        double alone = 1e30, queued = 1e30;
        for (int i = -1; i < runs; ++i) {
          cl_event a;
          launch(&a);
          clWaitForEvents(1, &a);
          if (i >= 0) {
            alone = std::min(alone, span(a, a));
          }
          clReleaseEvent(a);
        }
        for (int rep = 0; rep < 3; ++rep) {
          cl_event first = nullptr, last = nullptr;
          for (int b = 0; b < batch; ++b) launch(b == 0 ? &first : b == batch - 1 ? &last : nullptr);
          clWaitForEvents(1, &last);
          queued = std::min(queued, span(first, last) / batch);
          clReleaseEvent(first);
          clReleaseEvent(last);
        }
        std::vector<float> got(ref.size(), 0.0f);
        clEnqueueWriteBuffer(q, bc, CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr);
        launch(nullptr);
        clEnqueueReadBuffer(q, bc, CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr);
        double worst = 0;
        if (kn == "wgrad")
          for (unsigned w = 0; w < W; ++w)
            for (unsigned r = 0; r < R; ++r) {
              const float v = outT ? got[size_t{r} * W + w] : got[size_t{w} * R + r];
              const float want = ref[size_t{w} * R + r];
              worst = std::max(worst, std::fabs(double(v) - want) / (std::fabs(want) + 1.0));
            }
        std::printf("%3u %5s %-6s %4u %4u %4u %3u %6zu %9.2f %9.2f %9.2g%s\n", R, outT ? "R x W" : "W x R", tl.kernel, tl.tw,
                    tl.cpw, tl.ks, tl.g, groups, alone, queued, worst, worst > 1e-4 ? "  WRONG" : "");
        std::fflush(stdout);
        clReleaseKernel(k);
        clReleaseProgram(prog);
      }
    for (cl_mem b : {bx, bt, bc, bs, bn}) clReleaseMemObject(b);
  }
  return 0;
}
