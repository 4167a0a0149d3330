// decompose-ops:
//   1. Walk the live nodes in order, copying each into a new node list; a Tile or Clip is
//      replaced there by its decomposition, so the list stays topologically ordered.
//   2. Every node's outputs get their producers again (ids move when a node becomes several).
// One pass over the nodes: linear in the graph's size.
#include "compiler/passes/decompose_ops.h"

namespace fbl::passes {

namespace {

// A copy of `like` (its phase and attributes dropped) with another op, name, inputs and output.
ir::Node derived(const ir::Node& like, std::string op, std::string name, std::vector<ir::ValueId> inputs,
                 ir::ValueId output) {
  ir::Node n;
  n.op = std::move(op);
  n.name = std::move(name);
  n.inputs = std::move(inputs);
  n.outputs = {output};
  n.phase = like.phase;
  return n;
}

ir::ValueId intsConstant(ir::Graph& g, const std::string& hint, const std::vector<int64_t>& v) {
  return g.newConstant(hint, ir::Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v));
}

// Tile as Reshape -> Expand -> Reshape: an axis of size d repeated r times becomes [1, d],
// broadcast to [r, d], then merged back into r * d. Axes with r = 1 stay as they are. Tile's
// shape rule has made the repeats a constant with one entry per axis.
std::vector<ir::Node> decomposeTile(ir::Graph& g, const ir::Node& n) {
  const ir::Value x = g.values[n.inputs[0]];  // a copy: newValue below grows the vector
  const std::vector<int64_t> r = g.values[n.inputs[1]].data->toInt64s();
  std::vector<int64_t> unit, expanded;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (r[d] != 1) {
      unit.push_back(1);
      expanded.push_back(r[d]);
    }
    unit.push_back(x.shape[d]);
    expanded.push_back(x.shape[d]);
  }
  const ir::ValueId out = n.outputs[0];
  if (unit == x.shape) return std::vector<ir::Node>{derived(n, "Identity", n.name, {n.inputs[0]}, out)};
  const ir::ValueId u = g.newValue(n.name + "/unit", x.dtype, unit, true);
  const ir::ValueId e = g.newValue(n.name + "/expanded", x.dtype, expanded, true);
  std::vector<ir::Node> nodes;
  nodes.push_back(derived(n, "Reshape", n.name + "/unit", {n.inputs[0], intsConstant(g, n.name + "/unit_shape", unit)}, u));
  nodes.push_back(derived(n, "Expand", n.name + "/expand", {u, intsConstant(g, n.name + "/repeats", expanded)}, e));
  nodes.push_back(derived(n, "Reshape", n.name, {e, intsConstant(g, n.name + "/shape", g.values[out].shape)}, out));
  return nodes;
}

// Clip as Max(x, min) then Min(., max), each only where its bound is given.
std::vector<ir::Node> decomposeClip(ir::Graph& g, const ir::Node& n) {
  const ir::ValueId lo = n.input(1), hi = n.input(2), out = n.outputs[0];
  if (lo == ir::kNoValue && hi == ir::kNoValue) return {derived(n, "Identity", n.name, {n.inputs[0]}, out)};
  if (hi == ir::kNoValue) return {derived(n, "Max", n.name, {n.inputs[0], lo}, out)};
  if (lo == ir::kNoValue) return {derived(n, "Min", n.name, {n.inputs[0], hi}, out)};
  const ir::ValueId floored =
      g.newValue(n.name + "/max", g.values[n.inputs[0]].dtype, g.values[n.inputs[0]].shape, true);
  return {derived(n, "Max", n.name + "/max", {n.inputs[0], lo}, floored), derived(n, "Min", n.name, {floored, hi}, out)};
}

}  // namespace

Result<bool> DecomposeOps::run(ir::Graph& g) {
  rewritten_ = 0;
  bool any = false;
  for (const ir::Node& n : g.nodes) any = any || (!n.dead && (n.op == "Tile" || n.op == "Clip"));
  if (!any) return false;
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  for (ir::Node& n : g.nodes) {
    if (n.dead || (n.op != "Tile" && n.op != "Clip")) {
      nodes.push_back(std::move(n));
      continue;
    }
    for (ir::Node& p : n.op == "Tile" ? decomposeTile(g, n) : decomposeClip(g, n)) nodes.push_back(std::move(p));
    ++rewritten_;
  }
  g.nodes = std::move(nodes);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ir::ValueId o : g.nodes[i].outputs)
      if (o != ir::kNoValue) g.values[o].producer = static_cast<ir::NodeId>(i);
  return true;
}

}  // namespace fbl::passes
