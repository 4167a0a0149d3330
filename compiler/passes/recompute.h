// recompute: on the joint graph after autodiff, the forward segments that the backward pass
// recomputes instead of keeping their activations (the algorithm: autodiff/recompute.h).
// `count` segments, -1 all; 0 recomputes none and only counts the candidates, which
// --memory-budget's search reads. A loss that chunk-loss splits keeps its segment: the forward
// pass takes its gradient (chunk_loss.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "compiler/autodiff/recompute.h"
#include "compiler/ir/graph.h"
#include "compiler/passes/chunk_loss.h"
#include "compiler/support/result.h"

namespace fbl::passes {

class Recompute {
 public:
  explicit Recompute(const ChunkLoss& chunks) : chunks_(chunks) {}
  static constexpr std::string_view name() { return "recompute"; }
  Result<bool> run(ir::Graph& g);

  int64_t count = 0;
  autodiff::RecomputeSummary summary;

 private:
  const ChunkLoss& chunks_;
};

}  // namespace fbl::passes
