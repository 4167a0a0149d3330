#include "compiler/passes/differentiate.h"

#include <algorithm>
#include <set>

#include "compiler/passes/load_model.h"

namespace fbl::passes {

namespace {

// Step 4: the host's side of the joint graph.
void hostInterfaceOf(const autodiff::TrainingGraph& tg, HostInterface& host) {
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(tg.graph.values.size()); ++v)
    if (tg.graph.values[v].kind == ir::ValueKind::Initializer) host.hostValues.push_back(v);
  for (const auto& t : tg.trainables) host.inPlaceUpdates.emplace_back(t.param, t.updated);
  for (const auto& s : tg.state) host.inPlaceUpdates.emplace_back(s.current, s.updated);
}

}  // namespace

Result<bool> Differentiate::run(ir::Graph& g) {
  FBL_TRY(checkStaticShapes(g));
  // 1. The frozen base's encodings, on the forward graph.
  FBL_ASSIGN(encodings, quant::encodingsFor(g, opts_.trainableGlobs, baseWeights, &encodingsSkipped));
  FBL_ASSIGN(tg, autodiff::buildTrainingGraph(g, opts_));
  for (const auto& [name, e] : encodings)
    if (const ir::ValueId v = tg.graph.findValue(name); v != ir::kNoValue) host_.encodings[v] = e;
  // 2. peft's adapter, on the forward graph.
  std::vector<std::string> names;
  for (const auto& t : tg.trainables) names.push_back(tg.graph.values[t.param].name);
  FBL_ASSIGN(adapter, autodiff::peftAdapter(g, names, adapterOpts));
  // 3. What must be computed.
  mustExist_ = valuesThatMustExist(tg);
  if (keepOutputs) {
    FBL_ASSIGN(outputs, modelOutputs(tg.graph));
    mustExist_.insert(mustExist_.end(), outputs.begin(), outputs.end());
  }
  hostInterfaceOf(tg, host_);
  g = std::move(tg.graph);  // the pipeline's graph; the driver puts it back
  return true;
}

std::vector<ir::ValueId> valuesThatMustExist(const autodiff::TrainingGraph& tg) {
  std::vector<ir::ValueId> v{tg.loss};
  for (const auto& t : tg.trainables) v.insert(v.end(), {t.grad, t.updated});
  for (const auto& s : tg.state) v.push_back(s.updated);
  std::erase(v, ir::kNoValue);
  return v;
}

Result<std::vector<ir::ValueId>> modelOutputs(const ir::Graph& g) {
  static const std::set<std::string> movement = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice",
                                                 "Identity", "Transpose", "Cast"};
  std::vector<ir::ValueId> out;
  for (const ir::Node& n : g.nodes) {
    if (n.dead || n.phase != ir::Phase::Forward || n.op != "SoftmaxCrossEntropyLoss") continue;
    ir::ValueId v = n.inputs[0];
    // Back through the reshape to [tokens, classes] and a causal LM's shift to what computed it.
    for (ir::NodeId p = g.values[v].producer; p != ir::kNoNode && movement.count(g.nodes[p].op) && !g.nodes[p].inputs.empty();
         p = g.values[v].producer)
      v = g.nodes[p].inputs[0];
    if (g.values[v].producer == ir::kNoNode)
      return makeError("--outputs: the scores of loss node '{}' are not computed by the model", n.name);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty())
    return makeError("--outputs: the model's loss is not a cross-entropy (SoftmaxCrossEntropyLoss), whose scores "
                     "would be its outputs");
  return out;
}

}  // namespace fbl::passes
