// drop-noops:
//   1. Walk the live nodes in topological order. A node is a no-op when it is Identity, a
//      Cast/CastLike whose output dtype equals its input's, or a Dropout that is the identity
//      (training_mode absent or constant false, or ratio constant 0).
//   2. A no-op's output is mapped to its input's final replacement (the map is filled in
//      topological order, so chains of no-ops resolve in one step) and the node is marked dead.
//      Dropout's mask output, if anything reads it, becomes a constant all-true tensor.
//   3. A no-op whose output is a graph output stays, so the output keeps its name.
//   4. One sweep rewrites every node input through the map: O(nodes + values) in all.
#include "compiler/passes/drop_noops.h"

#include <memory>
#include <numeric>

namespace fbl::passes {

namespace {

// The scalar contents of an optional input, when known at compile time.
const ir::Tensor* knownScalar(const ir::Graph& g, const ir::Node& n, size_t i) {
  ir::ValueId v = n.input(i);
  if (v == ir::kNoValue) return nullptr;
  const ir::Tensor* t = g.values[v].data.get();
  return t != nullptr && t->numel() == 1 ? t : nullptr;
}

bool dropoutIsIdentity(const ir::Graph& g, const ir::Node& n) {
  bool noTraining = n.input(2) == ir::kNoValue;
  if (const ir::Tensor* t = knownScalar(g, n, 2)) noTraining = t->at(0) == 0;
  // An absent ratio means 0.5.
  const ir::Tensor* ratio = knownScalar(g, n, 1);
  bool zeroRatio = ratio != nullptr && ratio->at(0) == 0;
  return noTraining || zeroRatio;
}

bool isNoop(const ir::Graph& g, const ir::Node& n) {
  if (n.outputs.empty() || n.outputs[0] == ir::kNoValue || n.inputs.empty() ||
      n.inputs[0] == ir::kNoValue)
    return false;
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  if (n.op == "Identity") return true;
  if (n.op == "Cast" || n.op == "CastLike")
    return in.dtype != ir::DType::Undefined && in.dtype == out.dtype;
  if (n.op == "Dropout") return dropoutIsIdentity(g, n);
  return false;
}

}  // namespace

Result<bool> DropNoops::run(ir::Graph& g) {
  dropped_ = 0;
  std::vector<bool> isGraphOutput(g.values.size(), false);
  for (ir::ValueId v : g.outputs) isGraphOutput[v] = true;
  for (const ir::StateUpdate& u : g.stateUpdates) isGraphOutput[u.updated] = true;
  std::vector<bool> read(g.values.size(), false);
  for (const auto& n : g.nodes)
    if (!n.dead)
      for (ir::ValueId v : n.inputs)
        if (v != ir::kNoValue) read[v] = true;

  std::vector<ir::ValueId> repl(g.values.size());
  std::iota(repl.begin(), repl.end(), 0);
  for (auto& n : g.nodes) {
    if (n.dead) continue;
    for (auto& v : n.inputs)
      if (v != ir::kNoValue) v = repl[v];
    if (!isNoop(g, n) || isGraphOutput[n.outputs[0]]) continue;
    if (n.op == "Dropout" && n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue) {
      ir::Value& mask = g.values[n.outputs[1]];
      if (isGraphOutput[n.outputs[1]] || (read[n.outputs[1]] && !mask.shapeKnown)) continue;
      if (read[n.outputs[1]]) {
        ir::Tensor ones(ir::DType::Bool, mask.shape);
        for (int64_t i = 0; i < ones.numel(); ++i) ones.set(i, 1);
        mask.kind = ir::ValueKind::Constant;
        mask.data = std::make_shared<const ir::Tensor>(std::move(ones));
        mask.producer = ir::kNoNode;
      }
    }
    repl[n.outputs[0]] = n.inputs[0];
    n.dead = true;
    ++dropped_;
  }
  return dropped_ > 0;
}

}  // namespace fbl::passes
