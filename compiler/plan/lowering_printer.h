// What each lowering pass (layout_lowering.h) decided, as text: the dumps `--dump-after
// lower-layouts|fusion|assign-storage` print after the IR (which those passes never change).
// One line per node or value the pass touched, in id order, after a summary line.
#pragma once

#include <string>

#include "compiler/plan/layout_lowering.h"

namespace fbl::plan {

// lower-layouts (steps 1-3): movement ops that run nothing, operands read through a composed map
// (transposed, signed), and chains materialised by one copy before their consumer.
std::string formatLoweredReads(const ir::Graph& g, const LayoutLowering& l);
// fusion (step 5's plan): MatMul epilogues and their fused nodes, deferred MatMuls and the node
// that emits them, producers inlined into elementwise and reduction kernels.
std::string formatFusion(const ir::Graph& g, const LayoutLowering& l);
// assign-storage (step 4, step 6): every value not stored row-major in the arena (its layout and
// note), why a strategy layout was not used, values that live only inside a fused kernel, and
// movement ops run as transform kernels.
std::string formatStorage(const ir::Graph& g, const LayoutLowering& l);

}  // namespace fbl::plan
