// The reference-kernel table is assembled from per-area lists, so each area owns its own file.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ref/kernels.h"

namespace fbl::ref {

using KernelEntry = std::pair<std::string_view, EvalFn>;

std::vector<KernelEntry> onnxKernels();      // compiler/ref/: ONNX ops
std::vector<KernelEntry> trainingKernels();  // training_kernels.cc: fbl's backward/optimizer ops

}  // namespace fbl::ref
