// Times narrow_lab.cl's variants of a narrow product (x A^T, dy B), one or three products a launch
// (distinct operands), against the floors: alone (min of RUNS single launches, each waited for)
// and bare (BATCH launches back to back, an event on the first and the last only, as the runtime
// queues an unprofiled step), each product checked against a double-precision loop. The stop-30
// lab (../h200-2026-12-03-s30/narrow_lab.cc) with products added; stop 33: the variants that read
// R's rows whole (cslice, allcols) beside the committed walk (planes).
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
  unsigned ks, radix, products, noUnroll;
  const char* extra;  // more build options
  unsigned rpi = 1;   // rows: row blocks a work-item
};

struct Timing {
  double aloneUs, queuedUs, bareUs, wallUs;
};

Timing timeKernel(cl_command_queue q, cl_kernel k, const size_t* global, const size_t* local, int runs, int batch) {
  auto span = [](cl_event a, cl_event b) {
    cl_ulong t0 = 0, t1 = 0;
    clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, nullptr);
    clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, nullptr);
    return static_cast<double>(t1 - t0) * 1e-3;
  };
  Timing t{1e30, 1e30, 1e30, 1e30};
  for (int r = -1; r < runs; ++r) {
    cl_event ev;
    check(clEnqueueNDRangeKernel(q, k, 2, nullptr, global, local, 0, nullptr, &ev), "enqueue");
    clWaitForEvents(1, &ev);
    if (r >= 0) t.aloneUs = std::min(t.aloneUs, span(ev, ev));
    clReleaseEvent(ev);
  }
  for (int rep = 0; rep < 3; ++rep) {
    cl_event first = nullptr, last = nullptr;
    for (int b = 0; b < batch; ++b) {
      cl_event ev;
      check(clEnqueueNDRangeKernel(q, k, 2, nullptr, global, local, 0, nullptr, &ev), "enqueue");
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
      check(clEnqueueNDRangeKernel(q, k, 2, nullptr, global, local, 0, nullptr,
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
  if (argc < 2) return std::fprintf(stderr, "usage: narrow_lab KERNELS.cl [device [runs]]\n"), 2;
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string source = ss.str();
  const int want = argc > 2 ? std::atoi(argv[2]) : 0;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 20, batch = runs < 5 ? 10 : 100;  // few runs: a quick check

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

  const unsigned M = 512, K = 2048, P = 3;  // P: the most products a launch
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<Variant> variants;
  for (unsigned p : {1u, 3u}) {
    variants.push_back({"empty", 256, 2, p, 0, ""});
    variants.push_back({"stream", 256, 2, p, 0, ""});
    for (unsigned ks : {256u, 128u, 64u}) variants.push_back({"planes", ks, 2, p, 0, ""});
    for (unsigned ks : {256u, 128u, 64u}) variants.push_back({"cslice", ks, 2, p, 0, ""});
    for (unsigned ks : {256u, 128u, 64u, 32u}) variants.push_back({"allcols", ks, 2, p, 0, ""});
  }
  std::printf("%-5s %3s %-7s %4s %5s %2s %6s %-24s %9s %9s %9s %9s\n", "prod", "N", "kernel", "KS", "radix", "P",
              "unroll", "options", "alone us", "bare us", "wall us", "max err");
  for (unsigned N : {8u, 16u})
    for (unsigned rt : {1u, 0u}) {
      std::vector<float> l(P * M * K), r(P * K * N), ref(P * M * N);
      for (float& v : l) v = dist(rng);
      for (float& v : r) v = dist(rng);
      for (unsigned p = 0; p < P; ++p)
        for (unsigned m = 0; m < M; ++m)
          for (unsigned n = 0; n < N; ++n) {
            const float* lp = &l[p * M * K];
            const float* rp = &r[p * K * N];
            double s = 0;
            for (unsigned k = 0; k < K; ++k) s += double(lp[m * K + k]) * (rt ? rp[n * K + k] : rp[k * N + n]);
            ref[p * M * N + m * N + n] = static_cast<float>(s);
          }
      cl_mem bl = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, l.size() * 4, l.data(), &err);
      cl_mem br = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, r.size() * 4, r.data(), &err);
      cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ref.size() * 4, nullptr, &err);
      for (const Variant& v : variants) {
        const std::string opts = "-DM=" + std::to_string(M) + "u -DK=" + std::to_string(K) + "u -DN=" +
                                 std::to_string(N) + "u -DRT=" + std::to_string(rt) + " -DKS=" + std::to_string(v.ks) +
                                 "u -DRADIX=" + std::to_string(v.radix) + "u -DNO_UNROLL=" + std::to_string(v.noUnroll) + " -DRPI=" + std::to_string(v.rpi) + "u" +
                                 " " + v.extra;
        const char* src = source.c_str();
        cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
        if (clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr) != CL_SUCCESS) {
          size_t len = 0;
          clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
          std::string log(len, ' ');
          clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, &log[0], nullptr);
          std::fprintf(stderr, "build %s (%s) failed:\n%s\n", v.kernel, opts.c_str(), log.c_str());
          clReleaseProgram(prog);
          if (*v.extra) continue;  // a vendor's option another device does not know
          return 1;
        }
        cl_kernel k = clCreateKernel(prog, v.kernel, &err);
        check(err, "kernel");
        clSetKernelArg(k, 0, sizeof(cl_mem), &bl);
        clSetKernelArg(k, 1, sizeof(cl_mem), &br);
        clSetKernelArg(k, 2, sizeof(cl_mem), &bc);
        const std::string kn = v.kernel;
        size_t local = v.ks, groups = M / 4 * (N / 4);
        if (kn == "cslice" || kn == "allcols") groups = M / 4;
        if (kn == "allcols" && N * v.ks * 16 > 48 * 1024) continue;  // the tree's planes exceed local memory
        else if (kn == "stream") local = 256, groups = (M * K / 4 + K * N / 4 + 255) / 256;
        else if (kn == "empty") local = 256, groups = 1;
        const size_t global2[2] = {groups * local, v.products}, local2[2] = {local, 1};
        std::vector<float> zero(ref.size(), 0.0f);
        clEnqueueWriteBuffer(q, bc, CL_TRUE, 0, zero.size() * 4, zero.data(), 0, nullptr, nullptr);
        const Timing t = timeKernel(q, k, global2, local2, runs, batch);
        std::vector<float> got(ref.size());
        clEnqueueReadBuffer(q, bc, CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr);
        double worst = 0;
        if (kn != "stream" && kn != "empty")
          for (size_t i = 0; i < v.products * M * N; ++i)
            worst = std::max(worst, std::fabs(got[i] - ref[i]) / (std::fabs(ref[i]) + 1.0));
        const std::string label = kn == "rows" ? kn + std::to_string(v.rpi) : kn;  // rows2: 2 row blocks an item
        std::printf("%-5s %3u %-7s %4u %5u %2u %6s %-24s %9.2f %9.2f %9.2f %9.2g%s\n", rt ? "xA^T" : "dyB", N,
                    label.c_str(), v.ks, v.radix, v.products, v.noUnroll ? "1" : "auto", v.extra, t.aloneUs, t.bareUs,
                    t.wallUs, worst, worst > 1e-4 ? "  WRONG" : "");
        std::fflush(stdout);
        clReleaseKernel(k);
        clReleaseProgram(prog);
      }
      clReleaseMemObject(bl);
      clReleaseMemObject(br);
      clReleaseMemObject(bc);
    }
  return 0;
}
