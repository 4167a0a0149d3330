// pack-saved: the algorithm is in pack_saved.h (steps 1-3).
#include "compiler/passes/pack_saved.h"

#include <algorithm>
#include <set>

#include "compiler/ir/graph_edit.h"

namespace fbl::passes {

Result<ir::DType> parsePrecision(const std::string& text) {
  if (text == "fp32") return ir::DType::F32;
  if (text == "fp16") return ir::DType::F16;
  if (text == "bf16") return ir::DType::BF16;
  return makeError("--precision '{}' is not fp32, fp16 or bf16", text);
}

namespace {

// A row's statistic: a keepdims reduction's [..., 1] (RMSNorm's mean square and its rsqrt), a
// LayerNormalization's mean and inverse deviation, fbl.Attention's log-sum-exp rows.
bool rowStatistic(const ir::Graph& g, ir::ValueId v) {
  const ir::Value& val = g.values[v];
  if (!val.shape.empty() && val.shape.back() == 1) return true;
  const ir::Node& p = g.nodes[val.producer];
  return (p.op == "fbl.Attention" || p.op == "LayerNormalization") && p.outputs[0] != v;
}

// A backward reader for which rounding the value costs more than its own precision:
//  - fbl.AttentionGrad recomputes exp(q k^T - lse) from q and k (an error in a score of 10 is a
//    relative error of the probability), fbl.LayerNormGrad recomputes (x - mean) / deviation
//    from x (a value far from its mean loses its normalized value's low bits);
//  - a comparison with another computed value (a max pool's Equal(tap, max), Max and Min's
//    masks): two values that round alike would tie, and the gradient would go to both.
//    Comparing with a constant (ReLU's x > 0) keeps its sign, so it may read a rounded value.
bool rereadExactly(const ir::Graph& g, const ir::Node& n, size_t slot) {
  if (n.op == "fbl.AttentionGrad") return slot == 1 || slot == 2;
  if (n.op == "fbl.LayerNormGrad") return slot == 1;
  static const std::set<std::string> compares = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Max", "Min"};
  if (!compares.count(n.op)) return false;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (k == slot || n.inputs[k] == ir::kNoValue) continue;
    const ir::Value& other = g.values[n.inputs[k]];
    if (other.kind != ir::ValueKind::Constant && other.data == nullptr) return true;
  }
  return false;
}

}  // namespace

Result<bool> PackSaved::run(ir::Graph& g) {
  packed_ = bytes_ = 0;
  if (format == ir::DType::F32) return false;
  const std::set<ir::ValueId> keep(keep_.begin(), keep_.end());
  const std::vector<std::vector<ir::NodeId>> consumers = g.consumers();
  // Activations: values computed from a graph input. What only weights determine (a frozen
  // weight's transpose, a LoRA factor's) is not saved by the forward pass but read as it is.
  std::vector<bool> fromInput(g.values.size(), false);
  for (ir::ValueId v : g.inputs) fromInput[v] = true;
  for (const ir::Node& n : g.nodes) {
    if (n.dead) continue;
    const bool any = std::any_of(n.inputs.begin(), n.inputs.end(),
                                 [&](ir::ValueId v) { return v != ir::kNoValue && fromInput[v]; });
    for (ir::ValueId o : n.outputs)
      if (o != ir::kNoValue) fromInput[o] = any;
  }
  ir::NodeInserter insert(g);
  std::vector<ir::ValueId> unpacked;  // each unpacking Cast's output: a backward node
  const int32_t onnxFormat = static_cast<int32_t>(format), onnxF32 = static_cast<int32_t>(ir::DType::F32);
  const auto count = static_cast<ir::ValueId>(g.values.size());  // the Casts' values come after
  for (ir::ValueId v = 0; v < count; ++v) {
    const ir::Value& val = g.values[v];
    if (val.producer == ir::kNoNode || g.nodes[val.producer].dead || g.nodes[val.producer].phase != ir::Phase::Forward ||
        !fromInput[v] || val.dtype != ir::DType::F32 || !val.shapeKnown || ir::numElements(val.shape) <= 1 ||
        keep.count(v) || rowStatistic(g, v))
      continue;
    std::vector<ir::NodeId> backward;
    for (ir::NodeId c : consumers[v])
      if (!g.nodes[c].dead && g.nodes[c].phase == ir::Phase::Backward) backward.push_back(c);
    if (backward.empty()) continue;
    const bool exact = std::any_of(backward.begin(), backward.end(), [&](ir::NodeId c) {
      const ir::Node& n = g.nodes[c];
      for (size_t slot = 0; slot < n.inputs.size(); ++slot)
        if (n.inputs[slot] == v && rereadExactly(g, n, slot)) return true;
      return false;
    });
    if (exact) continue;
    const ir::NodeId first = *std::min_element(backward.begin(), backward.end());
    // Copies: adding values moves g.values.
    const std::string name = val.name;
    const ir::Shape shape = val.shape;
    const ir::NodeId producer = val.producer;
    const ir::ValueId packed = insert.one(producer + 1, "Cast", {v}, name + ".packed", format, shape,
                                          {{"to", int64_t{onnxFormat}}});
    const ir::ValueId back = insert.one(first, "Cast", {packed}, name + ".unpacked", ir::DType::F32, shape,
                                        {{"to", int64_t{onnxF32}}});
    for (ir::NodeId c : backward)
      for (ir::ValueId& in : g.nodes[c].inputs)
        if (in == v) in = back;
    unpacked.push_back(back);
    ++packed_;
    bytes_ += ir::numElements(shape) * 4;
  }
  if (packed_ == 0) return false;
  insert.finish();
  for (ir::ValueId u : unpacked) g.nodes[g.values[u].producer].phase = ir::Phase::Backward;
  return true;
}

}  // namespace fbl::passes
