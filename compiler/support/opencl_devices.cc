#include "compiler/support/opencl_devices.h"

#include "runtime/opencl_devices.h"

namespace fbl {

Error clError(const char* what, cl_int code) {
  return makeError("OpenCL: {} failed (error {})", what, code);
}

std::string clDeviceString(cl_device_id d, cl_device_info what) { return rt::clDeviceString(d, what); }

Result<std::vector<ClDevice>> listClDevices() {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0)
    return makeError("OpenCL: no platform found (is an ICD such as pocl-opencl-icd installed?)");
  std::vector<ClDevice> out;
  for (const rt::ClDeviceEntry& e : rt::enumerateClDevices())
    out.push_back({e.platform, e.device, e.platformName + " / " + rt::clDeviceString(e.device, CL_DEVICE_NAME)});
  if (out.empty()) return makeError("OpenCL: no device found");
  return out;
}

}  // namespace fbl
