// Kernels of 2-D (and unit-height 1-D) convolution with any group count, and of its two
// gradients fbl.ConvGradInput / fbl.ConvGradWeight (compiler/ops/training_schemas.cc).
#pragma once

#include <vector>

#include "compiler/codegen/emit_util.h"

namespace fbl::codegen {

// "Conv", "fbl.ConvGradInput", "fbl.ConvGradWeight"; registered through trainingEmitters().
std::vector<EmitterEntry> convEmitters();

}  // namespace fbl::codegen
