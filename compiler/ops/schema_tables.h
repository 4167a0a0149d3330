// The schema table is assembled from per-area lists, so each area owns its own file.
#pragma once

#include <vector>

#include "compiler/ops/op_schema.h"

namespace fbl::ops {

std::vector<OpSchema> onnxSchemas();      // compiler/ops/: the ONNX ops the corpus uses
std::vector<OpSchema> trainingSchemas();  // training_schemas.cc: fbl's backward and optimizer ops

}  // namespace fbl::ops
