#include "compiler/autodiff/grad_rules.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/ops/broadcast.h"

namespace fbl::autodiff {

GradBuilder::GradBuilder(ir::Graph& g) : g_(g) {
  nodeNames_.reserve(g.nodes.size() * 3);
  for (const auto& n : g.nodes) nodeNames_.insert(n.name);
}

const ir::Tensor* GradBuilder::constData(ir::ValueId v) const {
  // Frozen initializers count (exporters store axes and exponents as initializers); a trainable
  // one never reaches here, since rules refuse gradients with respect to such operands.
  const ir::Value& val = g_.values[v];
  bool fixed = val.kind == ir::ValueKind::Constant || val.kind == ir::ValueKind::Initializer;
  return fixed ? val.data.get() : nullptr;
}

void GradBuilder::setOrigin(const ir::Node& fwd) {
  origin_ = fwd.name.empty() ? std::string("node") : fwd.name;
}

std::string GradBuilder::nodeName(std::string_view op) {
  std::string base = fmt::format("{}/{}/{}", origin_,
                                 phase_ == ir::Phase::Optimizer ? "update" : "grad", op);
  std::string name = base;
  for (int i = 1; !nodeNames_.insert(name).second; ++i) name = fmt::format("{}_{}", base, i);
  return name;
}

ir::ValueId GradBuilder::emit(std::string_view op, std::vector<ir::ValueId> inputs, ir::DType dt,
                              ir::Shape shape, Attrs attrs) {
  return emitMulti(op, std::move(inputs), {OutType{dt, std::move(shape), {}}}, std::move(attrs))[0];
}

std::vector<ir::ValueId> GradBuilder::emitMulti(std::string_view op,
                                                std::vector<ir::ValueId> inputs,
                                                const std::vector<OutType>& outs, Attrs attrs) {
  ir::Node n;
  n.op = std::string(op);
  n.name = nodeName(op);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.phase = phase_;
  for (const auto& o : outs) {
    if (o.dtype == ir::DType::Undefined) {
      n.outputs.push_back(ir::kNoValue);
      continue;
    }
    n.outputs.push_back(g_.newValue(o.name.empty() ? n.name : o.name, o.dtype, o.shape, true));
  }
  std::vector<ir::ValueId> result = n.outputs;
  g_.addNode(std::move(n));
  return result;
}

ir::ValueId GradBuilder::ints(const std::vector<int64_t>& v) {
  auto it = ints_.find(v);
  if (it != ints_.end()) return it->second;
  ir::ValueId id = g_.newConstant("grad_const", ir::Tensor::fromVector<int64_t>(
                                                    {static_cast<int64_t>(v.size())}, v));
  ints_.emplace(v, id);
  return id;
}

ir::ValueId GradBuilder::scalar(double v, ir::DType dt) {
  auto key = std::make_pair(v, static_cast<int>(dt));
  auto it = scalars_.find(key);
  if (it != scalars_.end()) return it->second;
  ir::Tensor t(dt, {});
  t.set(0, v);
  ir::ValueId id = g_.newConstant("grad_const", std::move(t));
  scalars_.emplace(key, id);
  return id;
}

ir::ValueId GradBuilder::binary(std::string_view op, ir::ValueId a, ir::ValueId b) {
  auto s = ops::broadcastShapes(shape(a), shape(b));
  FBL_ASSERT(s.has_value());
  return emit(op, {a, b}, dtype(a), *s);
}

ir::ValueId GradBuilder::add(ir::ValueId a, ir::ValueId b) { return binary("Add", a, b); }
ir::ValueId GradBuilder::sub(ir::ValueId a, ir::ValueId b) { return binary("Sub", a, b); }
ir::ValueId GradBuilder::mul(ir::ValueId a, ir::ValueId b) { return binary("Mul", a, b); }
ir::ValueId GradBuilder::div(ir::ValueId a, ir::ValueId b) { return binary("Div", a, b); }
ir::ValueId GradBuilder::neg(ir::ValueId a) { return emit("Neg", {a}, dtype(a), shape(a)); }

ir::ValueId GradBuilder::matmul(ir::ValueId a, ir::ValueId b) {
  ir::Shape sa = shape(a), sb = shape(b);
  FBL_ASSERT(sa.size() >= 2 && sb.size() >= 2 && sa.back() == sb[sb.size() - 2]);
  auto batch = ops::broadcastShapes(ir::Shape(sa.begin(), sa.end() - 2),
                                    ir::Shape(sb.begin(), sb.end() - 2));
  FBL_ASSERT(batch.has_value());
  ir::Shape out = *batch;
  out.push_back(sa[sa.size() - 2]);
  out.push_back(sb.back());
  return emit("MatMul", {a, b}, dtype(a), out);
}

ir::ValueId GradBuilder::transpose(ir::ValueId v, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  if (identity) return v;
  // Undo a Transpose instead of stacking a second one on it.
  ir::NodeId p = g_.values[v].producer;
  if (p != ir::kNoNode && g_.nodes[p].op == "Transpose" && !g_.nodes[p].dead) {
    std::vector<int64_t> inner = g_.nodes[p].attrInts("perm");
    if (inner.empty())
      for (int64_t i = rank(v) - 1; i >= 0; --i) inner.push_back(i);
    bool undoes = inner.size() == perm.size();
    for (size_t i = 0; undoes && i < perm.size(); ++i) undoes = inner[perm[i]] == int64_t(i);
    if (undoes) return g_.nodes[p].inputs[0];
  }
  // (P Q)^T = Q^T P^T: a weight gradient computed as a product and then transposed back to the
  // weight's orientation becomes one product; the first is removed later if nothing reads it.
  if (p != ir::kNoNode && g_.nodes[p].op == "MatMul" && g_.nodes[p].phase == ir::Phase::Backward &&
      perm == std::vector<int64_t>{1, 0}) {
    ir::ValueId lhs = g_.nodes[p].inputs[0], rhs = g_.nodes[p].inputs[1];
    if (rank(lhs) == 2 && rank(rhs) == 2) return matmul(swapLastTwo(rhs), swapLastTwo(lhs));
  }
  auto key = std::make_pair(v, perm);
  auto it = transposes_.find(key);
  if (it != transposes_.end()) return it->second;
  ir::Shape s = shape(v), out(s.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = s[perm[i]];
  ir::ValueId r = emit("Transpose", {v}, dtype(v), out, {{"perm", perm}});
  transposes_.emplace(key, r);
  return r;
}

ir::ValueId GradBuilder::swapLastTwo(ir::ValueId v) {
  std::vector<int64_t> perm(rank(v));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  FBL_ASSERT(perm.size() >= 2);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(v, perm);
}

ir::ValueId GradBuilder::reshape(ir::ValueId v, const ir::Shape& to) {
  if (shape(v) == to) return v;
  FBL_ASSERT(ir::numElements(shape(v)) == ir::numElements(to));
  // Going back through a Reshape/Squeeze/Unsqueeze: read its input.
  ir::NodeId p = g_.values[v].producer;
  if (p != ir::kNoNode && !g_.nodes[p].dead) {
    const ir::Node& n = g_.nodes[p];
    bool movement = n.op == "Reshape" || n.op == "Squeeze" || n.op == "Unsqueeze" ||
                    n.op == "Flatten";
    if (movement && shape(n.inputs[0]) == to) return n.inputs[0];
  }
  auto key = std::make_pair(v, to);
  auto it = reshapes_.find(key);
  if (it != reshapes_.end()) return it->second;
  ir::ValueId r = emit("Reshape", {v, ints(to)}, dtype(v), to);
  reshapes_.emplace(key, r);
  return r;
}

ir::ValueId GradBuilder::expand(ir::ValueId v, const ir::Shape& to) {
  if (shape(v) == to) return v;
  FBL_ASSERT(ops::broadcastsTo(shape(v), to));
  return emit("Expand", {v, ints(to)}, dtype(v), to);
}

ir::ValueId GradBuilder::reduceSumTo(ir::ValueId v, const ir::Shape& to) {
  ir::Shape from = shape(v);
  if (from == to) return v;
  FBL_ASSERT(ops::broadcastsTo(to, from));
  // Only leading or unit dimensions differ: the same elements under another shape.
  if (ir::numElements(from) == ir::numElements(to)) return reshape(v, to);
  return emit("fbl.ReduceSumTo", {v}, dtype(v), to, {{"shape", to}});
}

Error GradContext::fail(std::string_view msg) const {
  return makeError("{}: {}", ir::describeNode(b.graph(), fwd), msg);
}

namespace {

const std::unordered_map<std::string_view, GradRule>& ruleTable() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string_view, GradRule>();
    for (auto list : {mathGradRules(), shapeGradRules(), nnGradRules()})
      for (const auto& r : list) {
        FBL_ASSERT(t->find(r.op) == t->end());
        t->emplace(r.op, r);
      }
    return t;
  }();
  return *table;
}

}  // namespace

const GradRule* findGradRule(std::string_view op) {
  const auto& t = ruleTable();
  auto it = t.find(op);
  return it == t.end() ? nullptr : &it->second;
}

}  // namespace fbl::autodiff
