// How a generated kernel source becomes one part of a plan's OpenCL program (plan_builder.cc,
// step 3): text in, text out, so tests/plan/kernel_source_rewrite_test.cc checks each rewrite on
// a small source against its expected text.
#pragma once

#include <string>

namespace fbl::plan {

// Kernels take a pool and a byte offset per tensor instead of one buffer per tensor: every
// `__global T* name` parameter becomes `__global uchar* fbl_pK, ulong fbl_oK` and a pointer
// `name` into the pool. The arena is allocated as pools no larger than the device's largest
// allocation (Plan::poolBytes), and tensors share pools because their lifetimes do not overlap.
// Overlapping sub-buffers (one per tensor over a reused pool) crashed NVIDIA's OpenCL driver
// when released, and phone drivers restrict them too. Image parameters stay as they are, in
// their place: the runtime binds the tensor's image object there.
std::string poolParams(std::string src);

// Kernel sources are written to stand alone, but a plan concatenates them into one program:
// each source's macros are #undef'd after it, and its helper functions and __constant samplers
// get the kernel's name as a prefix, so two instantiations of one template do not collide.
// Helpers are lines `[inline] [static] inline TYPE NAME (` and `[inline] [static] __constant
// sampler_t NAME =`; identifiers are maximal runs of [A-Za-z0-9_], as the preprocessor sees them.
std::string scopeToKernel(std::string src, const std::string& base);

// `s` without its leading `//` comment lines (the template's header comment).
std::string stripLeadingComments(const std::string& s);

// The three above in the plan's order, with {{NAME}} replaced by `base` before scoping.
std::string planKernelSource(const std::string& source, const std::string& base);

}  // namespace fbl::plan
