// classify-operators (paper Sec. 4.1, Table 1) and the graph analysis the later layout passes
// share: which consumer inputs are fed by chains of movement ops, and through which composed
// index map.
//
//   1. Class every live node of the joint graph by its op type (ops::opClass, ops/op_traits.h):
//        FTI-C  no forward tensor in its gradient, same access both ways (Add, Sub, Neg, and a
//               Mul/Div by a compile-time constant: the paper's "Scale"), optimizer updates
//        FTD-C  gradient reads forward tensors, same access (activations, Softmax, Mul of two
//               activations, Div, Pow, Sqrt, ...)
//        FTI-D  transformations (Transpose, Reshape, Unsqueeze, Expand, Slice, Concat, ...)
//        FTD-D  reductions whose backward reduces along another axis (MatMul, Gemm, Conv,
//               norms, and the reductions the exporters decompose norms into: ReduceMean, ...)
//      Backward and optimizer nodes get the class of their own op.
//   2. Walk the live nodes in topological order. A foldable transformation (one data input, an
//      index map from its output to its input: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
//      Expand, Slice with positive steps) gets view = compose(view(input), own map), memoized
//      by (source shape, op chain) so repeated layers cost one simplification each.
//   3. A roll join -- Concat of two slabs of one tensor, or Add of two complementary
//      fbl.SliceGrad slabs (its backward mirror), each optionally negated -- is the rotate-half
//      of RoPE: one view (j + s) % D with a +-1 sign per slab; its Slice/Neg/SliceGrad nodes are
//      absorbed into it.
//   4. Every other live node's data input produced by a folded node becomes a ReadThrough
//      (consumer, slot, source, chain, view); graph outputs stop folding (they are
//      materialised).
#pragma once

#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/layout/movement.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// The class of a node in its graph (the Scale refinement of Mul/Div applied).
OpClass classifyNode(const ir::Graph& g, const ir::Node& n);
// The movement op a transformation node performs, when it is one index map of its input 0.
Result<layout::MovementOp> movementOpOf(const ir::Graph& g, const ir::Node& n);

class ClassifyOperators {
 public:
  explicit ClassifyOperators(LayoutAssignment& a) : a_(a) {}
  static constexpr std::string_view name() { return "classify-operators"; }
  // Never changes the IR; true when any node was classified.
  Result<bool> run(ir::Graph& g);
  std::string dump(const ir::Graph& g) const;

 private:
  LayoutAssignment& a_;
};

}  // namespace fbl::passes
