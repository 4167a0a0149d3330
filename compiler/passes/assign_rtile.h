// assign-rtile (paper Sec. 4.2 wired into the graph; Table 2's first phase, the anchors): one
// R-Tile per tensor that an FTD-D operator reads tile by tile, chosen over all of the tensor's
// consuming reductions by Eq. 2 (layout::selectRTile).
//
//   1. Anchors: the source value of every tile-read operand (MatMul/Gemm inputs, directly or
//      through a ReadThrough's chain, so a weight read as W^T anchors W itself).
//   2. Uses: every reduction that reads an anchor, directly or through a view (MatMul/Gemm
//      operands, ReduceMean/ReduceSum/fbl.ReduceSumTo, Softmax and its gradient, the loss, norms).
//      The consumer's reduction axis is followed through the view to the anchor's own dims:
//      landing in its last dim is a walk along rows, in the one before along columns; anywhere
//      else it is not a tile reduction of this tensor and is skipped. Weight: the consumer's
//      modeled FLOPs (reductionWeight), so Eq. 2 sums work, not consumer counts.
//   3. selectRTile on the anchor's 2D view, memoized by (extent, uses): the 16 layers of a model
//      share a handful of problems. A tensor with no surviving candidate keeps its linear layout,
//      and the reason is recorded (the paper's explicit fallback).
#pragma once

#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// The modeled work of a reducing consumer (2 * M * N * K for a product, the elements read
// otherwise): the weight of its use in Eq. 2.
double reductionWeight(const ir::Graph& g, const ir::Node& n, int slot);
// Where a consumer's axis lands in the source's dims through a view: the single source
// coordinate that uses it, or -1.
int landingDim(const layout::IndexMap& view, int64_t axis);

// The RTileChoice for one given tile shape (reconfiguration and the greedy search build these
// for candidates other than the Eq. 2 winner): its geometry, inter-tile order, padding and cost.
layout::RTileChoice choiceForTile(const std::string& tensor, const layout::TensorExtent& e,
                                  const std::vector<layout::ReductionUse>& uses, int64_t tileH, int64_t tileW,
                                  const profile::HardwareProfile& p);
// The tile shapes that survived C1-C3 for a choice, best Eq. 2 score first.
std::vector<layout::TileConfig> survivingTiles(const layout::RTileChoice& c,
                                               const std::vector<layout::ReductionUse>& uses,
                                               const profile::HardwareProfile& p);

// Steps 1 and 2 for every value: the first FTD-D node that reads it tile by tile (kNoNode: not
// an anchor, or not a float tensor of known shape) and its reductions, weights normalised to
// the heaviest. By ValueId.
struct TileUses {
  ir::NodeId firstTileReader = ir::kNoNode;
  std::vector<layout::ReductionUse> uses;
};
std::vector<TileUses> tileUses(const ir::Graph& g, const LayoutAssignment& a);

class AssignRTile {
 public:
  AssignRTile(LayoutAssignment& a, const profile::HardwareProfile& p) : a_(a), profile_(p) {}
  static constexpr std::string_view name() { return "assign-rtile"; }
  Result<bool> run(ir::Graph& g);
  std::string dump(const ir::Graph& g) const;
  int64_t problemsSolved() const { return solved_; }

 private:
  LayoutAssignment& a_;
  const profile::HardwareProfile& profile_;
  int64_t solved_ = 0;
};

}  // namespace fbl::passes
