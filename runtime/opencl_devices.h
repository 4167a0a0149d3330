// The local OpenCL devices in one numbering: every device of every platform, platforms in the
// order the ICD loader lists them. `--device N` means the same device in the runtime
// (fbl_open, fbl-train), `fblc profile` and fbl-bench, which all enumerate through this.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>
#include <vector>

namespace fbl::rt {

struct ClDeviceEntry {
  cl_platform_id platform;
  cl_device_id device;
  std::string platformName;
};

// Empty when there is no platform or no device.
std::vector<ClDeviceEntry> enumerateClDevices();
// A string device property without its trailing NULs and blanks.
std::string clDeviceString(cl_device_id d, cl_device_info what);

}  // namespace fbl::rt
