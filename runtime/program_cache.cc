// Program building with an on-disk cache:
//  1. key = FNV-1a of platform, device, driver and OpenCL versions, build options and source;
//  2. a cached binary is loaded and built (cheap); any failure falls back to the source;
//  3. a source build that fails returns the kernel(s) named in the build log and the log;
//  4. a successful source build stores the binary atomically (temporary file + rename).
#include "runtime/program_cache.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sys/stat.h>
#include <vector>

#include "runtime/files.h"
#include "runtime/plan_file.h"
#include "runtime/safetensors.h"

namespace fbl::rt {

namespace {

std::string deviceString(cl_device_id dev, cl_device_info what) {
  size_t n = 0;
  clGetDeviceInfo(dev, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(dev, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string cacheKey(cl_device_id dev, const std::string& source, const std::string& options) {
  cl_platform_id platform = nullptr;
  clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr);
  size_t n = 0;
  clGetPlatformInfo(platform, CL_PLATFORM_VERSION, 0, nullptr, &n);
  std::string pv(n, '\0');
  clGetPlatformInfo(platform, CL_PLATFORM_VERSION, n, pv.data(), nullptr);
  std::string id = pv + "|" + deviceString(dev, CL_DEVICE_NAME) + "|" +
                   deviceString(dev, CL_DRIVER_VERSION) + "|" + deviceString(dev, CL_DEVICE_VERSION) +
                   "|" + options + "|";
  uint64_t h = planfile::fnv1a64(id.data(), id.size());
  h = planfile::fnv1a64(source.data(), source.size(), h);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void makeDirs(const std::string& dir) {
  for (size_t p = 1; p <= dir.size(); ++p)
    if (p == dir.size() || dir[p] == '/') mkdir(dir.substr(0, p).c_str(), 0755);
}

std::string buildLog(cl_program prog, cl_device_id dev) {
  size_t n = 0;
  clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The kernels whose lines the log blames ("<source>:LINE:COL: error"), printed whole.
std::string blamedKernels(const std::string& source, const std::string& log) {
  std::vector<size_t> lineStart{0};
  for (size_t i = 0; i < source.size(); ++i)
    if (source[i] == '\n') lineStart.push_back(i + 1);
  std::set<size_t> starts;
  for (size_t p = 0; (p = log.find(":", p)) != std::string::npos; ++p) {
    size_t q = p + 1;
    size_t line = 0;
    while (q < log.size() && isdigit(static_cast<unsigned char>(log[q]))) line = line * 10 + (log[q++] - '0');
    if (q == p + 1 || q >= log.size() || log[q] != ':' || line == 0 || line > lineStart.size()) continue;
    const size_t at = lineStart[line - 1];
    const size_t k = source.rfind("__kernel", at);
    if (k != std::string::npos) starts.insert(k);
  }
  std::string out;
  for (size_t k : starts) {
    const size_t end = source.find("\n}\n", k);
    out += source.substr(k, end == std::string::npos ? std::string::npos : end + 2 - k) + "\n";
  }
  return out;
}

cl_program tryCached(cl_context ctx, cl_device_id dev, const std::string& path, const std::string& options) {
  const Result<std::string> read = readWholeFile(path, "a program binary");
  if (!read.ok() || read->empty()) return nullptr;
  const std::string& bin = *read;
  const auto* p = reinterpret_cast<const unsigned char*>(bin.data());
  const size_t n = bin.size();
  cl_int st = CL_SUCCESS, binSt = CL_SUCCESS;
  cl_program prog = clCreateProgramWithBinary(ctx, 1, &dev, &n, &p, &binSt, &st);
  if (st != CL_SUCCESS || binSt != CL_SUCCESS) return nullptr;
  if (clBuildProgram(prog, 1, &dev, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(prog);
    return nullptr;
  }
  return prog;
}

void store(cl_program prog, const std::string& dir, const std::string& path) {
  size_t n = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, nullptr) != CL_SUCCESS || n == 0) return;
  std::string bin(n, '\0');
  unsigned char* p = reinterpret_cast<unsigned char*>(bin.data());
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof p, &p, nullptr) != CL_SUCCESS) return;
  makeDirs(dir);
  (void)safetensors::writeFileAtomic(path, bin);  // best effort: a failed store only costs a rebuild
}

}  // namespace

std::string defaultCacheDir() {
  if (const char* d = std::getenv("FBL_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/fbl";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/fbl";
  return "";
}

Result<bool> programCacheEnabled() {
  const char* v = std::getenv("FBL_PROGRAM_CACHE");
  if (!v || std::string(v) == "1") return true;
  if (std::string(v) == "0") return false;
  return Error{"FBL_PROGRAM_CACHE is '" + std::string(v) +
               "': 0 switches the runtime's program cache off, 1 or unset keeps it on"};
}

Result<BuiltProgram> buildProgram(cl_context ctx, cl_device_id dev, const std::string& source,
                                  const std::string& options, const std::string& cacheDir) {
  const std::string path = cacheDir.empty() ? "" : cacheDir + "/" + cacheKey(dev, source, options) + ".clbin";
  if (!path.empty()) {
    if (cl_program p = tryCached(ctx, dev, path, options)) return BuiltProgram{p, true};
  }
  const char* src = source.c_str();
  const size_t len = source.size();
  cl_int st = CL_SUCCESS;
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, &len, &st);
  if (st != CL_SUCCESS) return Error{"clCreateProgramWithSource failed (" + std::to_string(st) + ")"};
  if (clBuildProgram(prog, 1, &dev, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    const std::string log = buildLog(prog, dev);
    clReleaseProgram(prog);
    return Error{"OpenCL build failed.\n--- kernel ---\n" + blamedKernels(source, log) + "--- build log ---\n" + log};
  }
  if (!path.empty()) store(prog, cacheDir, path);
  return BuiltProgram{prog, false};
}

}  // namespace fbl::rt
