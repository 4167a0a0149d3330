// tile-index-elimination (paper Sec. 4.3; Table 2's "Index Elim" cells): decides, for every
// read through a chain of movement ops (ReadThrough, found by classify-operators), whether the
// consumer reads the source directly through the composed map -- no intermediate kernel, no
// intermediate buffer -- or needs an explicit conversion.
//
//   1. For a source with an R-Tile T, run the paper's three checks (layout::checkTilePropagation:
//      R-Tile dimension dependency, tile boundary preservation, intra-tile continuity) on the
//      read's composed view with T. A MatMul/Gemm operand that fails is checked again on the
//      transposed view (the chain ends by swapping the two tiled dims, as W^T or K^T do): the
//      product reads the operand's transpose tile by tile (R-Tile's point: one tile serves both
//      reduction directions).
//      Results are memoized by (view, tile): identical layers cost one check.
//   2. If a tile-by-tile reader fails, try the source's other surviving R-Tile configurations
//      (best Eq. 2 score first) and keep the one under which the most tile readers pass
//      (the paper's "alternative R-Tile configuration"); the choice is re-costed and marked
//      reconfigured.
//   3. Decide each read with the final tile: the checks pass -> a tile map (Eq. 3, the composed
//      f3 . f2 . f1 at tile granularity); they fail for a tile-by-tile reader -> explicit, with
//      the failing check as the reason; they fail for an elementwise reader, or the source is
//      linear -> an element index map (still no kernel and no buffer: the reader's own kernel
//      computes the address).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "compiler/ir/graph.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// The view through which a consumer reads the transpose of its operand (last two dims swapped).
Result<layout::IndexMap> transposedView(const layout::IndexMap& view);

// Step 1 for one read and one tile, memoized by (view, tile, product reader).
class TileReadChecker {
 public:
  struct Verdict {
    bool ok = false;
    bool transposed = false;
    layout::TileCheckResult result;  // of the plain view when both fail
  };
  explicit TileReadChecker(const ir::Graph& g) : g_(g) {}
  const Verdict& check(const ReadThrough& r, layout::TileConfig t);
  int64_t checksRun() const { return checks_; }

 private:
  const ir::Graph& g_;
  int64_t checks_ = 0;
  std::unordered_map<std::string, Verdict> memo_;
};

// Step 3 for one read, with its source's current tile.
void decideRead(ReadThrough& r, const LayoutAssignment& a, TileReadChecker& checker);

class TileIndexElimination {
 public:
  TileIndexElimination(LayoutAssignment& a, const profile::HardwareProfile& p) : a_(a), profile_(p) {}
  static constexpr std::string_view name() { return "tile-index-elimination"; }
  Result<bool> run(ir::Graph& g);
  std::string dump(const ir::Graph& g) const;
  int64_t checksRun() const { return checks_; }

 private:
  LayoutAssignment& a_;
  const profile::HardwareProfile& profile_;
  int64_t checks_ = 0;
};

}  // namespace fbl::passes
