#include "bench/cache_patterns.h"

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "bench/strategy_run.h"

namespace fbl::bench {

namespace {

const char* kPatternSource = R"CL(
__constant sampler_t kNearest = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

// Thread t owns columns [t * width, (t + 1) * width) of rows [0, rows).
__kernel void pattern_row(__read_only image2d_t img, __global float* out, int width, int rows, int unused) {
  const int t = get_global_id(0), x0 = t * width;
  float4 s = (float4)(0.0f);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < width; ++x) s += read_imagef(img, kNearest, (int2)(x0 + x, y));
  out[t] = s.x + s.y + s.z + s.w;
}

__kernel void pattern_column(__read_only image2d_t img, __global float* out, int width, int rows, int unused) {
  const int t = get_global_id(0), x0 = t * width;
  float4 s = (float4)(0.0f);
  for (int x = 0; x < width; ++x)
    for (int y = 0; y < rows; ++y) s += read_imagef(img, kNearest, (int2)(x0 + x, y));
  out[t] = s.x + s.y + s.z + s.w;
}

// `block` texels of one row, then the same columns of the next row; then the next columns.
__kernel void pattern_block(__read_only image2d_t img, __global float* out, int width, int rows, int block) {
  const int t = get_global_id(0), x0 = t * width;
  float4 s = (float4)(0.0f);
  for (int xb = 0; xb < width; xb += block)
    for (int y = 0; y < rows; ++y)
      for (int i = 0; i < block; ++i) s += read_imagef(img, kNearest, (int2)(x0 + xb + i, y));
  out[t] = s.x + s.y + s.z + s.w;
}
)CL";

struct Pattern {
  const char* name;  // as the profiles' access_table and the issue name them
  const char* kernel;
  int block;
};
const Pattern kPatterns[] = {{"column", "pattern_column", 0},
                             {"row", "pattern_row", 0},
                             {"block4", "pattern_block", 4},
                             {"block8", "pattern_block", 8}};

Error clErr(const char* what, cl_int e) { return Error{fmt::format("OpenCL: {} failed (error {})", what, e)}; }

struct Cl {
  cl_context ctx = nullptr;
  cl_command_queue q = nullptr;
  cl_program prog = nullptr;
  std::map<std::string, cl_kernel> kernels;
  ~Cl() {
    for (auto& [n, k] : kernels) clReleaseKernel(k);
    if (prog) clReleaseProgram(prog);
    if (q) clReleaseCommandQueue(q);
    if (ctx) clReleaseContext(ctx);
  }
};

Status openCl(Cl* cl) {
  cl_platform_id platform;
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || n == 0) return Error{"OpenCL: no platform (Oclgrind's ICD not found)"};
  cl_device_id dev;
  if (cl_int e = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, nullptr); e != CL_SUCCESS) return clErr("clGetDeviceIDs", e);
  cl_int e = CL_SUCCESS;
  cl->ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &e);
  if (e != CL_SUCCESS) return clErr("clCreateContext", e);
  cl->q = clCreateCommandQueue(cl->ctx, dev, 0, &e);
  if (e != CL_SUCCESS) return clErr("clCreateCommandQueue", e);
  cl->prog = clCreateProgramWithSource(cl->ctx, 1, &kPatternSource, nullptr, &e);
  if (e != CL_SUCCESS) return clErr("clCreateProgramWithSource", e);
  if (e = clBuildProgram(cl->prog, 1, &dev, "-cl-std=CL1.2", nullptr, nullptr); e != CL_SUCCESS) return clErr("clBuildProgram", e);
  for (const Pattern& p : kPatterns)
    if (!cl->kernels.count(p.kernel)) {
      cl->kernels[p.kernel] = clCreateKernel(cl->prog, p.kernel, &e);
      if (e != CL_SUCCESS) return clErr(p.kernel, e);
    }
  return Status::success();
}

// One configuration: a fresh image of T bands, one work-group of T threads.
Status runOne(Cl& cl, const Pattern& p, int threads, int rows) {
  const size_t width = static_cast<size_t>(threads) * kPatternBandTexels, height = static_cast<size_t>(rows);
  std::vector<float> texels(width * height * 4);
  for (size_t i = 0; i < texels.size(); ++i) texels[i] = static_cast<float>(i % 7) * 0.125f;
  cl_image_format f{CL_RGBA, CL_FLOAT};
  cl_image_desc d{};
  d.image_type = CL_MEM_OBJECT_IMAGE2D;
  d.image_width = width;
  d.image_height = height;
  cl_int e = CL_SUCCESS;
  cl_mem img = clCreateImage(cl.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, &f, &d, texels.data(), &e);
  if (e != CL_SUCCESS) return clErr("clCreateImage", e);
  cl_mem out = clCreateBuffer(cl.ctx, CL_MEM_WRITE_ONLY, sizeof(float) * threads, nullptr, &e);
  if (e != CL_SUCCESS) {
    clReleaseMemObject(img);
    return clErr("clCreateBuffer", e);
  }
  cl_kernel k = cl.kernels.at(p.kernel);
  const cl_int w = kPatternBandTexels, r = rows, b = p.block;
  e = clSetKernelArg(k, 0, sizeof img, &img);
  e |= clSetKernelArg(k, 1, sizeof out, &out);
  e |= clSetKernelArg(k, 2, sizeof w, &w);
  e |= clSetKernelArg(k, 3, sizeof r, &r);
  e |= clSetKernelArg(k, 4, sizeof b, &b);
  const size_t g = static_cast<size_t>(threads);
  if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(cl.q, k, 1, nullptr, &g, &g, 0, nullptr, nullptr);
  if (e == CL_SUCCESS) e = clFinish(cl.q);
  clReleaseMemObject(out);
  clReleaseMemObject(img);
  if (e != CL_SUCCESS) return clErr(p.kernel, e);
  return Status::success();
}

// Throughput over column-major's at the same thread count: every pattern reads the same bytes
// there, so it is the inverse ratio of the estimated times.
nlohmann::json relativeThroughput(const std::vector<SimulatedRun>& runs) {
  std::map<int, double> columnMs;
  for (const SimulatedRun& r : runs)
    if (r.strategy == "column") columnMs[r.threads] = r.estimatedMs;
  nlohmann::json rel = nlohmann::json::object();
  for (const SimulatedRun& r : runs)
    rel[r.strategy][std::to_string(r.threads)] = r.estimatedMs > 0 ? columnMs[r.threads] / r.estimatedMs : 0.0;
  return rel;
}

}  // namespace

Status simulatePatterns(const CacheBenchOptions& o, OclgrindDevice& device, ProfileRuns* all, nlohmann::json* report) {
  std::vector<int> threads = o.threads;
  if (threads.empty())
    for (int t = 1; t <= 64; t *= 2) threads.push_back(t);
  for (int t : threads)
    if (t < 1 || t > 256) return Error{fmt::format("--threads {}: must be 1..256", t)};
  if (o.rows < 1) return Error{"--rows must be positive"};
  // The kernels do not depend on the profile: one execution serves every profile.
  std::vector<size_t> every(all->models.size());
  for (size_t p = 0; p < every.size(); ++p) every[p] = p;
  FBL_TRY(device.setModels(all->models));
  Cl cl;
  FBL_TRY(openCl(&cl));
  if (auto r = device.take(); !r.ok()) return r.error();
  for (const Pattern& p : kPatterns)
    for (int t : threads) {
      all->begin(every, p.name, t);
      if (Status e = runOne(cl, p, t, o.rows); !e.ok()) return Error{fmt::format("{} x{}: {}", p.name, t, e.error().message)};
      auto recs = device.take();
      if (!recs.ok()) return recs.error();
      if (recs->size() != 1) return Error{fmt::format("{} x{}: the simulator saw {} launches, not 1", p.name, t, recs->size())};
      all->add(every, {"", "compute", p.name, (*recs)[0].kernel, {}, 0, {}}, (*recs)[0].counters);
    }
  nlohmann::json rel = nlohmann::json::object();
  for (size_t p = 0; p < all->models.size(); ++p) rel[all->models[p].profile] = relativeThroughput(all->runs[p]);
  (*report)["relative_throughput"] = all->models.size() == 1 ? rel.begin().value() : rel;
  (*report)["band_texels"] = kPatternBandTexels;
  (*report)["rows"] = o.rows;
  return Status::success();
}

std::string patternsSvg(const std::string& title, const std::vector<SimulatedRun>& runs) {
  std::map<std::string, std::vector<std::pair<int, double>>> lines;
  std::map<int, double> columnMs;
  for (const SimulatedRun& r : runs)
    if (r.strategy == "column") columnMs[r.threads] = r.estimatedMs;
  double top = 1.0;
  int maxT = 1;
  for (const SimulatedRun& r : runs) {
    const double v = r.estimatedMs > 0 ? columnMs[r.threads] / r.estimatedMs : 0.0;
    lines[r.strategy].push_back({r.threads, v});
    top = std::max(top, v);
    maxT = std::max(maxT, r.threads);
  }
  const double x0 = 60, y0 = 260, pw = 420, ph = 220;
  auto xOf = [&](int t) { return x0 + pw * std::log2(static_cast<double>(t)) / std::max(1.0, std::log2(static_cast<double>(maxT))); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"320\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"10\" y=\"18\" font-size=\"13\">{}</text>\n<text x=\"{}\" y=\"300\">threads</text>\n",
      xmlEscape(title), x0 + pw / 2);
  for (double t : {0.0, 1.0, top}) {
    const double y = y0 - ph * t / top;
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ccc\"/><text x=\"8\" y=\"{:.1f}\">{:.2f}x</text>\n",
                     x0, x0 + pw, y, y, y + 4, t);
  }
  for (const auto& [t, ms] : columnMs)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", xOf(t), y0 + 16, t);
  const char* colours[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52"};
  int i = 0;
  for (const auto& [name, pts] : lines) {
    std::string path;
    for (const auto& [t, v] : pts) path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", xOf(t), y0 - ph * v / top);
    s += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", path, colours[i % 4]);
    s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", x0 + pw + 10, 60 + 16 * i, colours[i % 4], name);
    ++i;
  }
  return s + "</svg>\n";
}

}  // namespace fbl::bench
