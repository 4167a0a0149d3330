// Synthetic training batches for a graph's inputs, so that a model trains without a data set
// (`fbl-train` without --data): float inputs are standard-normal (images, audio features,
// latents), integer inputs are uniform in [0, bound) where the bound is the smallest of the
// input's analysis::inputBounds (the rows of the table it indexes through Gather, the class
// count of the SoftmaxCrossEntropyLoss it labels; the plan records the same bounds). An integer
// input with neither (a diffusion timestep) gets kDefaultIntegerBound. Every draw comes from one fixed-seed generator.
#pragma once

#include <cstdint>
#include <map>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::zoo {

inline constexpr int64_t kDefaultIntegerBound = 1000;

// The exclusive upper bound of integer input `input` (see above).
int64_t integerInputBound(const ir::Graph& g, ir::ValueId input);

// One batch for every graph input of `g` (shapes must be static: a loaded graph); batch `step`
// of the sequence for `seed` (the same seed and step give the same batch).
Result<std::map<ir::ValueId, ir::Tensor>> syntheticInputs(const ir::Graph& g, uint64_t seed,
                                                          int64_t step = 0);

}  // namespace fbl::zoo
