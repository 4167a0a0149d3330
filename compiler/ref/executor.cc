#include "compiler/ref/executor.h"

#include <limits>

#include "compiler/ref/kernels.h"

namespace fbl::ref {

using ir::Graph;
using ir::kNoNode;
using ir::kNoValue;
using ir::NodeId;
using ir::Tensor;
using ir::ValueId;
using ir::ValueKind;

Executor::Executor(const Graph& g, ExecOptions opts) : g_(g), opts_(opts) {}

Status Executor::checkAgainstValue(ValueId id, const Tensor& t, std::string_view what) const {
  const ir::Value& v = g_.values[id];
  const std::string file = g_.sourcePath.empty() ? g_.name : g_.sourcePath;
  if (v.dtype != ir::DType::Undefined && v.dtype != t.dtype())
    return makeError("{}: {} '{}' is {}, the graph says {}", file, what, v.name,
                     ir::dtypeName(t.dtype()), ir::dtypeName(v.dtype));
  if (v.shapeKnown && v.shape != t.shape())
    return makeError("{}: {} '{}' has shape {}, the graph says {}", file, what, v.name,
                     ir::shapeToString(t.shape()), ir::shapeToString(v.shape));
  return Status::success();
}

Status Executor::setValue(ValueId id, Tensor t) {
  if (id < 0 || id >= static_cast<ValueId>(g_.values.size()))
    return makeError("setValue: no value with id {}", id);
  FBL_TRY(checkAgainstValue(id, t, "value set for"));
  overrides_[id] = std::make_shared<const Tensor>(std::move(t));
  return Status::success();
}

void Executor::clearValue(ValueId id) { overrides_.erase(id); }

Result<std::vector<Tensor>> Executor::run(const std::map<ValueId, Tensor>& feeds,
                                          const std::vector<ValueId>& fetchIn) {
  const std::string file = g_.sourcePath.empty() ? g_.name : g_.sourcePath;
  const std::vector<ValueId>& fetch = fetchIn.empty() ? g_.outputs : fetchIn;
  const size_t numValues = g_.values.size();
  for (ValueId f : fetch)
    if (f < 0 || f >= static_cast<ValueId>(numValues)) return makeError("{}: fetch of unknown value id {}", file, f);
  for (const auto& [id, t] : feeds) {
    if (id < 0 || id >= static_cast<ValueId>(numValues)) return makeError("{}: feed of unknown value id {}", file, id);
    FBL_TRY(checkAgainstValue(id, t, "input"));
  }
  auto isSource = [&](ValueId v) { return feeds.count(v) > 0 || overrides_.count(v) > 0; };

  // 1. The nodes the fetched values need, found by walking producers back from them.
  std::vector<bool> needNode(g_.nodes.size(), false), seen(numValues, false);
  std::vector<ValueId> stack(fetch.begin(), fetch.end());
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    if (v == kNoValue || seen[v]) continue;
    seen[v] = true;
    NodeId p = g_.values[v].producer;
    if (isSource(v) || p == kNoNode || p >= static_cast<NodeId>(g_.nodes.size()) || needNode[p] ||
        g_.nodes[p].dead)
      continue;
    needNode[p] = true;
    for (ValueId id : g_.nodes[p].inputs)
      if (id < kNoValue || id >= static_cast<ValueId>(numValues))
        return makeError("{}: input id {} is out of range", ir::describeNode(g_, g_.nodes[p]), id);
    for (ValueId id : g_.nodes[p].outputs)
      if (id < kNoValue || id >= static_cast<ValueId>(numValues))
        return makeError("{}: output id {} is out of range", ir::describeNode(g_, g_.nodes[p]), id);
    for (ValueId in : g_.nodes[p].inputs) stack.push_back(in);
  }

  // 3 (planned). Last needed node reading each value; fetched values are never freed.
  constexpr NodeId kKeep = std::numeric_limits<NodeId>::max();
  std::vector<NodeId> lastUse(numValues, -1);
  for (NodeId i = 0; i < static_cast<NodeId>(g_.nodes.size()); ++i)
    if (needNode[i])
      for (ValueId in : g_.nodes[i].inputs)
        if (in != kNoValue) lastUse[in] = i;
  for (ValueId f : fetch) lastUse[f] = kKeep;

  // 2. Contents: computed tensors live in `env`; sources are looked up on demand.
  std::vector<std::shared_ptr<const Tensor>> env(numValues);
  size_t liveBytes = 0;
  peakBytes_ = 0;
  auto lookup = [&](ValueId v) -> Result<const Tensor*> {
    if (auto it = feeds.find(v); it != feeds.end()) return &it->second;
    if (auto it = overrides_.find(v); it != overrides_.end()) return it->second.get();
    if (env[v]) return env[v].get();
    const ir::Value& val = g_.values[v];
    switch (val.kind) {
      case ValueKind::Input:
        return makeError("{}: input '{}' is not fed", file, val.name);
      case ValueKind::Initializer:
      case ValueKind::Constant:
        if (val.data) return val.data.get();
        return makeError("{}: {} '{}' has no data{}; load it or setValue() it", file,
                         val.kind == ValueKind::Initializer ? "initializer" : "constant", val.name,
                         val.external ? " (its external data file was absent at import)" : "");
      case ValueKind::Intermediate:
        if (val.producer == kNoNode) return makeError("{}: value '{}' has no producer", file, val.name);
        return makeError("{}: value '{}' is read before its producer ran (nodes out of order)", file,
                         val.name);
    }
    return makeError("{}: value '{}' has an unknown kind", file, val.name);
  };

  for (NodeId i = 0; i < static_cast<NodeId>(g_.nodes.size()); ++i) {
    if (!needNode[i]) continue;
    const ir::Node& n = g_.nodes[i];
    Inputs ins;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) {
        ins.push_back(nullptr);
        continue;
      }
      FBL_ASSIGN(const Tensor* t, lookup(in));
      ins.push_back(t);
    }
    FBL_ASSIGN(std::vector<Tensor> outs, evalNode(g_, n, ins));
    std::vector<const Tensor*> outPtrs(n.outputs.size(), nullptr);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId o = n.outputs[k];
      if (o == kNoValue) continue;
      if (opts_.checkInferredTypes)
        FBL_TRY(checkAgainstValue(o, outs[k], fmt::format("node '{}' ({}) output", n.name, n.op)));
      if (isSource(o) || lastUse[o] < i) continue;  // overridden, or nobody reads it
      liveBytes += outs[k].nbytes();
      env[o] = std::make_shared<const Tensor>(std::move(outs[k]));
      outPtrs[k] = env[o].get();
    }
    peakBytes_ = std::max(peakBytes_, liveBytes);
    if (callback_) FBL_TRY(callback_(n, outPtrs));
    for (ValueId in : n.inputs)
      if (in != kNoValue && lastUse[in] == i && env[in]) {
        liveBytes -= env[in]->nbytes();
        env[in].reset();
      }
  }

  std::vector<Tensor> result;
  for (ValueId f : fetch) {
    FBL_ASSIGN(const Tensor* t, lookup(f));
    result.push_back(*t);
  }
  return result;
}

Result<std::vector<Tensor>> runGraph(const Graph& g, const std::vector<Tensor>& inputs) {
  if (inputs.size() != g.inputs.size())
    return makeError("{}: {} inputs given, the graph has {}", g.sourcePath.empty() ? g.name : g.sourcePath,
                     inputs.size(), g.inputs.size());
  std::map<ValueId, Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) feeds.emplace(g.inputs[i], inputs[i]);
  Executor ex(g);
  return ex.run(feeds);
}

}  // namespace fbl::ref
