// Recomputation: the backward pass computes a forward segment's activations again instead of
// keeping them from the forward pass, so they live only while that segment's gradients are
// computed (activation checkpointing, as PyTorch's torch.utils.checkpoint per layer and MeBP).
//
// On the joint training graph (training_graph.h), in forward order:
//  1. An activation is a value with both a graph input and an initializer among its ancestors.
//     Other values (masks from the inputs alone, rotary tables and weight views from the
//     initializers alone) are always kept: they are small, or views the lowering reads in place.
//  2. A cut is a point in the forward order where at most one activation computed before it is
//     read after it: a transformer's residual stream between sublayers. Activations read across
//     a quarter of the forward or more (an encoder output every decoder layer attends to, a
//     UNet's skip connections) are kept and do not count. The cuts
//     split the forward into segments; the last segment (the head and the loss) is never
//     recomputed, since its backward runs first, and neither is a segment that computes one of
//     the `kept` values (a loss in chunks, passes/chunk_loss.h, whose gradient the forward
//     pass takes chunk by chunk).
//  3. A recomputed segment keeps only its input (the value at the cut before it). The nodes
//     that compute what the backward reads of it are cloned, in order, as backward nodes placed
//     right before the first backward node that reads any of those values, and the backward
//     reads the clones.
// The clones are the same ops on the same inputs, so gradients are the same (bit for bit where
// the lowering emits the same kernels); dropout in training mode is refused by autodiff, so no
// op here is random.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace fbl::autodiff {

// A segment of the forward pass between two cuts.
struct RecomputeSegment {
  ir::NodeId first = ir::kNoNode, last = ir::kNoNode;  // forward nodes, inclusive
  int64_t savedBytes = 0;  // bytes of the values the backward reads of it, beside its cut value
  int64_t nodes = 0;       // forward nodes cloned to recompute them
};

// The segments a recompute could choose from, in forward order (the loss segment, and those
// that compute a `kept` value, excluded).
std::vector<RecomputeSegment> recomputeSegments(const ir::Graph& g, const std::vector<ir::ValueId>& kept = {});

struct RecomputeSummary {
  int64_t candidates = 0;   // the segments it could have recomputed (recomputeSegments)
  int64_t segments = 0;     // recomputed
  int64_t clonedNodes = 0;
  int64_t savedBytes = 0;   // no longer kept from the forward pass
};

// Recomputes the `count` segments with the most saved bytes (ties: the earlier one); all of
// them when count < 0. The graph's nodes stay in topological order, and Value::reusedByBackward
// follows the backward's new reads.
RecomputeSummary recompute(ir::Graph& g, int64_t count, const std::vector<ir::ValueId>& kept = {});

}  // namespace fbl::autodiff
