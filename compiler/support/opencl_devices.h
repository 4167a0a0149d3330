// The host-side compiler's view of the local OpenCL devices (fblc profile, fbl-bench), over the
// runtime's enumeration (runtime/opencl_devices.h): `--device N` means the same device in every
// tool and in the runtime.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>
#include <vector>

#include "compiler/support/result.h"

namespace fbl {

struct ClDevice {
  cl_platform_id platform;
  cl_device_id device;
  std::string label;  // "platform / device"
};

// Every device of every platform, platforms in the order the ICD loader lists them.
Result<std::vector<ClDevice>> listClDevices();
// A string device property without its trailing NULs and blanks.
std::string clDeviceString(cl_device_id d, cl_device_info what);
Error clError(const char* what, cl_int code);

}  // namespace fbl

// Returns clError(what, code) from the enclosing function when `call` fails.
#define FBL_CL(call, what)                                                         \
  do {                                                                             \
    cl_int fbl_cl_err_ = (call);                                                   \
    if (fbl_cl_err_ != CL_SUCCESS) return ::fbl::clError(what, fbl_cl_err_);       \
  } while (0)
