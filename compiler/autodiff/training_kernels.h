// Reference kernels of fbl's backward and optimizer ops (semantics in training_ops.cc), split
// by area; ref::trainingKernels() joins the lists.
#pragma once

#include <vector>

#include "compiler/ref/kernel_tables.h"

namespace fbl::autodiff {

std::vector<ref::KernelEntry> gradKernels();               // training_kernels.cc
std::vector<ref::KernelEntry> convAndOptimizerKernels();   // training_kernels_conv.cc

}  // namespace fbl::autodiff
