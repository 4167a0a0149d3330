#include "compiler/support/opencl_devices.h"

namespace fbl {

Error clError(const char* what, cl_int code) {
  return makeError("OpenCL: {} failed (error {})", what, code);
}

std::string clDeviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

Result<std::vector<ClDevice>> listClDevices() {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0)
    return makeError("OpenCL: no platform found (is an ICD such as pocl-opencl-icd installed?)");
  std::vector<cl_platform_id> platforms(np);
  FBL_CL(clGetPlatformIDs(np, platforms.data(), nullptr), "clGetPlatformIDs");
  std::vector<ClDevice> out;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ds(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr);
    size_t n = 0;
    clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n);
    std::string pname(n, '\0');
    clGetPlatformInfo(p, CL_PLATFORM_NAME, n, pname.data(), nullptr);
    while (!pname.empty() && pname.back() == '\0') pname.pop_back();
    for (cl_device_id d : ds) out.push_back({p, d, pname + " / " + clDeviceString(d, CL_DEVICE_NAME)});
  }
  if (out.empty()) return makeError("OpenCL: no device found");
  return out;
}

}  // namespace fbl
