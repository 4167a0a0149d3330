// chunk-loss and schedule-loss-chunks: the algorithm is in chunk_loss.h (steps 1-5).
#include "compiler/passes/chunk_loss.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/graph_edit.h"

namespace fbl::passes {

namespace {

using ir::NodeId;
using ir::ValueId;

// Elementwise ops the chain between the head's product and the loss may hold: they act on each
// logit alone (with a scalar or a per-class operand), so a chunk of rows computes its own rows of
// them.
bool isUnaryElementwise(std::string_view op) { return op == "Tanh" || op == "Neg" || op == "Identity"; }
bool isScalarBinary(std::string_view op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

struct Match {
  NodeId loss = ir::kNoNode, product = ir::kNoNode;
  // Elementwise nodes from the product towards the loss, each with the slot the logits come in.
  std::vector<std::pair<NodeId, size_t>> chain;
  std::vector<NodeId> reshapes;  // Reshapes of the leading axes on the way
  ValueId hidden = ir::kNoValue, head = ir::kNoValue, labels = ir::kNoValue;
  int64_t tokens = 0, vocab = 0, width = 0;
};

class Matcher {
 public:
  Matcher(const ir::Graph& g, const std::set<ValueId>& trainable)
      : g_(g), consumers_(g.consumers()), trainable_(trainable) {}

  std::optional<Match> match(NodeId id) const {
    const ir::Node& n = g_.nodes[id];
    const std::string reduction = n.attrString("reduction", "mean");
    if (n.dead || n.op != "SoftmaxCrossEntropyLoss" || n.phase != ir::Phase::Forward) return std::nullopt;
    if (reduction != "mean" && reduction != "sum") return std::nullopt;
    if (n.input(2) != ir::kNoValue || n.outputs.size() != 1) return std::nullopt;
    Match m;
    m.loss = id;
    m.labels = n.inputs[1];
    ValueId v = n.inputs[0];
    const ir::Shape& scores = g_.values[v].shape;
    if (scores.size() != 2 || g_.values[m.labels].shape != ir::Shape{scores[0]}) return std::nullopt;
    m.tokens = scores[0];
    m.vocab = scores[1];
    // Back from the scores to the product, through ops that keep each row's logits its own.
    while (true) {
      if (!readOnce(v) || g_.values[v].shape.empty() || g_.values[v].shape.back() != m.vocab) return std::nullopt;
      const NodeId p = g_.values[v].producer;
      if (p == ir::kNoNode) return std::nullopt;
      const ir::Node& pn = g_.nodes[p];
      if (pn.op == "MatMul") {
        m.product = p;
        break;
      }
      if (pn.op == "Reshape") {
        m.reshapes.push_back(p);
        v = pn.inputs[0];
      } else if (isUnaryElementwise(pn.op) && pn.inputs.size() == 1) {
        m.chain.push_back({p, 0});
        v = pn.inputs[0];
      } else if (isScalarBinary(pn.op) && pn.inputs.size() == 2 &&
                 (sameForEveryRow(pn.inputs[1], m.vocab) || sameForEveryRow(pn.inputs[0], m.vocab))) {
        const size_t slot = sameForEveryRow(pn.inputs[1], m.vocab) ? 0 : 1;
        m.chain.push_back({p, slot});
        v = pn.inputs[slot];
      } else {
        return std::nullopt;
      }
    }
    std::reverse(m.chain.begin(), m.chain.end());
    const ir::Node& product = g_.nodes[m.product];
    m.hidden = product.inputs[0];
    m.head = product.inputs[1];
    const ir::Shape& h = g_.values[m.hidden].shape;
    const ir::Shape& w = g_.values[m.head].shape;
    if (h.size() < 2 || w.size() != 2 || w[1] != m.vocab || h.back() != w[0]) return std::nullopt;
    if (ir::numElements(h) != m.tokens * w[0] || !ir::isFloat(g_.values[m.hidden].dtype)) return std::nullopt;
    m.width = w[0];
    if (dependsOnTrainable(m.head)) return std::nullopt;
    return m;
  }

 private:
  bool readOnce(ValueId v) const {
    return consumers_[v].size() == 1 && std::find(g_.outputs.begin(), g_.outputs.end(), v) == g_.outputs.end();
  }
  // A frozen operand every row of the logits sees whole: a scalar (a softcap's c) or a [V] vector
  // (an MLM head's bias), with any leading ones.
  bool sameForEveryRow(ValueId v, int64_t vocab) const {
    const ir::Value& val = g_.values[v];
    if (trainable_.count(v) || (val.kind != ir::ValueKind::Constant && val.kind != ir::ValueKind::Initializer)) return false;
    const int64_t n = ir::numElements(val.shape);
    return n == 1 || (n == vocab && !val.shape.empty() && val.shape.back() == vocab);
  }
  bool dependsOnTrainable(ValueId v) const {
    std::vector<ValueId> work{v};
    std::set<ValueId> seen;
    while (!work.empty()) {
      const ValueId x = work.back();
      work.pop_back();
      if (x == ir::kNoValue || !seen.insert(x).second) continue;
      if (trainable_.count(x)) return true;
      if (const NodeId p = g_.values[x].producer; p != ir::kNoNode)
        for (ValueId in : g_.nodes[p].inputs) work.push_back(in);
    }
    return false;
  }

  const ir::Graph& g_;
  std::vector<std::vector<NodeId>> consumers_;
  const std::set<ValueId>& trainable_;
};

// Step 2: the rewrite of one match; returns the chunk's wide values.
std::vector<ValueId> rewrite(ir::Graph& g, const Match& m, int64_t rows) {
  const ir::Node loss = g.nodes[m.loss];
  const ir::DType ft = g.values[m.hidden].dtype, st = g.values[loss.inputs[0]].dtype;
  const ir::DType lt = g.values[m.labels].dtype;
  // Step 3: every new node goes in the loss node's place, named after it.
  ir::NodeInserter e(g);
  auto one = [&](const std::string& op, std::vector<ValueId> inputs, const std::string& hint, ir::DType dtype,
                 ir::Shape shape, std::map<std::string, ir::AttrValue> attrs = {}, ValueId out = ir::kNoValue) {
    return e.one(m.loss, op, std::move(inputs), loss.name + "/" + hint, dtype, std::move(shape), std::move(attrs), out);
  };
  auto ints = [&](const std::string& hint, const std::vector<int64_t>& v) {
    return g.newConstant(loss.name + "/" + hint, ir::Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v));
  };
  // The mean divides by the labels that count: those not equal to ignore_index. Counted first, so
  // that the loss gradient's scale (seed / count) is known when the first chunk's loss is.
  const bool mean = loss.attrString("reduction", "mean") == "mean";
  ValueId count = ir::kNoValue;
  if (mean && loss.hasAttr("ignore_index")) {
    ir::Tensor ignore(lt, {});
    ignore.set(0, static_cast<double>(loss.attrInt("ignore_index", 0)));
    const ValueId ignored = one("Equal", {m.labels, g.newConstant(loss.name + "/ignore_index", ignore)}, "ignored",
                                ir::DType::Bool, {m.tokens});
    const ValueId counted = one("Not", {ignored}, "counted", ir::DType::Bool, {m.tokens});
    const ValueId ones = one("Cast", {counted}, "counted_f", st, {m.tokens}, {{"to", int64_t{static_cast<int32_t>(st)}}});
    count = one("ReduceSum", {ones, ints("count_axes", {0})}, "count", st, {}, {{"keepdims", int64_t{0}}});
  } else if (mean) {
    ir::Tensor n(st, {});
    n.set(0, static_cast<double>(m.tokens));
    count = g.newConstant(loss.name + "/count", n);
  }
  std::vector<int64_t> sizes;
  for (int64_t r = 0; r < m.tokens; r += rows) sizes.push_back(std::min(rows, m.tokens - r));
  const auto chunks = static_cast<int64_t>(sizes.size());
  ValueId hidden = m.hidden;
  if (g.values[hidden].shape.size() != 2)
    hidden = one("Reshape", {hidden, ints("rows_shape", {m.tokens, m.width})}, "rows", ft, {m.tokens, m.width});
  std::vector<std::pair<ir::DType, ir::Shape>> hiddenParts, labelParts;
  for (int64_t s : sizes) {
    hiddenParts.push_back({ft, {s, m.width}});
    labelParts.push_back({lt, {s}});
  }
  const ValueId split = ints("chunk_rows", sizes);
  const std::vector<ValueId> h =
      e.add(m.loss, "Split", {hidden, split}, loss.name + "/split_rows", hiddenParts, {{"axis", int64_t{0}}});
  const std::vector<ValueId> labels =
      e.add(m.loss, "Split", {m.labels, split}, loss.name + "/split_labels", labelParts, {{"axis", int64_t{0}}});
  std::map<std::string, ir::AttrValue> sum = loss.attrs;
  sum["reduction"] = std::string("sum");
  std::vector<ValueId> wide;
  ValueId total = ir::kNoValue;
  const ValueId out = loss.outputs[0];
  for (int64_t c = 0; c < chunks; ++c) {
    const std::string at = fmt::format("chunk{}/", c);
    const ir::Shape shape{sizes[c], m.vocab};
    const ir::Node& product = g.nodes[m.product];
    ValueId x = one("MatMul", {h[c], m.head}, at + "MatMul", g.values[product.outputs[0]].dtype, shape, product.attrs);
    wide.push_back(x);
    for (const auto& [id, slot] : m.chain) {
      const ir::Node& n = g.nodes[id];
      std::vector<ValueId> ins = n.inputs;
      ins[slot] = x;
      x = one(n.op, ins, at + n.op, g.values[n.outputs[0]].dtype, shape, n.attrs);
      wide.push_back(x);
    }
    const ValueId part = one("SoftmaxCrossEntropyLoss", {x, labels[c]}, at + "SoftmaxCrossEntropyLoss", st, {}, sum);
    // A sum's last Add is the loss itself (two chunks at least).
    total = total == ir::kNoValue ? part
                                  : one("Add", {total, part}, at + "Add", st, {}, {},
                                        !mean && c + 1 == chunks ? out : ir::kNoValue);
  }
  if (mean) one("Div", {total, count}, "mean", st, {}, {}, out);
  g.nodes[m.loss].dead = true;
  g.nodes[m.product].dead = true;
  for (const auto& [id, slot] : m.chain) g.nodes[id].dead = true;
  for (NodeId id : m.reshapes) g.nodes[id].dead = true;
  e.finish();
  return wide;
}

}  // namespace

Result<int64_t> parseLossChunkRows(const std::string& text) {
  if (text == "auto") return int64_t{-1};
  char* end = nullptr;
  const long long rows = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || rows < 0)
    return makeError("--loss-chunk-rows '{}' is not auto, 0 (the whole logits) or a number of rows", text);
  return static_cast<int64_t>(rows);
}

Result<bool> ChunkLoss::run(ir::Graph& g) {
  chunked_.clear();
  if (rows == 0) return false;
  std::set<ValueId> trainable;
  if (!trainableGlobs.empty())
    if (auto t = autodiff::selectTrainables(g, trainableGlobs); t.ok()) trainable.insert(t->begin(), t->end());
  bool changed = false;
  std::optional<Matcher> matcher(std::in_place, g, trainable);
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const std::optional<Match> m = matcher->match(id);
    if (!m) continue;
    const auto logitBytes = static_cast<int64_t>(ir::dtypeSize(g.values[g.nodes[id].inputs[0]].dtype)) * m->vocab;
    const int64_t r = rows > 0 ? rows
                               : std::max(kLossChunkRowMultiple,
                                          kLossChunkBytes / logitBytes / kLossChunkRowMultiple * kLossChunkRowMultiple);
    if (m->tokens <= r) continue;
    Chunked c;
    c.loss = g.nodes[id].name;
    c.rows = r;
    c.chunks = (m->tokens + r - 1) / r;
    c.tokens = m->tokens;
    c.vocab = m->vocab;
    c.wide = rewrite(g, *m, r);
    chunked_.push_back(std::move(c));
    changed = true;
    matcher.emplace(g, trainable);
    id = -1;  // node ids moved; the chunks' own losses hold at most `r` rows and do not match again
  }
  return changed;
}

void ChunkLoss::addWide(ir::ValueId of, ir::ValueId part) {
  for (Chunked& c : chunked_)
    if (std::find(c.wide.begin(), c.wide.end(), of) != c.wide.end()) c.wide.push_back(part);
}

std::string ChunkLoss::summary() const {
  std::string s;
  for (const Chunked& c : chunked_)
    s += fmt::format("{}{} in {} chunks of {} rows ({} x {} logits)", s.empty() ? "" : "; ", c.loss, c.chunks, c.rows,
                     c.tokens, c.vocab);
  return s;
}

Result<bool> ScheduleLossChunks::run(ir::Graph& g) {
  moved_ = 0;
  if (chunks_.chunked().empty()) return false;
  g.compact();
  const auto count = static_cast<NodeId>(g.nodes.size());
  // Step 4: the backward nodes that read a wide value, and the backward nodes they need.
  std::set<ir::Shape> wideShapes;
  std::vector<bool> wide(g.values.size(), false);
  for (const ChunkLoss::Chunked& c : chunks_.chunked())
    for (ValueId v : c.wide) {
      wide[v] = true;
      wideShapes.insert(g.values[v].shape);
    }
  std::vector<bool> move(g.nodes.size(), false);
  for (NodeId id = 0; id < count; ++id) {
    ir::Node& n = g.nodes[id];
    if (n.phase != ir::Phase::Backward) continue;
    for (ValueId in : n.inputs) move[id] = move[id] || (in != ir::kNoValue && wide[in]);
    if (!move[id]) continue;
    for (ValueId out : n.outputs)
      if (out != ir::kNoValue && wideShapes.count(g.values[out].shape)) wide[out] = true;
  }
  for (NodeId id = count - 1; id >= 0; --id) {
    if (!move[id]) continue;
    for (ValueId in : g.nodes[id].inputs) {
      const NodeId p = in == ir::kNoValue ? ir::kNoNode : g.values[in].producer;
      if (p != ir::kNoNode && g.nodes[p].phase == ir::Phase::Backward) move[p] = true;
    }
  }
  // Each moved node right after the last producer of its inputs that stays (-1: before all).
  std::vector<NodeId> anchor(g.nodes.size(), -1);
  std::map<NodeId, std::vector<NodeId>> after;
  for (NodeId id = 0; id < count; ++id) {
    if (!move[id]) continue;
    for (ValueId in : g.nodes[id].inputs) {
      const NodeId p = in == ir::kNoValue ? ir::kNoNode : g.values[in].producer;
      if (p != ir::kNoNode) anchor[id] = std::max(anchor[id], move[p] ? anchor[p] : p);
    }
    after[anchor[id]].push_back(id);
    ++moved_;
  }
  if (moved_ == 0) return false;
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  auto place = [&](NodeId at) {
    auto it = after.find(at);
    if (it == after.end()) return;
    for (NodeId id : it->second) {
      g.nodes[id].phase = ir::Phase::Forward;  // step 5
      nodes.push_back(std::move(g.nodes[id]));
    }
  };
  place(-1);
  for (NodeId id = 0; id < count; ++id) {
    if (move[id]) continue;
    nodes.push_back(std::move(g.nodes[id]));
    place(id);
  }
  g.nodes = std::move(nodes);
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id)
    for (ValueId out : g.nodes[id].outputs)
      if (out != ir::kNoValue) g.values[out].producer = id;
  // Reuse edges (Value::reusedByBackward) follow: what the backward still reads of the forward.
  std::vector<bool> readByBackward(g.values.size(), false);
  for (const ir::Node& n : g.nodes)
    if (n.phase == ir::Phase::Backward)
      for (ValueId in : n.inputs)
        if (in != ir::kNoValue) readByBackward[in] = true;
  for (size_t v = 0; v < g.values.size(); ++v) {
    ir::Value& val = g.values[v];
    const bool forward = val.kind == ir::ValueKind::Input || val.kind == ir::ValueKind::Initializer ||
                         (val.producer != ir::kNoNode && g.nodes[val.producer].phase == ir::Phase::Forward);
    val.reusedByBackward = forward && val.kind != ir::ValueKind::Constant && readByBackward[v];
  }
  return true;
}

}  // namespace fbl::passes
