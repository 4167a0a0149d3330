// decompose-ops: rewrites the ops that fold-and-infer left to run time and that have no kernel of
// their own into ops that do, whose kernels, layouts and gradient rules then serve them:
//   Tile(x, repeats)    -> Reshape (a 1 before each repeated axis), Expand (the repeats), Reshape
//   Clip(x, min?, max?) -> Max(x, min), then Min(., max); no bound: Identity
//   Resize(x, ...)      -> per resized axis, Gather (nearest) or Gather * (1 - w) + Gather * w
//                          (linear), from ops/resize_sampling.h; no resized axis: Identity
//   ReduceL2(x, axes?)  -> Sqrt(ReduceSum(x * x, axes?)), keepdims kept
//   Conv(x, w, b?), 1-D -> Unsqueeze(x), Unsqueeze(w), 2-D Conv of height 1, Squeeze (ops/conv_1d.h)
// Runs after fold-and-infer (it needs the static shapes and the constant repeats, scales and
// sizes), before drop-noops. The last node of each rewrite keeps the original's name and output.
#pragma once

#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

class DecomposeOps {
 public:
  static constexpr std::string_view name() { return "decompose-ops"; }
  // True when any node was rewritten.
  Result<bool> run(ir::Graph& g);
  int64_t rewritten() const { return rewritten_; }

 private:
  int64_t rewritten_ = 0;
};

}  // namespace fbl::passes
