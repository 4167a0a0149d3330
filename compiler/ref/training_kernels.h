// Reference kernels of fbl's backward and optimizer ops (semantics in
// ops/training_schemas.cc and ops/attention.h), split by area; trainingKernels() joins the lists.
#pragma once

#include <string_view>
#include <vector>

#include "compiler/ref/kernel_tables.h"

namespace fbl::ref {

// Shared by the kernel files: an error naming the node, and the f32 check of its first inputs.
Error kernelError(const ir::Node& n, std::string_view msg);
Status requireF32(const ir::Node& n, const Inputs& in, size_t count);

std::vector<KernelEntry> gradKernels();               // training_kernels.cc
std::vector<KernelEntry> convAndOptimizerKernels();   // training_kernels_conv.cc
std::vector<KernelEntry> attentionKernels();          // attention_kernels.cc

}  // namespace fbl::ref
