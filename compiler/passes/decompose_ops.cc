// decompose-ops:
//   1. Resize's sampling is computed first: an unsupported one fails before anything moves.
//   2. Walk the live nodes in order, copying each into a new node list; a Tile, Clip, Resize,
//      ReduceL2 or 1-D Conv is replaced there by its decomposition, so the list stays
//      topologically ordered.
//   3. Every node's outputs get their producers again (ids move when a node becomes several).
// One pass over the nodes: linear in the graph's size.
#include "compiler/passes/decompose_ops.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "compiler/ops/conv_1d.h"
#include "compiler/ops/resize_sampling.h"

namespace fbl::passes {

namespace {

// A node in `like`'s phase (its attributes not carried) with another op, name, inputs and output.
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

// ReduceL2 as Sqrt(ReduceSum(x * x)), the ReduceSum with ReduceL2's axes (input or attribute)
// and keepdims: each of the three has a kernel and a gradient (DoRA's weight norm).
std::vector<ir::Node> decomposeReduceL2(ir::Graph& g, const ir::Node& n) {
  const ir::Value x = g.values[n.inputs[0]];
  const ir::ValueId out = n.outputs[0];
  const ir::ValueId squares = g.newValue(n.name + "/squares", x.dtype, x.shape, true);
  const ir::ValueId sum = g.newValue(n.name + "/sum_of_squares", x.dtype, g.values[out].shape, true);
  ir::Node reduce = derived(n, "ReduceSum", n.name + "/sum_of_squares", n.inputs, sum);
  reduce.inputs[0] = squares;
  reduce.attrs = n.attrs;
  return {derived(n, "Mul", n.name + "/squares", {n.inputs[0], n.inputs[0]}, squares), std::move(reduce),
          derived(n, "Sqrt", n.name, {sum}, out)};
}

// A 1-D Conv as Unsqueeze(x), Unsqueeze(w), the 2-D Conv of height 1 (ops/conv_1d.h), Squeeze:
// the 2-D Conv's kernels, layouts and gradient rule serve it, and the views cost no kernel.
std::vector<ir::Node> decomposeConv1d(ir::Graph& g, const ir::Node& n) {
  const ir::ValueId out = n.outputs[0];
  const ir::ValueId axis = intsConstant(g, n.name + "/height_axis", {2});
  std::vector<ir::Node> nodes;
  ir::Node conv = ops::conv1dAs2d(n);
  conv.name = n.name + "/conv2d";
  for (size_t i = 0; i < 2; ++i) {
    const ir::Value v = g.values[n.inputs[i]];
    ir::Shape s = v.shape;
    s.insert(s.begin() + 2, 1);
    const std::string name = n.name + (i == 0 ? "/input_2d" : "/weight_2d");
    const ir::ValueId u = g.newValue(name, v.dtype, s, true);
    nodes.push_back(derived(n, "Unsqueeze", name, {n.inputs[i], axis}, u));
    conv.inputs[i] = u;
  }
  ir::Shape y = g.values[out].shape;
  y.insert(y.begin() + 2, 1);
  const ir::ValueId y2 = g.newValue(n.name + "/conv2d", g.values[out].dtype, y, true);
  conv.outputs = {y2};
  nodes.push_back(std::move(conv));
  nodes.push_back(derived(n, "Squeeze", n.name, {y2, axis}, out));
  return nodes;
}

// Resize, one sampled axis at a time (ops/resize_sampling.h): nearest is a Gather of the chosen
// elements; linear is Gather(index0) * (1 - w) + Gather(index1) * w, w broadcast over the later
// axes. An axis sampled as the identity costs nothing; no such axis at all leaves an Identity.
Result<std::vector<ir::Node>> decomposeResize(ir::Graph& g, const ir::Node& n) {
  auto contents = [&](size_t i) -> const ir::Tensor* {
    const ir::ValueId v = n.input(i);
    return v == ir::kNoValue ? nullptr : g.values[v].data.get();
  };
  const ir::ValueId x = n.inputs[0], out = n.outputs[0];
  const ir::DType dt = g.values[x].dtype;
  auto sampling = ops::resizeSampling(n, g.values[x].shape, contents(2), contents(3));
  if (!sampling.ok()) return makeError("{}: {}", ir::describeNode(g, n), sampling.error().message);
  if (sampling->axes.empty()) return std::vector<ir::Node>{derived(n, "Identity", n.name, {x}, out)};
  std::vector<ir::Node> nodes;
  ir::ValueId cur = x;
  ir::Shape shape = g.values[x].shape;
  for (size_t k = 0; k < sampling->axes.size(); ++k) {
    const ops::ResizeAxis& ax = sampling->axes[k];
    const bool last = k + 1 == sampling->axes.size();
    const std::string at = fmt::format("{}/axis{}", n.name, ax.axis);
    const int64_t len = static_cast<int64_t>(ax.index0.size());
    shape[ax.axis] = len;
    auto gather = [&](const std::vector<int64_t>& index, const std::string& name, bool final) {
      const ir::ValueId v = final ? out : g.newValue(name, dt, shape, true);
      ir::Node gn = derived(n, "Gather", final ? n.name : name, {cur, intsConstant(g, name + "_index", index)}, v);
      gn.attrs["axis"] = ax.axis;
      nodes.push_back(std::move(gn));
      return v;
    };
    if (ax.index1.empty()) {
      cur = gather(ax.index0, at + "/nearest", last);
      continue;
    }
    ir::Shape wshape{len};
    wshape.resize(shape.size() - static_cast<size_t>(ax.axis), 1);
    ir::Tensor w0(dt, wshape), w1(dt, wshape);
    for (int64_t o = 0; o < len; ++o) {
      w0.set(o, 1.0 - ax.weight1[o]);
      w1.set(o, ax.weight1[o]);
    }
    const ir::ValueId lo = gather(ax.index0, at + "/lower", false), hi = gather(ax.index1, at + "/upper", false);
    const ir::ValueId loW = g.newValue(at + "/lower_weighted", dt, shape, true);
    const ir::ValueId hiW = g.newValue(at + "/upper_weighted", dt, shape, true);
    nodes.push_back(derived(n, "Mul", at + "/lower_weighted", {lo, g.newConstant(at + "/lower_weight", std::move(w0))}, loW));
    nodes.push_back(derived(n, "Mul", at + "/upper_weighted", {hi, g.newConstant(at + "/upper_weight", std::move(w1))}, hiW));
    const ir::ValueId sum = last ? out : g.newValue(at + "/linear", dt, shape, true);
    nodes.push_back(derived(n, "Add", last ? n.name : at + "/linear", {loW, hiW}, sum));
    cur = sum;
  }
  return nodes;
}

}  // namespace

Result<bool> DecomposeOps::run(ir::Graph& g) {
  rewritten_ = 0;
  auto isConv1d = [&](const ir::Node& n) {
    return n.op == "Conv" && n.inputs.size() >= 2 &&
           ops::isConv1d(g.values[n.inputs[0]].shape, g.values[n.inputs[1]].shape);
  };
  auto decomposed = [&](const ir::Node& n) {
    return !n.dead && (n.op == "Tile" || n.op == "Clip" || n.op == "Resize" || n.op == "ReduceL2" || isConv1d(n));
  };
  // Resize's sampling is checked before anything moves, so an error leaves the graph as it was.
  std::map<const ir::Node*, std::vector<ir::Node>> resizes;
  for (const ir::Node& n : g.nodes)
    if (decomposed(n) && n.op == "Resize") { FBL_ASSIGN(resizes[&n], decomposeResize(g, n)); }
  for (const ir::Node& n : g.nodes)
    if (decomposed(n) && isConv1d(n) && g.values[n.outputs[0]].shape.size() != 3)
      return makeError("{}: the output's shape is not inferred; decompose-ops runs after fold-and-infer",
                       ir::describeNode(g, n));
  if (std::none_of(g.nodes.begin(), g.nodes.end(), decomposed)) return false;
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  for (ir::Node& n : g.nodes) {
    if (!decomposed(n)) {
      nodes.push_back(std::move(n));
      continue;
    }
    std::vector<ir::Node> parts = n.op == "Tile"       ? decomposeTile(g, n)
                                  : n.op == "Clip"     ? decomposeClip(g, n)
                                  : n.op == "ReduceL2" ? decomposeReduceL2(g, n)
                                  : n.op == "Conv"     ? decomposeConv1d(g, n)
                                                       : std::move(resizes.at(&n));
    for (ir::Node& p : parts) nodes.push_back(std::move(p));
    ++rewritten_;
  }
  g.nodes = std::move(nodes);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ir::ValueId o : g.nodes[i].outputs)
      if (o != ir::kNoValue) g.values[o].producer = static_cast<ir::NodeId>(i);
  return true;
}

}  // namespace fbl::passes
