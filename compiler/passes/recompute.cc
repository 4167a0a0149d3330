#include "compiler/passes/recompute.h"

#include <vector>

namespace fbl::passes {

Result<bool> Recompute::run(ir::Graph& g) {
  std::vector<ir::ValueId> kept;
  for (const ChunkLoss::Chunked& c : chunks_.chunked()) kept.insert(kept.end(), c.wide.begin(), c.wide.end());
  if (count == 0) {
    summary.candidates = static_cast<int64_t>(autodiff::recomputeSegments(g, kept).size());
    return false;
  }
  summary = autodiff::recompute(g, count, kept);
  return summary.segments > 0;
}

}  // namespace fbl::passes
