#include "compiler/ir/graph_edit.h"

namespace fbl::ir {

void insertBefore(Graph& g, std::map<NodeId, std::vector<Node>> before) {
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  const auto count = static_cast<NodeId>(g.nodes.size());
  for (NodeId id = 0; id <= count; ++id) {
    if (auto it = before.find(id); it != before.end())
      for (Node& n : it->second) nodes.push_back(std::move(n));
    if (id < count) nodes.push_back(std::move(g.nodes[id]));
  }
  g.nodes = std::move(nodes);
  g.compact();
}

Node NodeInserter::start(const std::string& op, std::vector<ValueId> inputs, std::string_view name,
                         std::map<std::string, AttrValue> attrs) {
  Node n;
  n.op = op;
  n.name = g_.uniqueName(name);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  return n;
}

std::vector<ValueId> NodeInserter::place(NodeId at, Node n) {
  std::vector<Node>& list = before_[at];
  list.push_back(std::move(n));
  return list.back().outputs;
}

std::vector<ValueId> NodeInserter::add(NodeId at, const std::string& op, std::vector<ValueId> inputs, std::string_view name,
                                       const std::vector<std::pair<DType, Shape>>& outs,
                                       std::map<std::string, AttrValue> attrs) {
  Node n = start(op, std::move(inputs), name, std::move(attrs));
  for (const auto& [dtype, shape] : outs) n.outputs.push_back(g_.newValue(n.name, dtype, shape, /*shapeKnown=*/true));
  return place(at, std::move(n));
}

ValueId NodeInserter::one(NodeId at, const std::string& op, std::vector<ValueId> inputs, std::string_view name,
                          DType dtype, Shape shape, std::map<std::string, AttrValue> attrs, ValueId out) {
  if (out == kNoValue) return add(at, op, std::move(inputs), name, {{dtype, std::move(shape)}}, std::move(attrs))[0];
  Node n = start(op, std::move(inputs), name, std::move(attrs));
  n.outputs = {out};
  return place(at, std::move(n))[0];
}

}  // namespace fbl::ir
