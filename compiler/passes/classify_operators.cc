// classify-operators: the algorithm is in classify_operators.h (steps 1-4).
#include "compiler/passes/classify_operators.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/layout/simplify.h"
#include "compiler/passes/layout_assignment_printer.h"

namespace fbl::passes {

namespace {

using ir::NodeId;
using ir::ValueId;

bool isCompileTime(const ir::Graph& g, ValueId v) {
  return v != ir::kNoValue && (g.values[v].kind == ir::ValueKind::Constant || g.values[v].data != nullptr);
}

int64_t normAxis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

// The graph analysis of steps 2-4.
class ReadAnalysis {
 public:
  ReadAnalysis(const ir::Graph& g, LayoutAssignment& a) : g_(g), a_(a) {}
  Status run();

 private:
  struct Fold {
    bool folded = false;
    ValueId input = ir::kNoValue;  // the value it reads (source side)
    int view = -1;                 // index into views_
    std::vector<NodeId> absorbed;  // roll joins: the slab nodes folded into it
    std::optional<layout::Expr> sign;
  };
  struct Piece {
    int64_t outStart = 0, len = 0, srcStart = 0;
    bool neg = false;
    ValueId src = ir::kNoValue;
    std::vector<NodeId> nodes;
  };

  bool foldedValue(ValueId v) const {
    NodeId p = v == ir::kNoValue ? ir::kNoNode : g_.values[v].producer;
    return p != ir::kNoNode && fold_[p].folded;
  }
  // The view of a value: memo key and map (identity for an unfolded value).
  std::string keyOf(ValueId v) const {
    return foldedValue(v) ? keys_[fold_[g_.values[v].producer].view] : ir::shapeToString(g_.values[v].shape);
  }
  Result<int> viewFor(ValueId in, const std::string& opKey, const layout::IndexMap& own);
  void tryFoldMovement(NodeId id);
  bool tryRoll(NodeId id);
  std::optional<Piece> slabOf(ValueId v, int64_t axis, bool throughSliceGrad);
  void addRead(NodeId consumer, int slot, ValueId v);

  const ir::Graph& g_;
  LayoutAssignment& a_;
  std::vector<Fold> fold_;
  std::vector<int> consumerCount_;
  std::vector<bool> isOutput_;
  std::vector<NodeId> absorbedBy_;
  std::unordered_map<std::string, int> memo_;
  std::vector<std::string> keys_;
  std::vector<layout::IndexMap> views_;
};

Result<int> ReadAnalysis::viewFor(ValueId in, const std::string& opKey, const layout::IndexMap& own) {
  std::string key = keyOf(in) + " | " + opKey;
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  layout::IndexMap m = own;
  if (foldedValue(in)) {
    FBL_ASSIGN(m, layout::compose(views_[fold_[g_.values[in].producer].view], own));
  }
  views_.push_back(m.simplified());
  keys_.push_back(key);
  memo_.emplace(key, static_cast<int>(views_.size()) - 1);
  return static_cast<int>(views_.size()) - 1;
}

void ReadAnalysis::tryFoldMovement(NodeId id) {
  const ir::Node& n = g_.nodes[id];
  if (n.outputs.size() != 1 || isOutput_[n.outputs[0]]) return;
  auto op = movementOpOf(g_, n);
  if (!op.ok()) return;
  const ir::Value& in = g_.values[n.inputs[0]];
  auto own = layout::movementMap(in.shape, *op);
  if (!own.ok()) return;
  auto v = viewFor(n.inputs[0], op->str(), *own);
  if (!v.ok()) return;
  fold_[id] = Fold{true, n.inputs[0], *v, {}, {}};
}

// A slab on `axis`: [Neg](Slice(src)) for a Concat input, or fbl.SliceGrad([Neg](Slice(src)))
// for an Add input. Every node of it must feed only the join.
std::optional<ReadAnalysis::Piece> ReadAnalysis::slabOf(ValueId v, int64_t axis, bool throughSliceGrad) {
  Piece p;
  auto producer = [&](ValueId x) -> const ir::Node* {
    if (x == ir::kNoValue || consumerCount_[x] != 1 || isOutput_[x]) return nullptr;
    NodeId id = g_.values[x].producer;
    return id == ir::kNoNode ? nullptr : &g_.nodes[id];
  };
  const ir::Node* n = producer(v);
  if (n == nullptr) return std::nullopt;
  size_t rank = g_.values[v].shape.size();
  if (throughSliceGrad) {
    if (n->op != "fbl.SliceGrad") return std::nullopt;
    auto axes = n->attrInts("axes"), starts = n->attrInts("starts"), steps = n->attrInts("steps");
    if (axes.size() != 1 || normAxis(axes[0], rank) != axis || steps != std::vector<int64_t>{1}) return std::nullopt;
    p.outStart = starts[0];
    p.nodes.push_back(g_.values[v].producer);
    v = n->inputs[0];
    n = producer(v);
    if (n == nullptr) return std::nullopt;
  }
  if (n->op == "Neg") {
    p.neg = true;
    p.nodes.push_back(g_.values[v].producer);
    v = n->inputs[0];
    n = producer(v);
    if (n == nullptr) return std::nullopt;
  }
  if (n->op != "Slice") return std::nullopt;
  auto op = movementOpOf(g_, *n);
  if (!op.ok() || op->axes.size() != 1 || normAxis(op->axes[0], rank) != axis || op->steps[0] != 1)
    return std::nullopt;
  p.srcStart = op->starts[0];
  p.len = g_.values[v].shape[axis];
  p.src = n->inputs[0];
  p.nodes.push_back(g_.values[v].producer);
  return p;
}

bool ReadAnalysis::tryRoll(NodeId id) {
  const ir::Node& n = g_.nodes[id];
  bool concat = n.op == "Concat";
  if ((!concat && n.op != "Add") || n.inputs.size() != 2 || n.outputs.size() != 1 || isOutput_[n.outputs[0]])
    return false;
  const ir::Shape& out = g_.values[n.outputs[0]].shape;
  int64_t axis = -1;
  if (concat) {
    axis = normAxis(n.attrInt("axis", 0), out.size());
  } else {
    NodeId p = g_.values[n.inputs[0]].producer;
    if (p == ir::kNoNode || g_.nodes[p].op != "fbl.SliceGrad") return false;
    auto axes = g_.nodes[p].attrInts("axes");
    if (axes.size() != 1) return false;
    axis = normAxis(axes[0], out.size());
  }
  if (axis < 0 || axis >= static_cast<int64_t>(out.size())) return false;
  std::vector<Piece> pieces;
  int64_t offset = 0;
  for (ValueId v : n.inputs) {
    if (!concat && g_.values[v].shape != out) return false;
    auto p = slabOf(v, axis, !concat);
    if (!p) return false;
    if (concat) p->outStart = offset;
    offset += p->len;
    pieces.push_back(*p);
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.outStart < b.outStart; });
  const int64_t D = out[axis], split = pieces[1].outStart;
  if (pieces[0].src != pieces[1].src || g_.values[pieces[0].src].shape != out || pieces[0].outStart != 0 ||
      split != pieces[0].len || split + pieces[1].len != D || D > 2 * split)
    return false;
  auto shift = [&](const Piece& p) { return ((p.srcStart - p.outStart) % D + D) % D; };
  if (shift(pieces[0]) != shift(pieces[1])) return false;
  int64_t s = shift(pieces[0]);
  std::vector<layout::Expr> vars = layout::IndexMap::vars(out), outs = vars;
  outs[axis] = layout::floorMod(vars[axis] + s, D);
  auto v = viewFor(pieces[0].src, fmt::format("Roll(axis {}, shift {})", axis, s), layout::IndexMap(out, outs, out));
  if (!v.ok()) return false;
  Fold f{true, pieces[0].src, *v, {}, {}};
  int64_t s0 = pieces[0].neg ? -1 : 1, s1 = pieces[1].neg ? -1 : 1;
  if (s0 != 1 || s1 != 1) f.sign = layout::Expr::constant(s0) + layout::floorDiv(vars[axis], split) * (s1 - s0);
  for (const Piece& p : pieces) f.absorbed.insert(f.absorbed.end(), p.nodes.begin(), p.nodes.end());
  for (NodeId a : f.absorbed) absorbedBy_[a] = id;
  fold_[id] = std::move(f);
  return true;
}

void ReadAnalysis::addRead(NodeId consumer, int slot, ValueId v) {
  ReadThrough r;
  r.consumer = consumer;
  r.slot = slot;
  const Fold& last = fold_[g_.values[v].producer];
  r.view = views_[last.view];
  r.chainText = keys_[last.view];
  r.sign = last.sign;
  // Walk back to the source; a sign from an inner roll is not composed (one roll per chain).
  ValueId x = v;
  while (foldedValue(x)) {
    NodeId p = g_.values[x].producer;
    r.chain.push_back(p);
    for (NodeId a : fold_[p].absorbed) r.chain.push_back(a);
    if (fold_[p].sign && p != g_.values[v].producer) {
      r.sign.reset();
      r.decision = ReadThrough::Decision::kExplicit;
      r.structural = true;
      r.reason = "a negating roll inside a longer chain (one sign per read)";
    }
    for (NodeId a : fold_[p].absorbed)
      if (g_.nodes[a].op == "Neg") r.absorbed.push_back(a);
    x = fold_[p].input;
  }
  std::reverse(r.chain.begin(), r.chain.end());
  r.source = x;
  r.tileReader = isTileReader(g_.nodes[consumer], slot);
  a_.reads.push_back(std::move(r));
}

Status ReadAnalysis::run() {
  const size_t nn = g_.nodes.size(), nv = g_.values.size();
  fold_.assign(nn, {});
  absorbedBy_.assign(nn, ir::kNoNode);
  consumerCount_.assign(nv, 0);
  isOutput_.assign(nv, false);
  for (ValueId v : g_.outputs) isOutput_[v] = true;
  for (const ir::Node& n : g_.nodes)
    if (!n.dead)
      for (ValueId v : n.inputs)
        if (v != ir::kNoValue) ++consumerCount_[v];
  for (NodeId id = 0; id < static_cast<NodeId>(nn); ++id) {
    const ir::Node& n = g_.nodes[id];
    if (n.dead || a_.nodeClass[id] == OpClass::kNone) continue;
    if (n.op == "Concat" || n.op == "Add") {
      if (tryRoll(id)) continue;
    }
    if (a_.nodeClass[id] == OpClass::kFtiD) tryFoldMovement(id);
  }
  for (NodeId id = 0; id < static_cast<NodeId>(nn); ++id) {
    const ir::Node& n = g_.nodes[id];
    if (fold_[id].folded || absorbedBy_[id] != ir::kNoNode) a_.transforms[id].folded = true;
    if (n.dead || fold_[id].folded || absorbedBy_[id] != ir::kNoNode) continue;
    for (size_t s = 0; s < n.inputs.size(); ++s)
      if (isDataInput(n, static_cast<int>(s)) && foldedValue(n.inputs[s])) addRead(id, static_cast<int>(s), n.inputs[s]);
  }
  a_.indexReads();
  return Status::success();
}

}  // namespace

OpClass classifyNode(const ir::Graph& g, const ir::Node& n) {
  OpClass c = ops::opClass(n.op);
  // Scale: a product or quotient with a compile-time operand needs no forward tensor.
  if ((n.op == "Mul" || n.op == "Div") && n.inputs.size() == 2 &&
      (isCompileTime(g, n.inputs[1]) || (n.op == "Mul" && isCompileTime(g, n.inputs[0]))))
    return OpClass::kFtiC;
  // An op without a rule keeps layouts as an elementwise op that reads its inputs would.
  return c == OpClass::kNone ? OpClass::kFtdC : c;
}

Result<layout::MovementOp> movementOpOf(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.empty() || n.inputs[0] == ir::kNoValue || n.outputs.empty() || n.outputs[0] == ir::kNoValue)
    return makeError("{}: no data input", ir::describeNode(g, n));
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  if (!in.shapeKnown || !out.shapeKnown) return makeError("{}: shape unknown", ir::describeNode(g, n));
  auto constant = [&](size_t slot) -> Result<std::optional<std::vector<int64_t>>> {
    if (n.input(slot) == ir::kNoValue) return std::optional<std::vector<int64_t>>();
    const ir::Tensor* t = g.values[n.inputs[slot]].data.get();
    if (t == nullptr) return makeError("slice parameters are not constants");
    return std::optional(t->toInt64s());
  };
  auto op = layout::onnxMovementOp(n, in.shape, constant, &out.shape);
  if (!op.ok()) return makeError("{}: {}", ir::describeNode(g, n), op.error().message);
  for (int64_t s : op->steps)
    if (s < 0) return makeError("{}: a negative step is not an index rewrite here", ir::describeNode(g, n));
  return op;
}

Result<bool> ClassifyOperators::run(ir::Graph& g) {
  a_.reset(g);
  bool any = false;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    const ir::Node& n = g.nodes[id];
    if (n.dead) continue;
    a_.nodeClass[id] = classifyNode(g, n);
    a_.transforms[id].isTransform = a_.nodeClass[id] == OpClass::kFtiD;
    any = true;
  }
  ReadAnalysis ra(g, a_);
  FBL_TRY(ra.run());
  return any;
}

std::string ClassifyOperators::dump(const ir::Graph& g) const { return formatClassification(g, a_); }

}  // namespace fbl::passes
