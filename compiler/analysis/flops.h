// Modeled FLOPs of one graph node: the arithmetic its kernel does, counted from the op and the
// shapes, never measured. `fblc explain` shows it per launch. The model, by op:
//   1. MatMul / Gemm: 2 * |output| * K (Gemm adds |output| for its C operand).
//   2. Conv and its two gradients: 2 * |Y or dY| * |W| / W[0] (one multiply-add per weight
//      element a filter applies to each output element).
//   3. Movement and data ops (Reshape, Transpose, Slice, Gather, Concat, Cast, ...): 0.
//   4. Reductions: one per input element; Softmax, normalisations, losses and optimizer updates:
//      a fixed count per element (kPerElement in flops.cc says which and why).
//   5. Everything else is elementwise: one per output element.
#pragma once

#include <cstdint>

#include "compiler/ir/graph.h"

namespace fbl::analysis {

// Shapes must be known (after shape inference); an unknown shape counts as zero elements.
int64_t nodeFlops(const ir::Graph& g, const ir::Node& n);

}  // namespace fbl::analysis
