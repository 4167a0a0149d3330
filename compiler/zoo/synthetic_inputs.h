// Synthetic training batches for a graph's inputs: runtime/synthetic_inputs.h's generator (the
// one fbl-train runs on a plan without --data), with each integer input's bound read from the
// graph: the smallest of its analysis::inputBounds (the rows of the table it indexes through
// Gather, the class count of the SoftmaxCrossEntropyLoss it labels), which the plan records as
// its input_checks; an integer input with neither (a diffusion timestep) gets
// rt::kDefaultIntegerBound. A plan and its graph give the same batch.
#pragma once

#include <cstdint>
#include <map>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"
#include "runtime/synthetic_inputs.h"

namespace fbl::zoo {

// The exclusive upper bound of integer input `input` (see above).
int64_t integerInputBound(const ir::Graph& g, ir::ValueId input);

// One batch for every graph input of `g` (shapes must be static: a loaded graph); batch `step`
// of the sequence for `seed` (the same seed and step give the same batch).
Result<std::map<ir::ValueId, ir::Tensor>> syntheticInputs(const ir::Graph& g, uint64_t seed,
                                                          int64_t step = 0);

}  // namespace fbl::zoo
