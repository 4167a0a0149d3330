// fold-and-infer, one walk over the nodes in topological order:
//   1. Check the node against its schema and run its shape rule (ops::inferNode does both);
//      every input already has a static shape, because its producer came earlier.
//   2. The node folds when every present input is a compile-time constant (a Constant value,
//      or an Initializer the options call foldable) -- or, for Shape, when its input's shape
//      is known -- and its outputs stay under maxFoldBytes. Dropout never folds (drop-noops
//      removes the inference-mode ones).
//   3. Folding evaluates the node with its reference kernel (Shape is computed from the static
//      shape directly, as its input has no data) and turns each output value, in place, into a
//      Constant holding the result; the node is marked dead. In place, so no use is rewired
//      and names survive.
//   4. The rules of later nodes see the folded contents (InferContext::constIn), so a whole
//      chain (Shape -> Gather -> Concat -> Reshape target) folds in the same walk.
//   5. A folded value equal (dtype, shape, bytes) to an earlier constant is replaced by it:
//      exporters rebuild the same RoPE table and shape vectors in every layer. Uses are
//      rewritten through a replacement map as the walk reaches each node, so this stays one
//      pass over the graph; graph outputs keep their own values.
// Unused constants are left to dead-code.
#include "compiler/passes/fold_and_infer.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_map>
#include <memory>

#include <fmt/format.h>

#include "compiler/ops/op_schema.h"
#include "compiler/ref/kernels.h"

namespace fbl::passes {

namespace {

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Shape(x) with x's static shape: shape[start:end] under ONNX's clamping.
ir::Tensor shapeOf(const ir::Node& n, const ir::Shape& s) {
  int64_t rank = static_cast<int64_t>(s.size());
  auto clampEnd = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  int64_t start = clampEnd(n.attrInt("start", 0));
  int64_t end = std::max(start, clampEnd(n.attrInt("end", rank)));
  std::vector<int64_t> dims(s.begin() + start, s.begin() + end);
  return ir::Tensor::fromVector<int64_t>({static_cast<int64_t>(dims.size())}, dims);
}

int64_t outputBytes(const ir::Graph& g, const ir::Node& n) {
  int64_t total = 0;
  for (ir::ValueId o : n.outputs) {
    if (o == ir::kNoValue) continue;
    const ir::Value& v = g.values[o];
    total += ir::numElements(v.shape) * static_cast<int64_t>(ir::dtypeSize(v.dtype));
  }
  return total;
}

// FNV-1a over dtype, shape and at most 256 evenly spaced 8-byte words: RoPE tables are
// megabytes, and equal hashes are confirmed with memcmp anyway.
uint64_t contentHash(const ir::Tensor& t) {
  uint64_t h = 1469598103934665603ull;
  auto mixWord = [&h](uint64_t w) { h = (h ^ w) * 1099511628211ull; };
  mixWord(static_cast<uint64_t>(t.dtype()));
  for (int64_t d : t.shape()) mixWord(static_cast<uint64_t>(d));
  const std::byte* p = t.raw();
  size_t words = t.nbytes() / 8, stride = std::max<size_t>(1, words / 256);
  for (size_t i = 0; i < words; i += stride) {
    uint64_t w;
    std::memcpy(&w, p + i * 8, 8);
    mixWord(w);
  }
  for (size_t i = words * 8; i < t.nbytes(); ++i) mixWord(static_cast<uint64_t>(p[i]));
  return h;
}

bool sameContents(const ir::Tensor& a, const ir::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

void makeConstant(ir::Value& v, ir::Tensor t) {
  v.kind = ir::ValueKind::Constant;
  v.data = std::make_shared<const ir::Tensor>(std::move(t));
  v.producer = ir::kNoNode;
}

}  // namespace

bool defaultFoldableInitializer(const ir::Value& v) {
  if (endsWith(v.name, ".weight") || endsWith(v.name, ".bias")) return false;
  return !ir::isFloat(v.dtype) || v.shape.size() <= 1;
}

bool FoldAndInfer::isCompileTimeConstant(const ir::Value& v) const {
  if (v.data == nullptr) return false;
  if (v.kind == ir::ValueKind::Constant) return true;
  return v.kind == ir::ValueKind::Initializer && opts_.foldableInitializer &&
         opts_.foldableInitializer(v);
}

Result<bool> FoldAndInfer::tryFold(ir::Graph& g, ir::NodeId id) {
  ir::Node& n = g.nodes[id];
  if (n.op == "Dropout") return false;
  bool shapeOnly = n.op == "Shape";
  std::vector<const ir::Tensor*> inputs;
  for (ir::ValueId in : n.inputs) {
    if (in == ir::kNoValue) {
      inputs.push_back(nullptr);
      continue;
    }
    if (!shapeOnly && !isCompileTimeConstant(g.values[in])) return false;
    // An updated buffer's value changes every step: what reads it is no constant.
    if (!shapeOnly && std::any_of(g.stateUpdates.begin(), g.stateUpdates.end(),
                                  [&](const ir::StateUpdate& u) { return u.state == in; }))
      return false;
    inputs.push_back(g.values[in].data.get());
  }
  if (outputBytes(g, n) > opts_.maxFoldBytes) {
    ++stats_.tooLarge;
    return false;
  }
  std::vector<ir::Tensor> results;
  if (shapeOnly) {
    results.push_back(shapeOf(n, g.values[n.inputs[0]].shape));
  } else {
    if (ref::findKernel(n.op) == nullptr) {
      ++stats_.noKernel;
      return false;
    }
    FBL_ASSIGN(results, ref::evalNode(g, n, inputs));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    ir::ValueId o = n.outputs[i];
    if (o == ir::kNoValue) continue;
    ir::Value& v = g.values[o];
    // The kernel and the shape rule disagreeing is a bug in one of them, not in the model.
    if (i >= results.size() || results[i].dtype() != v.dtype || results[i].shape() != v.shape)
      return makeError("{}: internal error: folding output '{}' gave {}{} but shape inference "
                       "says {}{}",
                       ir::describeNode(g, n), v.name,
                       i < results.size() ? ir::dtypeName(results[i].dtype()) : "nothing",
                       i < results.size() ? ir::shapeToString(results[i].shape()) : "",
                       ir::dtypeName(v.dtype), ir::shapeToString(v.shape));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (n.outputs[i] != ir::kNoValue) makeConstant(g.values[n.outputs[i]], std::move(results[i]));
  n.dead = true;
  return true;
}

Result<bool> FoldAndInfer::run(ir::Graph& g) {
  stats_ = {};
  std::vector<bool> isGraphOutput(g.values.size(), false);
  for (ir::ValueId v : g.outputs) isGraphOutput[v] = true;
  for (const ir::StateUpdate& u : g.stateUpdates) isGraphOutput[u.updated] = true;
  std::vector<ir::ValueId> repl(g.values.size());
  std::iota(repl.begin(), repl.end(), 0);
  std::unordered_multimap<uint64_t, ir::ValueId> byContent;
  // Returns the earlier constant equal to v, or registers v as the first of its contents.
  auto dedupe = [&](ir::ValueId v) {
    const ir::Tensor& t = *g.values[v].data;
    uint64_t h = contentHash(t);
    auto [lo, hi] = byContent.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (sameContents(*g.values[it->second].data, t)) return it->second;
    byContent.emplace(h, v);
    return v;
  };
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v)
    if (g.values[v].kind == ir::ValueKind::Constant && g.values[v].data) dedupe(v);

  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(g.nodes.size()); ++id) {
    if (g.nodes[id].dead) continue;
    for (ir::ValueId& in : g.nodes[id].inputs)
      if (in != ir::kNoValue) in = repl[in];
    FBL_TRY(ops::inferNode(g, g.nodes[id]));
    ++stats_.inferred;
    FBL_ASSIGN(bool folded, tryFold(g, id));
    if (!folded) continue;
    ++stats_.folded;
    for (ir::ValueId o : g.nodes[id].outputs) {
      if (o == ir::kNoValue || isGraphOutput[o]) continue;
      repl[o] = dedupe(o);
      stats_.deduplicated += repl[o] != o ? 1 : 0;
    }
  }
  return stats_.folded > 0;
}

int64_t countValuesWithoutStaticShape(const ir::Graph& g) {
  std::vector<bool> live = g.liveValues();
  int64_t count = 0;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (live[i] && (!g.values[i].shapeKnown || g.values[i].dtype == ir::DType::Undefined))
      ++count;
  return count;
}

}  // namespace fbl::passes
