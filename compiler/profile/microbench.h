// Measures a HardwareProfile on a local OpenCL device (`fblc profile`).
//
//  1. Query what the driver reports: name, compute units, image2d limits, RGBA texel formats,
//     cache line and cache sizes, and the wave size (CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE
//     of the benchmark kernel). CPU devices read L1/L2 sizes from sysfs.
//  2. Texture cache block C_h x C_w: on GPUs, one work-item makes a chain of dependent reads with
//     growing horizontal and vertical texel strides; the latency per read stops growing at the
//     block's width/height (no clear knee: one cache line of one row, marked estimated). CPU
//     devices store image2d rows linearly, so there C_h = 1 and C_w = cache line / texel.
//  3. Figure 4: for 1, 2, 4 ... 64 threads in one work-group, each thread streams its own
//     64-texel-wide bands in row, column, block-4 and block-8 order; throughput = bytes read
//     over the fastest of `reps` runs (after one warm-up).
//  4. Bandwidth: every compute unit reads the whole image, neighbouring work-items reading
//     neighbouring texels. Peak compute: chains of float4 mad.
// Fields it cannot measure (a GPU's L1 texture cache) come from `base` when given, otherwise
// they are marked estimated.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::profile {

struct MeasureOptions {
  int device = 0;  // index over all platforms' devices, in `clinfo -l` order
  int reps = 5;    // timed runs per configuration (the fastest is kept)
  std::string name;                        // profile name (the output file's stem)
  std::optional<HardwareProfile> base;     // public facts to keep where nothing is measured
  std::function<void(const std::string&)> log;  // progress lines; may be empty
};

Result<HardwareProfile> measureProfile(const MeasureOptions& opts);

// "N: platform / device" lines for every OpenCL device, for error messages and --list.
Result<std::vector<std::string>> listDevices();

}  // namespace fbl::profile
