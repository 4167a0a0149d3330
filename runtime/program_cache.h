// Built OpenCL programs cached on disk: PoCL's first build of a plan takes seconds, a phone
// driver's longer. The key hashes the platform, device, driver version, build options and source,
// so a driver update or a changed plan misses the cache instead of loading a stale binary.
#pragma once

#include <string>

#include "runtime/status.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

namespace fbl::rt {

struct BuiltProgram {
  cl_program program = nullptr;
  bool fromCache = false;
};

// `cacheDir` empty: no caching. A failed build's error holds the kernel at fault and the build
// log, over several lines.
Result<BuiltProgram> buildProgram(cl_context ctx, cl_device_id dev, const std::string& source,
                                  const std::string& options, const std::string& cacheDir);

// The default cache directory: $FBL_CACHE_DIR, else $XDG_CACHE_HOME/fbl, else $HOME/.cache/fbl.
std::string defaultCacheDir();

// False when the environment switches the cache off for the whole process (FBL_PROGRAM_CACHE=0),
// whatever directory a caller names; true when it is unset or 1; any other value is refused.
Result<bool> programCacheEnabled();

}  // namespace fbl::rt
