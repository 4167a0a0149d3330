// Reference kernels of fbl's backward and optimizer ops (semantics in training_ops.cc), split
// by area; ref::trainingKernels() joins the lists.
#pragma once

#include <string_view>
#include <vector>

#include "compiler/ref/kernel_tables.h"

namespace fbl::autodiff {

// Shared by the kernel files: an error naming the node, and the f32 check of its first inputs.
Error kernelError(const ir::Node& n, std::string_view msg);
Status requireF32(const ir::Node& n, const ref::Inputs& in, size_t count);

std::vector<ref::KernelEntry> gradKernels();               // training_kernels.cc
std::vector<ref::KernelEntry> convAndOptimizerKernels();   // training_kernels_conv.cc

}  // namespace fbl::autodiff
