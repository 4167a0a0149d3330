#include "compiler/analysis/input_bounds.h"

#include <algorithm>
#include <set>
#include <utility>

namespace fbl::analysis {

namespace {

// Whether output values of `n` are copies of the elements of its input `slot` (step 1).
bool carriesIds(const ir::Node& n, size_t slot) {
  static const std::set<std::string> firstInput = {"Reshape", "Slice",     "Pad",       "Squeeze",
                                                   "Unsqueeze", "Flatten", "Identity",  "Transpose",
                                                   "Expand",  "Cast",      "Gather",    "GatherElements"};
  if (n.op == "Concat") return true;
  if (n.op == "Split") return slot == 0;  // every part holds input elements (a loss in chunks)
  if (n.op == "Where") return slot == 1 || slot == 2;
  return slot == 0 && firstInput.count(n.op) > 0;
}

// The extent of `v`'s dimension `axis` (negative counts from the end), or -1 when unknown.
int64_t extent(const ir::Value& v, int64_t axis) {
  const auto rank = static_cast<int64_t>(v.shape.size());
  if (axis < 0) axis += rank;
  if (!v.shapeKnown || axis < 0 || axis >= rank) return -1;
  return v.shape[axis];
}

}  // namespace

std::vector<InputBound> inputBounds(const ir::Graph& g, ir::ValueId input) {
  const auto consumers = g.consumers();
  std::vector<std::pair<ir::NodeId, InputBound>> found;
  std::vector<ir::ValueId> work{input};
  std::set<ir::ValueId> seen{input};
  while (!work.empty()) {
    const ir::ValueId v = work.back();
    work.pop_back();
    for (ir::NodeId nid : consumers[v]) {
      const ir::Node& n = g.nodes[nid];
      for (size_t slot = 0; slot < n.inputs.size(); ++slot) {
        if (n.inputs[slot] != v) continue;
        InputBound b;
        b.node = n.name;
        if ((n.op == "Gather" || n.op == "GatherElements") && slot == 1) {
          const int64_t extentN = extent(g.values[n.inputs[0]], n.attrInt("axis", 0));
          if (extentN < 0) continue;
          // An embedding (a 2-D parameter gathered along its rows) refuses a negative id as
          // PyTorch's does; ONNX would read from the end, a row the model never meant.
          const ir::Value& data = g.values[n.inputs[0]];
          const bool embedding = n.op == "Gather" && data.kind == ir::ValueKind::Initializer && data.shape.size() == 2 &&
                                 (n.attrInt("axis", 0) == 0 || n.attrInt("axis", 0) == -2);
          b.lo = embedding ? 0 : -extentN;
          b.hi = extentN;
          b.table = g.values[n.inputs[0]].name;
          found.emplace_back(nid, std::move(b));
        } else if (n.op == "SoftmaxCrossEntropyLoss" && slot == 1) {
          const int64_t classes = extent(g.values[n.inputs[0]], 1);
          if (classes < 0) continue;
          b.kind = InputBound::Kind::Label;
          b.hi = classes;
          if (n.hasAttr("ignore_index")) b.ignoreIndex = n.attrInt("ignore_index", 0);
          found.emplace_back(nid, std::move(b));
        } else if (carriesIds(n, slot)) {
          for (ir::ValueId out : n.outputs)
            if (out != ir::kNoValue && seen.insert(out).second) work.push_back(out);
        }
      }
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // One bound per range and table: a loss in chunks (passes/chunk_loss.h) has one consumer per
  // chunk, and the first names them.
  std::vector<InputBound> out;
  for (auto& [nid, b] : found) {
    const auto same = [&](const InputBound& o) { InputBound named = b; named.node = o.node; return named == o; };
    if (std::none_of(out.begin(), out.end(), same)) out.push_back(std::move(b));
  }
  return out;
}

std::vector<planfile::InputCheck> inputChecks(const ir::Graph& g, ir::ValueId v, int32_t tensor,
                                              const std::vector<InputBound>& also) {
  std::vector<planfile::InputCheck> out;
  const ir::DType dt = g.values[v].dtype;
  if (ir::isFloat(dt) || dt == ir::DType::Bool) return out;
  std::vector<InputBound> bounds = also;
  for (InputBound& b : inputBounds(g, v)) bounds.push_back(std::move(b));
  for (const InputBound& b : bounds) {
    planfile::InputCheck c;
    c.input = tensor;
    c.kind = b.kind == InputBound::Kind::Index ? "index" : "label";
    c.lo = b.lo;
    c.hi = b.hi;
    c.hasIgnore = b.ignoreIndex.has_value();
    c.ignoreIndex = b.ignoreIndex.value_or(0);
    c.node = b.node;
    c.table = b.table;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fbl::analysis
