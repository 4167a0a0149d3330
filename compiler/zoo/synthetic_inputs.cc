#include "compiler/zoo/synthetic_inputs.h"

#include <algorithm>
#include <random>
#include <set>

namespace fbl::zoo {

namespace {

// Ops that move integer ids around without changing their meaning.
bool carriesIds(const std::string& op) {
  static const std::set<std::string> ops = {"Reshape", "Slice", "Pad", "Squeeze", "Unsqueeze",
                                            "Flatten", "Identity", "Transpose", "Expand",
                                            "Concat", "Cast", "Gather", "GatherElements"};
  return ops.count(op) > 0;
}

}  // namespace

int64_t integerInputBound(const ir::Graph& g, ir::ValueId input) {
  auto consumers = g.consumers();
  int64_t bound = -1;
  std::vector<ir::ValueId> work{input};
  std::set<ir::ValueId> seen{input};
  while (!work.empty()) {
    ir::ValueId v = work.back();
    work.pop_back();
    for (ir::NodeId nid : consumers[v]) {
      const ir::Node& n = g.nodes[nid];
      int64_t found = -1;
      if (n.op == "Gather" && n.input(1) == v) {
        const ir::Value& table = g.values[n.inputs[0]];
        int64_t rank = static_cast<int64_t>(table.shape.size());
        int64_t axis = n.attrInt("axis", 0);
        if (axis < 0) axis += rank;
        if (table.shapeKnown && axis >= 0 && axis < rank) found = table.shape[axis];
      } else if (n.op == "SoftmaxCrossEntropyLoss" && n.input(1) == v) {
        const ir::Value& scores = g.values[n.inputs[0]];
        if (scores.shapeKnown && scores.shape.size() >= 2) found = scores.shape[1];
      }
      if (found > 0) {
        bound = bound < 0 ? found : std::min(bound, found);
        continue;
      }
      // A Gather's data input carries ids only when v is the table, not the index.
      if (!carriesIds(n.op) || (n.op == "Gather" && n.input(0) != v)) continue;
      for (ir::ValueId out : n.outputs)
        if (out != ir::kNoValue && seen.insert(out).second) work.push_back(out);
    }
  }
  return bound > 0 ? bound : kDefaultIntegerBound;
}

Result<std::map<ir::ValueId, ir::Tensor>> syntheticInputs(const ir::Graph& g, uint64_t seed,
                                                          int64_t step) {
  std::map<ir::ValueId, ir::Tensor> out;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step));
  for (ir::ValueId id : g.inputs) {
    const ir::Value& v = g.values[id];
    if (!v.shapeKnown)
      return makeError("input '{}' has no static shape: give one with --shape {}=...", v.name, v.name);
    ir::Tensor t(v.dtype, v.shape);
    if (v.dtype == ir::DType::F32) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
    } else if (v.dtype == ir::DType::I64 || v.dtype == ir::DType::I32) {
      std::uniform_int_distribution<int64_t> pick(0, integerInputBound(g, id) - 1);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(pick(rng)));
    } else if (v.dtype == ir::DType::Bool) {
      std::uniform_int_distribution<int> pick(0, 1);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, pick(rng));
    } else {
      return makeError("input '{}': no synthetic data for dtype {}", v.name, ir::dtypeName(v.dtype));
    }
    out.emplace(id, std::move(t));
  }
  return out;
}

}  // namespace fbl::zoo
