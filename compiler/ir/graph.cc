#include "compiler/ir/graph.h"

#include <fmt/format.h>

namespace fbl::ir {

namespace {
template <typename T>
const T* findAttr(const Node& n, std::string_view k) {
  auto it = n.attrs.find(std::string(k));
  if (it == n.attrs.end()) return nullptr;
  return std::get_if<T>(&it->second);
}
}  // namespace

int64_t Node::attrInt(std::string_view k, int64_t dflt) const {
  if (auto* v = findAttr<int64_t>(*this, k)) return *v;
  return dflt;
}
float Node::attrFloat(std::string_view k, float dflt) const {
  if (auto* v = findAttr<float>(*this, k)) return *v;
  if (auto* v = findAttr<int64_t>(*this, k)) return static_cast<float>(*v);
  return dflt;
}
std::string Node::attrString(std::string_view k, std::string_view dflt) const {
  if (auto* v = findAttr<std::string>(*this, k)) return *v;
  return std::string(dflt);
}
std::vector<int64_t> Node::attrInts(std::string_view k, std::vector<int64_t> dflt) const {
  if (auto* v = findAttr<std::vector<int64_t>>(*this, k)) return *v;
  return dflt;
}
std::vector<float> Node::attrFloats(std::string_view k, std::vector<float> dflt) const {
  if (auto* v = findAttr<std::vector<float>>(*this, k)) return *v;
  return dflt;
}
const Tensor* Node::attrTensor(std::string_view k) const { return findAttr<Tensor>(*this, k); }

ValueId Graph::addValue(Value v) {
  ValueId id = static_cast<ValueId>(values.size());
  if (!v.name.empty()) byName_.emplace(v.name, id);
  values.push_back(std::move(v));
  return id;
}

NodeId Graph::addNode(Node n) {
  NodeId id = static_cast<NodeId>(nodes.size());
  for (ValueId o : n.outputs)
    if (o != kNoValue) values[o].producer = id;
  nodes.push_back(std::move(n));
  return id;
}

std::string Graph::uniqueName(std::string_view hint) {
  std::string base(hint.empty() ? "t" : hint);
  if (byName_.find(base) == byName_.end()) return base;
  for (;;) {
    std::string cand = fmt::format("{}__{}", base, nameCounter_++);
    if (byName_.find(cand) == byName_.end()) return cand;
  }
}

ValueId Graph::newValue(std::string_view hint, DType dtype, Shape shape, bool shapeKnown) {
  Value v;
  v.name = uniqueName(hint);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.shapeKnown = shapeKnown;
  return addValue(std::move(v));
}

ValueId Graph::newConstant(std::string_view hint, Tensor t) {
  Value v;
  v.name = uniqueName(hint);
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.shapeKnown = true;
  v.kind = ValueKind::Constant;
  v.data = std::make_shared<const Tensor>(std::move(t));
  return addValue(std::move(v));
}

ValueId Graph::findValue(std::string_view name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? kNoValue : it->second;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> out(values.size());
  for (NodeId i = 0; i < static_cast<NodeId>(nodes.size()); ++i) {
    if (nodes[i].dead) continue;
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue) out[v].push_back(i);
  }
  return out;
}

void Graph::compact() {
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (auto& n : nodes)
    if (!n.dead) kept.push_back(std::move(n));
  nodes = std::move(kept);
  for (auto& v : values) v.producer = kNoNode;
  for (NodeId i = 0; i < static_cast<NodeId>(nodes.size()); ++i)
    for (ValueId o : nodes[i].outputs)
      if (o != kNoValue) values[o].producer = i;
}

std::vector<bool> Graph::liveValues() const {
  std::vector<bool> live(values.size(), false);
  for (ValueId v : inputs) live[v] = true;
  for (ValueId v : outputs) live[v] = true;
  for (const StateUpdate& u : stateUpdates) live[u.state] = live[u.updated] = true;
  for (const auto& n : nodes) {
    if (n.dead) continue;
    for (ValueId v : n.inputs)
      if (v != kNoValue) live[v] = true;
    for (ValueId v : n.outputs)
      if (v != kNoValue) live[v] = true;
  }
  return live;
}

size_t Graph::liveNodeCount() const {
  size_t c = 0;
  for (const auto& n : nodes) c += n.dead ? 0 : 1;
  return c;
}

std::string describeNode(const Graph& g, const Node& n) {
  std::string file = g.sourcePath.empty() ? g.name : g.sourcePath;
  return fmt::format("{}: node '{}' ({})", file, n.name, n.op);
}

}  // namespace fbl::ir
