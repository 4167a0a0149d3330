// Inserting nodes into a graph that must stay in topological order: each new node goes right
// before an existing one, so a rewrite builds its replacement where the old nodes stood. Used by
// the rewrites that add many nodes at once (chunk-loss, split-rows, recompute's clones).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"

namespace fbl::ir {

// Puts each list of `before[id]` right before node `id` (id == nodes.size(): at the end), in list
// order, then drops dead nodes; every producer is renumbered.
void insertBefore(Graph& g, std::map<NodeId, std::vector<Node>> before);

// Builds nodes for insertBefore: each output a new value named after the node, with its static
// shape, or a value that already exists (the node takes over its producer's place).
class NodeInserter {
 public:
  explicit NodeInserter(Graph& g) : g_(g) {}

  // A node placed before `at`, named uniquely after `name`; returns its outputs.
  std::vector<ValueId> add(NodeId at, const std::string& op, std::vector<ValueId> inputs, std::string_view name,
                           const std::vector<std::pair<DType, Shape>>& outs, std::map<std::string, AttrValue> attrs = {});
  // One output; `out` (optional) is the existing value it computes.
  ValueId one(NodeId at, const std::string& op, std::vector<ValueId> inputs, std::string_view name, DType dtype,
              Shape shape, std::map<std::string, AttrValue> attrs = {}, ValueId out = kNoValue);
  // insertBefore with every node added so far.
  void finish() { insertBefore(g_, std::move(before_)); }

 private:
  Node start(const std::string& op, std::vector<ValueId> inputs, std::string_view name,
             std::map<std::string, AttrValue> attrs);
  std::vector<ValueId> place(NodeId at, Node n);

  Graph& g_;
  std::map<NodeId, std::vector<Node>> before_;
};

}  // namespace fbl::ir
