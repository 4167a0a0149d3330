// fuse-attention: the algorithm is in fuse_attention.h (steps 1-5).
#include "compiler/passes/fuse_attention.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "compiler/ops/attention.h"
#include "compiler/ops/broadcast.h"
#include "compiler/passes/dead_code.h"
#include "compiler/passes/fold_and_infer.h"

namespace fbl::passes {

namespace {

using ir::NodeId;
using ir::ValueId;

constexpr double kMaskedBelow = -1e30;  // a mask entry this low (finfo.min, -inf) hides its key

struct Match {
  NodeId softmax = ir::kNoNode, qk = ir::kNoNode, pv = ir::kNoNode;
  std::vector<NodeId> chain;  // score nodes between the QK product and the Softmax
  ValueId q = ir::kNoValue, kT = ir::kNoValue, v = ir::kNoValue, mask = ir::kNoValue;
  double scale = 1.0, softcap = 0.0;
};

class Matcher {
 public:
  explicit Matcher(ir::Graph& g) : g_(g), consumers_(g.consumers()) {}
  void refresh() { consumers_ = g_.consumers(); }  // after a rewrite

  std::optional<Match> match(NodeId softmax);
  // Step 3: k (or kv) as [B, Hkv, S, D] without its repeat_kv; kNoValue if it has none.
  ValueId repeatKvSource(ValueId v) const;
  // Step 4: 0 none, 1 causal, 2 sliding window (*window set); -1 not classifiable.
  // Memoized per mask value: every layer of a decoder reads the same folded mask, whose S x S
  // scan dominated the pass.
  int classifyMask(ValueId mask, int64_t qLen, int64_t kvLen, int64_t* window);
  bool dependsOnFloatParameter(ValueId v) const;

  const ir::Node* producer(ValueId v) const {
    const NodeId p = v == ir::kNoValue ? ir::kNoNode : g_.values[v].producer;
    return p == ir::kNoNode || g_.nodes[p].dead ? nullptr : &g_.nodes[p];
  }
  bool readOnce(ValueId v) const { return consumers_[v].size() == 1 && !isOutput(v); }

 private:
  bool isOutput(ValueId v) const { return std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end(); }
  std::optional<double> scalarConst(ValueId v) const {
    const ir::Value& val = g_.values[v];
    if (!val.data || val.data->numel() != 1 || !ir::isFloat(val.dtype)) return std::nullopt;
    return val.data->at(0);
  }
  // x * s, s * x or x / s with s a float scalar constant: x and the factor.
  std::optional<std::pair<ValueId, double>> scaled(const ir::Node& n) const {
    if (n.inputs.size() != 2 || (n.op != "Mul" && n.op != "Div")) return std::nullopt;
    if (auto s = scalarConst(n.inputs[1])) return std::make_pair(n.inputs[0], n.op == "Mul" ? *s : 1.0 / *s);
    if (n.op == "Mul")
      if (auto s = scalarConst(n.inputs[0])) return std::make_pair(n.inputs[1], *s);
    return std::nullopt;
  }
  // Scalar scales in front of a MatMul operand, folded into *scale.
  ValueId peelScales(ValueId v, double* scale) const {
    while (const ir::Node* p = producer(v)) {
      auto s = scaled(*p);
      if (!s) break;
      *scale *= s->second;
      v = s->first;
    }
    return v;
  }
  // Mul with a Tanh operand: the outer step of c * tanh(x / c).
  bool isSoftcap(const ir::Node& n) const {
    if (n.op != "Mul" || n.inputs.size() != 2) return false;
    for (ValueId x : n.inputs)
      if (const ir::Node* p = producer(x); p && p->op == "Tanh") return true;
    return false;
  }
  NodeId id(const ir::Node* n) const { return static_cast<NodeId>(n - g_.nodes.data()); }

  int classifyMaskUncached(ValueId mask, int64_t qLen, int64_t kvLen, int64_t* window) const;

  ir::Graph& g_;
  std::vector<std::vector<NodeId>> consumers_;
  struct MaskClass {
    int kind = -1;
    int64_t window = 0;
  };
  std::map<std::tuple<ValueId, int64_t, int64_t>, MaskClass> maskClasses_;
};

std::optional<Match> Matcher::match(NodeId softmaxId) {
  const ir::Node& sm = g_.nodes[softmaxId];
  const ir::Value& p = g_.values[sm.outputs[0]];
  const int64_t rank = static_cast<int64_t>(p.shape.size());
  if (rank != 4 || p.dtype != ir::DType::F32) return std::nullopt;
  int64_t axis = sm.attrInt("axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return std::nullopt;
  Match m;
  m.softmax = softmaxId;
  // 2: P read only by MatMul(P, v').
  if (consumers_[sm.outputs[0]].size() != 1 || isOutput(sm.outputs[0])) return std::nullopt;
  const ir::Node& pv = g_.nodes[consumers_[sm.outputs[0]][0]];
  if (pv.op != "MatMul" || pv.inputs[0] != sm.outputs[0] || pv.inputs[1] == sm.outputs[0]) return std::nullopt;
  m.pv = id(&pv);
  m.v = pv.inputs[1];
  // 1: back from the Softmax input. Stage 0 takes the mask; once a scale or the softcap is
  // seen (stage 2), only scales and (if no scale came first) the softcap follow.
  ValueId s = sm.inputs[0];
  int stage = 0;
  double after = 1.0;  // scales between the product and the softcap
  while (true) {
    if (!readOnce(s)) return std::nullopt;
    const ir::Node* n = producer(s);
    if (n == nullptr) return std::nullopt;
    if (n->op == "MatMul") {
      m.qk = id(n);
      break;
    }
    m.chain.push_back(id(n));
    if (auto sc = scaled(*n); sc && !isSoftcap(*n)) {
      // Walking back, a scale seen before the mask would scale the mask too: the Add branch
      // below accepts masks only at stage 0.
      stage = 2;
      after *= sc->second;
      s = sc->first;
      continue;
    }
    if (n->op == "Add" && stage == 0 && m.mask == ir::kNoValue && n->inputs.size() == 2) {
      // The scores side is the one with the Add's own shape that comes from the chain; try the
      // first operand, then the second.
      const ir::Shape& out = g_.values[n->outputs[0]].shape;
      int side = -1;
      for (int k = 0; k < 2 && side < 0; ++k) {
        const ir::Node* pk = producer(n->inputs[k]);
        if (g_.values[n->inputs[k]].shape == out && pk && pk->op != "Constant" && readOnce(n->inputs[k]) &&
            (pk->op == "MatMul" || pk->op == "Mul" || pk->op == "Div"))
          side = k;
      }
      if (side < 0) return std::nullopt;
      m.mask = n->inputs[1 - side];
      s = n->inputs[side];
      continue;
    }
    if (isSoftcap(*n) && after == 1.0) {
      // Softcap: c * tanh(x / c), as Mul(Tanh(Div(x, c)), c) (or x * (1/c)).
      const ir::Node* t = nullptr;
      std::optional<double> c;
      for (int k = 0; k < 2 && !t; ++k)
        if (const ir::Node* pk = producer(n->inputs[k]); pk && pk->op == "Tanh" && (c = scalarConst(n->inputs[1 - k])))
          t = pk;
      if (!t || !readOnce(t->outputs[0])) return std::nullopt;
      const ir::Node* d = producer(t->inputs[0]);
      if (!d || !readOnce(d->outputs[0])) return std::nullopt;
      auto inner = scaled(*d);
      if (!inner || *c <= 0 || std::fabs(inner->second * *c - 1.0) > 1e-6) return std::nullopt;
      m.chain.push_back(id(t));
      m.chain.push_back(id(d));
      if (m.softcap > 0) return std::nullopt;
      m.softcap = *c;
      stage = 2;
      s = inner->first;
      continue;
    }
    return std::nullopt;
  }
  const ir::Node& qk = g_.nodes[m.qk];
  m.scale = after;
  m.q = peelScales(qk.inputs[0], &m.scale);
  m.kT = peelScales(qk.inputs[1], &m.scale);
  for (ValueId x : {m.q, m.kT, m.v})
    if (g_.values[x].shape.size() != 4 || g_.values[x].dtype != ir::DType::F32) return std::nullopt;
  return m;
}

ValueId Matcher::repeatKvSource(ValueId v) const {
  const ir::Node* r = producer(v);
  if (!r || r->op != "Reshape") return ir::kNoValue;
  const ir::Node* e = producer(r->inputs[0]);
  if (!e || e->op != "Expand") return ir::kNoValue;
  const ir::Node* u = producer(e->inputs[0]);
  if (!u || u->op != "Unsqueeze") return ir::kNoValue;
  const ir::Shape &out = g_.values[v].shape, &ex = g_.values[e->outputs[0]].shape,
                  &un = g_.values[u->outputs[0]].shape, &src = g_.values[u->inputs[0]].shape;
  // [B, Hkv, S, D] -> [B, Hkv, 1, S, D] -> [B, Hkv, rep, S, D] -> [B, Hkv * rep, S, D]
  if (src.size() != 4 || un != ir::Shape{src[0], src[1], 1, src[2], src[3]} ||
      ex != ir::Shape{src[0], src[1], ex[2], src[2], src[3]} || out != ir::Shape{src[0], src[1] * ex[2], src[2], src[3]})
    return ir::kNoValue;
  return u->inputs[0];
}

int Matcher::classifyMask(ValueId mask, int64_t qLen, int64_t kvLen, int64_t* window) {
  const auto key = std::make_tuple(mask, qLen, kvLen);
  auto it = maskClasses_.find(key);
  if (it == maskClasses_.end()) {
    MaskClass c;
    c.kind = classifyMaskUncached(mask, qLen, kvLen, &c.window);
    it = maskClasses_.emplace(key, c).first;
  }
  if (it->second.kind > 0) *window = it->second.window;
  return it->second.kind;
}

int Matcher::classifyMaskUncached(ValueId mask, int64_t qLen, int64_t kvLen, int64_t* window) const {
  const ir::Value& mv = g_.values[mask];
  if (!mv.data || mv.dtype != ir::DType::F32) return -1;
  const ir::Shape& s = mv.shape;
  const float* m = mv.data->data<float>();
  // Every [i, j] plane of the broadcast mask must be the same: compare each with the classification.
  const int64_t rows = s.size() >= 2 ? s[s.size() - 2] : 1, cols = s.empty() ? 1 : s.back();
  const int64_t planes = mv.data->numel() / std::max<int64_t>(rows * cols, 1);
  bool zeros = true, masked = false;
  for (int64_t i = 0; i < mv.data->numel(); ++i) {
    const double x = m[i];
    if (x != 0.0 && x > kMaskedBelow) return -1;
    zeros = zeros && x == 0.0;
    masked = masked || x != 0.0;
  }
  if (zeros) return 0;
  if (!masked || rows != qLen || cols != kvLen || qLen != kvLen) return -1;
  // The window: the visible keys of the widest row.
  int64_t w = 0;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t visible = 0;
    for (int64_t j = 0; j < cols; ++j) visible += m[i * cols + j] == 0.0f;
    w = std::max(w, visible);
  }
  ops::AttentionDims d;
  d.causal = true;
  d.window = w >= kvLen ? 0 : w;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if ((m[(p * rows + i) * cols + j] == 0.0f) != d.visible(i, j)) return -1;
  *window = d.window;
  return d.window > 0 ? 2 : 1;
}

bool Matcher::dependsOnFloatParameter(ValueId v) const {
  std::vector<ValueId> stack{v};
  std::vector<bool> seen(g_.values.size(), false);
  while (!stack.empty()) {
    const ValueId x = stack.back();
    stack.pop_back();
    if (x == ir::kNoValue || seen[x]) continue;
    seen[x] = true;
    const ir::Value& val = g_.values[x];
    // A scalar or 1-D buffer (the exporter's lifted constants: a mask's fill value) is a
    // constant, as fold-and-infer treats it; a parameter is not.
    if (val.kind == ir::ValueKind::Initializer && ir::isFloat(val.dtype) && !defaultFoldableInitializer(val))
      return true;
    if (const ir::Node* p = producer(x))
      for (ValueId i : p->inputs) stack.push_back(i);
  }
  return false;
}

}  // namespace

std::string FuseAttention::summary() const {
  return fmt::format("{} of {} softmaxes fused into fbl.Attention ({} causal, {} sliding window, {} with a mask input, "
                     "{} softcapped, {} grouped-query)",
                     counts_.fused, counts_.softmaxes, counts_.causal, counts_.window, counts_.maskInput,
                     counts_.softcap, counts_.grouped);
}

Result<bool> FuseAttention::run(ir::Graph& g) {
  counts_ = {};
  bool changed = false;
  Matcher matcher(g);
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    if (g.nodes[id].dead || g.nodes[id].op != "Softmax") continue;
    ++counts_.softmaxes;
    std::optional<Match> m = matcher.match(id);
    if (!m) continue;
    const ir::Shape q = g.values[m->q].shape, kT = g.values[m->kT].shape;
    // 3: k from kT.
    ValueId k = ir::kNoValue;
    bool newTranspose = false;
    if (const ir::Node* t = matcher.producer(m->kT);
        t && t->op == "Transpose" && t->attrInts("perm") == std::vector<int64_t>{0, 1, 3, 2}) {
      k = t->inputs[0];
    } else {
      newTranspose = true;
    }
    ValueId v = m->v;
    int64_t kvHeads = q[1];
    if (!newTranspose) {
      const ValueId ks = matcher.repeatKvSource(k), vs = matcher.repeatKvSource(v);
      if (ks != ir::kNoValue && vs != ir::kNoValue && g.values[ks].shape[1] == g.values[vs].shape[1]) {
        k = ks;
        v = vs;
        kvHeads = g.values[ks].shape[1];
      }
    }
    const ir::Shape vShape = g.values[v].shape;
    if (kT.size() != 4 || kT[0] != q[0] || kT[1] != q[1] || kT[2] != q[3] || vShape[0] != q[0] ||
        vShape[2] != kT[3] || vShape[1] != kvHeads)
      continue;
    // 4: the mask.
    ir::Node attn;
    attn.op = "fbl.Attention";
    attn.name = g.nodes[m->pv].name + "/fbl.Attention";
    attn.attrs["scale"] = static_cast<float>(m->scale);
    if (m->softcap > 0) attn.attrs["softcap"] = static_cast<float>(m->softcap);
    ValueId maskInput = ir::kNoValue;
    if (m->mask != ir::kNoValue) {
      const ir::Value& mv = g.values[m->mask];
      if (mv.dtype != ir::DType::F32 || !ops::broadcastsTo(mv.shape, {q[0], q[1], q[2], kT[3]})) continue;
      int64_t window = 0;
      const int kind = matcher.classifyMask(m->mask, q[2], kT[3], &window);
      if (kind < 0) {
        if (matcher.dependsOnFloatParameter(m->mask)) continue;
        maskInput = m->mask;
      }
      if (kind >= 1) attn.attrs["causal"] = int64_t{1};
      if (kind == 2) attn.attrs["window"] = window;
      counts_.causal += kind == 1;
      counts_.window += kind == 2;
      counts_.maskInput += kind < 0;
    }
    // 5: rewrite in place (the node list stays topologically ordered).
    if (newTranspose) {
      ir::Node t;
      t.op = "Transpose";
      t.name = g.nodes[m->qk].name + "/key";
      t.attrs["perm"] = std::vector<int64_t>{0, 1, 3, 2};
      t.inputs = {m->kT};
      k = g.newValue(g.values[m->kT].name + "_key", ir::DType::F32, {kT[0], kT[1], kT[3], kT[2]}, true);
      t.outputs = {k};
      g.nodes[m->qk] = std::move(t);
      g.values[k].producer = m->qk;
    } else {
      g.nodes[m->qk].dead = true;
    }
    for (NodeId c : m->chain) g.nodes[c].dead = true;
    g.nodes[m->softmax].dead = true;
    attn.inputs = {m->q, k, v};
    if (maskInput != ir::kNoValue) attn.inputs.push_back(maskInput);
    const ValueId o = g.nodes[m->pv].outputs[0];
    const ValueId lse = g.newValue(g.values[o].name + "_lse", ir::DType::F32, {q[0], q[1], q[2], 2}, true);
    attn.outputs = {o, lse};
    attn.phase = g.nodes[m->pv].phase;
    g.nodes[m->pv] = std::move(attn);
    g.values[lse].producer = m->pv;
    ++counts_.fused;
    counts_.softcap += m->softcap > 0;
    counts_.grouped += kvHeads != q[1];
    changed = true;
    matcher.refresh();
  }
  if (changed) {
    DeadCode dc;
    FBL_TRY(dc.run(g));
  }
  return changed;
}

}  // namespace fbl::passes
