// Times split_lab.cl's tilings of the MLP's narrow products (x A^T, dy B with B stored
// transposed: [512 x 8192] x [8192 x r]) against two floors: a launch that streams the same
// bytes, and an empty launch. Each is timed alone (min of RUNS single launches, each waited for)
// and queued (50 launches back to back, events on the first and the last, as a step queues them;
// a tiling with planes is two launches, the product's and sum_planes', timed as a pair),
// then zeroed, run once more and checked against a double-precision loop: that last run shows
// that the split tilings' counters reset themselves.
// Lab code, not product code. Build: g++ -O2 -std=c++17 split_lab.cc -lOpenCL -o split_lab
// Run:   ./split_lab split_lab.cl [device index [runs]]
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
  unsigned tr, tc, cpi, ks, g;
  unsigned planes = 0;  // with g > 1: chunks' sums to planes, added by a second launch (sum_planes)
};

double span(cl_event a, cl_event b) {
  cl_ulong t0 = 0, t1 = 0;
  clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, sizeof(t0), &t0, nullptr);
  clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof(t1), &t1, nullptr);
  return static_cast<double>(t1 - t0) * 1e-3;
}

void run(cl_command_queue q, cl_kernel k, size_t global, size_t local, cl_event* ev) {
  check(clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, ev), "enqueue");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: split_lab KERNELS.cl [device [runs]]\n"), 2;
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string source = ss.str();
  const int want = argc > 2 ? std::atoi(argv[2]) : 0;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 20, batch = runs < 5 ? 5 : 50;
  const unsigned M = argc > 4 ? std::atoi(argv[4]) : 512, K = argc > 5 ? std::atoi(argv[5]) : 8192;

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
  std::printf("device %d: %s; M %u, K %u\n", want, name, M, K);
  cl_int err;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  check(err, "context");
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  check(err, "queue");

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::printf("%3s %-6s %4s %3s %4s %4s %3s %6s %6s %9s %9s %9s\n", "N", "kernel", "TR", "TC", "CPI", "KS", "G", "groups", "sum",
              "alone us", "queued us", "max err");
  for (unsigned N : {8u, 16u}) {
    const unsigned NT = N / 4;
    std::vector<Tiling> tilings = {{"empty", 4, 1, 1, 256, 1}, {"stream", 4, 1, 1, 256, 1},
                                   {"split", 4, 1, 1, 256, 1},  // the plans' 4x4/256
                                   {"split", 4, NT, 1, 256 / NT, 1}, {"split", 4, NT, NT == 2 ? 2u : 2u, 128, 1}};
    for (unsigned tr : {8u, 16u, 32u, 64u})
      for (unsigned cpi : {1u, 2u})
        for (unsigned groups : {128u, 256u, 512u}) {
          const unsigned wg = 256, ks = wg / (tr / 4) / (NT / cpi), tiles = M / tr, g = groups / tiles;
          if (ks < 4 || g < 2 || (K / 4) % (g * ks) != 0) continue;
          tilings.push_back({"split", tr, NT, cpi, ks, g});
          tilings.push_back({"split", tr, NT, cpi, ks, g, 1});
        }
    std::vector<float> l(M * K), r(N * K), ref(M * N);
    for (float& v : l) v = dist(rng);
    for (float& v : r) v = dist(rng);
    for (unsigned m = 0; m < M; ++m)
      for (unsigned n = 0; n < N; ++n) {
        double s = 0;
        for (unsigned k = 0; k < K; ++k) s += double(l[m * K + k]) * r[n * K + k];
        ref[m * N + n] = static_cast<float>(s);
      }
    cl_mem bl = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, l.size() * 4, l.data(), &err);
    cl_mem br = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, r.size() * 4, r.data(), &err);
    cl_mem bc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, ref.size() * 4, nullptr, &err);
    cl_mem bs = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64u * M * N * 4, nullptr, &err);
    std::vector<unsigned> zeros(1024, 0);
    cl_mem bn = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, zeros.size() * 4, zeros.data(), &err);
    for (const Tiling& t : tilings) {
      const std::string kn = t.kernel;
      const unsigned wg = (t.tr / 4) * (t.tc / t.cpi) * t.ks;
      size_t local = wg, groups = (M / t.tr) * (NT / t.tc) * t.g;
      if (kn == "stream") local = 256, groups = (M * K / 4 + K * N / 4 + 255) / 256;
      else if (kn == "empty") local = 256, groups = 1;
      const std::string opts = "-DM=" + std::to_string(M) + "u -DK=" + std::to_string(K) + "u -DN=" + std::to_string(N) +
                               "u -DTR=" + std::to_string(t.tr) + "u -DTC=" + std::to_string(t.tc) + "u -DCPI=" +
                               std::to_string(t.cpi) + "u -DKS=" + std::to_string(t.ks) + "u -DG=" + std::to_string(t.g) +
                               " -DPLANES=" + std::to_string(t.planes);
      const char* src = source.c_str();
      cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
      if (clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr) != CL_SUCCESS) {
        size_t len = 0;
        clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
        std::string log(len, ' ');
        clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, &log[0], nullptr);
        std::fprintf(stderr, "build %s (%s) failed:\n%s\n", t.kernel, opts.c_str(), log.c_str());
        return 1;
      }
      cl_kernel k = clCreateKernel(prog, t.kernel, &err), sum = nullptr;
      check(err, "kernel");
      if (t.planes) sum = clCreateKernel(prog, "sum_planes", &err), check(err, "sum_planes");
      for (cl_kernel x : {k, sum})
        for (cl_uint a = 0; x && a < 5; ++a)
          clSetKernelArg(x, a, sizeof(cl_mem), a == 0 ? &bl : a == 1 ? &br : a == 2 ? &bc : a == 3 ? &bs : &bn);
      const size_t sumLocal = 64, sumGlobal = (M * NT + sumLocal - 1) / sumLocal * sumLocal;
      // The product's launches, and the sum's; events on the first and the last of them.
      auto product = [&](cl_event* first, cl_event* last) {
        run(q, k, groups * local, local, first);
        if (sum) run(q, sum, sumGlobal, sumLocal, last);
        else if (last) clRetainEvent(*last = *first);
      };
      double alone = 1e30, queued = 1e30;
      for (int i = -1; i < runs; ++i) {
        cl_event a, b;
        product(&a, &b);
        clWaitForEvents(1, &b);
        if (i >= 0) alone = std::min(alone, span(a, b));
        clReleaseEvent(a);
        clReleaseEvent(b);
      }
      for (int rep = 0; rep < 3; ++rep) {
        cl_event first = nullptr, last = nullptr, unused = nullptr;
        for (int b = 0; b < batch; ++b) {
          product(b == 0 ? &first : &unused, b == batch - 1 ? &last : nullptr);
          if (b > 0) clReleaseEvent(unused);
        }
        clWaitForEvents(1, &last);
        queued = std::min(queued, span(first, last) / batch);
        clReleaseEvent(first);
        clReleaseEvent(last);
      }
      std::vector<float> got(ref.size(), 0.0f);
      clEnqueueWriteBuffer(q, bc, CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr);
      product(nullptr, nullptr);
      clEnqueueReadBuffer(q, bc, CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr);
      double worst = 0;
      if (kn == "split")
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - ref[i]) / (std::fabs(ref[i]) + 1.0));
      std::printf("%3u %-6s %4u %3u %4u %4u %3u %6zu %6s %9.2f %9.2f %9.2g%s\n", N, t.kernel, t.tr, t.tc, t.cpi, t.ks, t.g, groups,
                  t.planes ? "planes" : t.g > 1 ? "last" : "-", alone, queued, worst, worst > 1e-4 ? "  WRONG" : "");
      std::fflush(stdout);
      clReleaseKernel(k);
      if (sum) clReleaseKernel(sum);
      clReleaseProgram(prog);
    }
    for (cl_mem b : {bl, br, bc, bs, bn}) clReleaseMemObject(b);
  }
  return 0;
}
