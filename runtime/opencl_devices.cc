#include "runtime/opencl_devices.h"

namespace fbl::rt {

std::string clDeviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, &s[0], nullptr);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<ClDeviceEntry> enumerateClDevices() {
  std::vector<ClDeviceEntry> out;
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return out;
  std::vector<cl_platform_id> platforms(np);
  if (clGetPlatformIDs(np, platforms.data(), nullptr) != CL_SUCCESS) return out;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devices(nd);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr) != CL_SUCCESS) continue;
    size_t n = 0;
    clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, nullptr, &n);
    std::string name(n, '\0');
    clGetPlatformInfo(p, CL_PLATFORM_NAME, n, &name[0], nullptr);
    while (!name.empty() && name.back() == '\0') name.pop_back();
    for (cl_device_id d : devices) out.push_back({p, d, name});
  }
  return out;
}

}  // namespace fbl::rt
