// decompose-ops:
//   1. Resize's sampling and the pools' windows are computed first: an unsupported one fails
//      before anything moves. A Conv's auto_pad SAME_* becomes explicit pads.
//   2. Walk the live nodes in order, copying each into a new node list; a Tile, Clip, Resize,
//      ReduceL2, 1-D Conv, Instance/BatchNormalization or pool is replaced there by its
//      decomposition, so the list stays topologically ordered.
//   3. Every node's outputs get their producers again (ids move when a node becomes several).
// One pass over the nodes: linear in the graph's size.
#include "compiler/passes/decompose_ops.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "compiler/ops/conv_1d.h"
#include "compiler/ops/pooling.h"
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

ir::Tensor filled(ir::DType dt, const ir::Shape& shape, double v) {
  ir::Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, v);
  return t;
}

// Per-channel values [C] as [C, 1, ...], to broadcast against X [N, C, d1..]: a Reshape, a view
// that keeps a trainable scale or bias differentiable.
ir::ValueId perChannel(ir::Graph& g, std::vector<ir::Node>& nodes, const ir::Node& n, ir::ValueId v, size_t rank,
                       const std::string& name) {
  ir::Shape s(rank - 1, 1);
  s[0] = g.values[v].shape[0];
  const ir::ValueId r = g.newValue(name, g.values[v].dtype, s, true);
  nodes.push_back(derived(n, "Reshape", name, {v, intsConstant(g, name + "/shape", s)}, r));
  return r;
}

// A compile-time constant (not a parameter, which may train) whose every element is `x`.
bool constantOf(const ir::Graph& g, ir::ValueId v, double x) {
  const ir::Value& val = g.values[v];
  if (val.kind != ir::ValueKind::Constant || !val.data) return false;
  for (int64_t i = 0; i < val.data->numel(); ++i)
    if (val.data->at(i) != x) return false;
  return true;
}

// y * scale + bias per channel, each step left out where it is the identity (the unit scale and
// zero bias the exporter gives the InstanceNormalization inside a GroupNorm).
void channelAffine(ir::Graph& g, std::vector<ir::Node>& nodes, const ir::Node& n, ir::ValueId y, ir::ValueId scale,
                   ir::ValueId bias, ir::ValueId out) {
  const ir::Value x = g.values[y];
  const bool scaled = !constantOf(g, scale, 1.0), biased = !constantOf(g, bias, 0.0);
  if (scaled) {
    const ir::ValueId s = perChannel(g, nodes, n, scale, x.shape.size(), n.name + "/scale");
    const ir::ValueId v = biased ? g.newValue(n.name + "/scaled", x.dtype, x.shape, true) : out;
    nodes.push_back(derived(n, "Mul", biased ? n.name + "/scaled" : n.name, {y, s}, v));
    y = v;
  }
  if (biased) {
    const ir::ValueId b = perChannel(g, nodes, n, bias, x.shape.size(), n.name + "/bias");
    nodes.push_back(derived(n, "Add", n.name, {y, b}, out));
  }
  if (!scaled && !biased) nodes.push_back(derived(n, "Identity", n.name, {y}, out));
}

// InstanceNormalization(X [N, C, d1..], scale, B) as LayerNormalization over axes 2.. with a
// unit scale, then the per-channel affine: one normalization kernel, and LayerNormalization's
// fused gradient.
std::vector<ir::Node> decomposeInstanceNorm(ir::Graph& g, const ir::Node& n) {
  const ir::Value x = g.values[n.inputs[0]];
  std::vector<ir::Node> nodes;
  const ir::Shape normalized(x.shape.begin() + 2, x.shape.end());
  const ir::ValueId ones = g.newConstant(n.name + "/unit_scale", filled(x.dtype, normalized, 1.0));
  const ir::ValueId y = g.newValue(n.name + "/normalized", x.dtype, x.shape, true);
  ir::Node ln = derived(n, "LayerNormalization", n.name + "/normalized", {n.inputs[0], ones}, y);
  ln.attrs["axis"] = int64_t{2};
  ln.attrs["epsilon"] = n.attrFloat("epsilon", 1e-5f);
  nodes.push_back(std::move(ln));
  channelAffine(g, nodes, n, y, n.inputs[1], n.inputs[2], n.outputs[0]);
  return nodes;
}

// PyTorch refuses a train-mode BatchNorm with one value per channel: its unbiased variance, the
// running variance's update, divides by n - 1.
Status checkBatchNorm(const ir::Graph& g, const ir::Node& n) {
  const ir::Shape& x = g.values[n.inputs[0]].shape;
  if (n.attrInt("training_mode", 0) == 0 || x.size() < 2 || x[1] < 1) return Status::success();
  if (ir::numElements(x) / x[1] <= 1)
    return makeError("{}: BatchNormalization in training mode needs more than one value per channel, and {} has one "
                     "(PyTorch refuses it too)", ir::describeNode(g, n), ir::shapeToString(x));
  return Status::success();
}

// BatchNormalization(X [N, C, d1..], scale, B, mean, var).
// Training mode: the batch's statistics over every axis but C, as PyTorch computes them: X with C
// moved first, LayerNormalization over the rest with a unit scale, C moved back, then the
// per-channel affine. LayerNormalization's fused gradient keeps the statistics' terms in one
// kernel: an op-by-op backward (ReduceMean, Sub, Mul, Sqrt, Div) rounds each term to fp32
// before they cancel. Used running-statistics outputs are input * momentum + batch *
// (1 - momentum), as ONNX defines them, from the batch's mean and biased variance; initializer
// running statistics are updated as PyTorch updates them (below).
// Inference mode: a per-channel affine, a = scale / Sqrt(var + eps), Y = X * a + (B - mean * a).
std::vector<ir::Node> decomposeBatchNorm(ir::Graph& g, const ir::Node& n) {
  const ir::Value x = g.values[n.inputs[0]];
  const size_t rank = x.shape.size();
  const ir::ValueId out = n.outputs[0];
  const ir::DType dt = x.dtype;
  std::vector<ir::Node> nodes;
  auto node = [&](const std::string& op, const std::string& suffix, std::vector<ir::ValueId> ins, const ir::Shape& s) {
    const ir::ValueId v = g.newValue(n.name + "/" + suffix, dt, s, true);
    nodes.push_back(derived(n, op, n.name + "/" + suffix, std::move(ins), v));
    return v;
  };
  const float epsilon = n.attrFloat("epsilon", 1e-5f);
  const ir::ValueId eps = g.newConstant(n.name + "/epsilon", filled(dt, {}, epsilon));
  const ir::Shape channels{x.shape[1]};
  if (n.attrInt("training_mode", 0) == 0) {
    const ir::ValueId sd = node("Sqrt", "std", {node("Add", "var_eps", {n.inputs[4], eps}, channels)}, channels);
    const ir::ValueId a = node("Div", "a", {n.inputs[1], sd}, channels);
    const ir::ValueId b = node("Sub", "b", {n.inputs[2], node("Mul", "mean_a", {n.inputs[3], a}, channels)}, channels);
    const ir::ValueId scaled = node("Mul", "scaled", {n.inputs[0], perChannel(g, nodes, n, a, rank, n.name + "/a_c")}, x.shape);
    nodes.push_back(derived(n, "Add", n.name, {scaled, perChannel(g, nodes, n, b, rank, n.name + "/b_c")}, out));
    return nodes;
  }
  // [N, C, d..] -> [C, N, d..]: the swap is its own inverse.
  std::vector<int64_t> swap(rank);
  for (size_t d = 0; d < rank; ++d) swap[d] = static_cast<int64_t>(d);
  std::swap(swap[0], swap[1]);
  ir::Shape channelFirst = x.shape;
  std::swap(channelFirst[0], channelFirst[1]);
  auto transpose = [&](ir::ValueId v, const std::string& suffix, const ir::Shape& s) {
    const ir::ValueId t = g.newValue(n.name + "/" + suffix, dt, s, true);
    ir::Node tn = derived(n, "Transpose", n.name + "/" + suffix, {v}, t);
    tn.attrs["perm"] = swap;
    nodes.push_back(std::move(tn));
    return t;
  };
  const ir::ValueId xc = transpose(n.inputs[0], "channel_first", channelFirst);
  const ir::Shape normalized(channelFirst.begin() + 1, channelFirst.end());
  const ir::ValueId ones = g.newConstant(n.name + "/unit_scale", filled(dt, normalized, 1.0));
  const ir::ValueId yc = g.newValue(n.name + "/normalized_channel_first", dt, channelFirst, true);
  ir::Node ln = derived(n, "LayerNormalization", n.name + "/normalized_channel_first", {xc, ones}, yc);
  ln.attrs["axis"] = int64_t{1};
  ln.attrs["epsilon"] = epsilon;
  nodes.push_back(std::move(ln));
  channelAffine(g, nodes, n, transpose(yc, "normalized", x.shape), n.inputs[1], n.inputs[2], out);
  const float momentum = n.attrFloat("momentum", 0.9f);
  const ir::ValueId keep = g.newConstant(n.name + "/momentum", filled(dt, {}, momentum));
  const ir::ValueId take = g.newConstant(n.name + "/one_minus_momentum", filled(dt, {}, 1.0 - momentum));
  // The batch's mean and biased variance per channel, [C], over the channel-first copy's rows.
  std::vector<int64_t> rows;
  for (size_t d = 1; d < rank; ++d) rows.push_back(static_cast<int64_t>(d));
  ir::Shape stat(rank, 1);
  stat[0] = x.shape[1];
  auto mean = [&](ir::ValueId v, const std::string& suffix) {
    ir::Node r = derived(n, "ReduceMean", n.name + "/" + suffix, {v, intsConstant(g, n.name + "/" + suffix + "_axes", rows)},
                         g.newValue(n.name + "/" + suffix, dt, stat, true));
    r.attrs["keepdims"] = int64_t{1};
    nodes.push_back(r);
    return r.outputs[0];
  };
  ir::ValueId batchMean = ir::kNoValue, batchVar = ir::kNoValue;
  auto batchStatistics = [&] {
    if (batchMean != ir::kNoValue) return;
    const ir::ValueId mu = mean(xc, "batch_mean");
    const ir::ValueId d = node("Sub", "centered", {xc, mu}, channelFirst);
    const ir::ValueId var = mean(node("Mul", "squares", {d, d}, channelFirst), "batch_var");
    const ir::ValueId shape = intsConstant(g, n.name + "/channels", {x.shape[1]});
    batchMean = node("Reshape", "batch_mean_c", {mu, shape}, channels);
    batchVar = node("Reshape", "batch_var_c", {var, shape}, channels);
  };
  // running * momentum + batch * (1 - momentum), into `out` or a new value.
  auto blend = [&](ir::ValueId running, ir::ValueId batch, const std::string& what, ir::ValueId out) {
    const ir::ValueId old = node("Mul", what + "/kept", {running, keep}, channels);
    const ir::ValueId fresh = node("Mul", what + "/taken", {batch, take}, channels);
    if (out == ir::kNoValue) return node("Add", what, {old, fresh}, channels);
    nodes.push_back(derived(n, "Add", n.name + "/" + what, {old, fresh}, out));
    return out;
  };
  // The running-statistics outputs, where the graph reads them, as ONNX defines them (biased).
  for (size_t i : {1, 2}) {
    const ir::ValueId o = i < n.outputs.size() ? n.outputs[i] : ir::kNoValue;
    if (o == ir::kNoValue) continue;
    batchStatistics();
    blend(n.inputs[2 + i], i == 1 ? batchMean : batchVar, i == 1 ? "running_mean" : "running_var", o);
  }
  // PyTorch's buffers, which every train-mode forward updates whether or not the export kept the
  // update: with the unbiased batch variance, n / (n - 1). The plan carries them as state
  // (Graph::stateUpdates); a module called twice updates them twice, in order.
  const int64_t perChannel = ir::numElements(x.shape) / x.shape[1];
  for (size_t i : {3, 4}) {
    const ir::ValueId buffer = n.input(i);
    if (buffer == ir::kNoValue || g.values[buffer].kind != ir::ValueKind::Initializer) continue;
    batchStatistics();
    ir::ValueId batch = batchMean;
    if (i == 4) {
      const double bessel = static_cast<double>(perChannel) / static_cast<double>(perChannel - 1);
      batch = node("Mul", "batch_var_unbiased", {batchVar, g.newConstant(n.name + "/bessel", filled(dt, {}, bessel))}, channels);
    }
    auto chained = std::find_if(g.stateUpdates.begin(), g.stateUpdates.end(),
                                [&](const ir::StateUpdate& u) { return u.state == buffer; });
    const ir::ValueId running = chained == g.stateUpdates.end() ? buffer : chained->updated;
    const ir::ValueId updated = blend(running, batch, i == 3 ? "updated_running_mean" : "updated_running_var", ir::kNoValue);
    if (chained == g.stateUpdates.end()) g.stateUpdates.push_back({buffer, updated});
    else chained->updated = updated;
  }
  return nodes;
}

// `op` (a Reduce*) of n's input X [N, C, d..] over the spatial axes d.., kept as 1s, into `out`.
ir::Node spatialReduce(ir::Graph& g, const ir::Node& n, const std::string& op, const std::string& name, ir::ValueId out) {
  std::vector<int64_t> spatial;
  for (size_t d = 2; d < g.values[n.inputs[0]].shape.size(); ++d) spatial.push_back(static_cast<int64_t>(d));
  ir::Node r = derived(n, op, name, {n.inputs[0], intsConstant(g, name + "/axes", spatial)}, out);
  r.attrs["keepdims"] = int64_t{1};
  return r;
}

// MaxPool / AveragePool over the windows of ops/pooling.h: X padded (-inf for a max, 0 for an
// average) to cover every window, one strided Slice per kernel tap (the tap's element of every
// window), then Max of the taps (a tie goes to the first tap, as PyTorch's max pool picks the
// first) or their sum (Adds) times 1 / divisor per output position. Gradients come from Pad,
// Slice, Max, Add and Mul.
Result<std::vector<ir::Node>> decomposePool(ir::Graph& g, const ir::Node& n) {
  const ir::Value x = g.values[n.inputs[0]];
  auto geometry = ops::poolGeometry(n, x.shape);
  if (!geometry.ok()) return makeError("{}: {}", ir::describeNode(g, n), geometry.error().message);
  const std::vector<ops::PoolAxis>& axes = *geometry;
  const bool isMax = n.op == "MaxPool";
  const size_t k = axes.size();
  const ir::ValueId out = n.outputs[0];
  std::vector<ir::Node> nodes;
  // Every axis one clipped window (EfficientNet's AvgPool2d(hidden_dim, ceil_mode=True)): a
  // global pool, the average over the divisor PyTorch uses (padding counted or not).
  const auto whole = [](const ops::PoolAxis& a) { return a.wholeAxis; };
  if (std::any_of(axes.begin(), axes.end(), whole)) {
    if (!std::all_of(axes.begin(), axes.end(), whole))
      return makeError("{}: a ceil_mode window wider than some spatial axes but not all is not supported", ir::describeNode(g, n));
    if (isMax) return std::vector<ir::Node>{spatialReduce(g, n, "ReduceMax", n.name, out)};
    const ir::ValueId sum = g.newValue(n.name + "/sum", x.dtype, g.values[out].shape, true);
    nodes.push_back(spatialReduce(g, n, "ReduceSum", n.name + "/sum", sum));
    const double divisor = ops::averagePoolDivisors(axes, n.attrInt("count_include_pad", 0) != 0)[0];
    nodes.push_back(derived(n, "Mul", n.name, {sum, g.newConstant(n.name + "/reciprocal_divisor", filled(x.dtype, {}, 1.0 / divisor))}, out));
    return nodes;
  }
  ir::ValueId padded = n.inputs[0];
  std::vector<int64_t> pads(2 * k), spatial(k);
  ir::Shape paddedShape = x.shape;
  bool anyPad = false;
  for (size_t i = 0; i < k; ++i) {
    const ops::PoolAxis& a = axes[i];
    spatial[i] = static_cast<int64_t>(i + 2);
    pads[i] = a.padBegin;
    pads[k + i] = std::max<int64_t>(0, a.span() - a.padBegin - a.in);  // ceil_mode may need more than padEnd
    paddedShape[i + 2] = a.in + pads[i] + pads[k + i];
    anyPad |= pads[i] > 0 || pads[k + i] > 0;
  }
  if (anyPad) {
    padded = g.newValue(n.name + "/padded", x.dtype, paddedShape, true);
    nodes.push_back(derived(n, "Pad", n.name + "/padded",
                            {n.inputs[0], intsConstant(g, n.name + "/pads", pads),
                             g.newConstant(n.name + "/pad_value", filled(x.dtype, {}, isMax ? -INFINITY : 0.0)),
                             intsConstant(g, n.name + "/pad_axes", spatial)},
                            padded));
  }
  ir::Shape tapShape(x.shape.begin(), x.shape.begin() + 2);
  int64_t taps = 1;
  for (const ops::PoolAxis& a : axes) tapShape.push_back(a.out), taps *= a.kernel;
  std::vector<ir::ValueId> tapValues;
  for (int64_t tap = 0; tap < taps; ++tap) {
    std::vector<int64_t> starts(k), ends(k), steps(k);
    for (size_t i = k, rest = static_cast<size_t>(tap); i-- > 0;) {
      const ops::PoolAxis& a = axes[i];
      starts[i] = static_cast<int64_t>(rest % a.kernel) * a.dilation;
      ends[i] = starts[i] + (a.out - 1) * a.stride + 1;
      steps[i] = a.stride;
      rest /= a.kernel;
    }
    const std::string name = fmt::format("{}/tap{}", n.name, tap);
    const ir::ValueId v = taps == 1 && isMax ? out : g.newValue(name, x.dtype, tapShape, true);
    nodes.push_back(derived(n, "Slice", taps == 1 && isMax ? n.name : name,
                            {padded, intsConstant(g, name + "/starts", starts), intsConstant(g, name + "/ends", ends),
                             intsConstant(g, name + "/axes", spatial), intsConstant(g, name + "/steps", steps)},
                            v));
    tapValues.push_back(v);
  }
  if (isMax) {
    if (taps > 1) nodes.push_back(derived(n, "Max", n.name, tapValues, out));
    return nodes;
  }
  ir::ValueId sum = tapValues[0];
  for (size_t i = 1; i < tapValues.size(); ++i) {
    const std::string name = fmt::format("{}/sum{}", n.name, i);
    const ir::ValueId next = g.newValue(name, x.dtype, tapShape, true);
    nodes.push_back(derived(n, "Add", name, {sum, tapValues[i]}, next));
    sum = next;
  }
  const std::vector<double> divisors = ops::averagePoolDivisors(axes, n.attrInt("count_include_pad", 0) != 0);
  ir::Shape wShape(tapShape.begin() + 2, tapShape.end());
  ir::Tensor w(x.dtype, wShape);
  for (size_t e = 0; e < divisors.size(); ++e) w.set(static_cast<int64_t>(e), 1.0 / divisors[e]);
  nodes.push_back(derived(n, "Mul", n.name, {sum, g.newConstant(n.name + "/reciprocal_divisor", std::move(w))}, out));
  return nodes;
}

// GlobalAveragePool / GlobalMaxPool: ReduceMean / ReduceMax over the spatial axes, kept as 1s.
std::vector<ir::Node> decomposeGlobalPool(ir::Graph& g, const ir::Node& n) {
  return {spatialReduce(g, n, n.op == "GlobalMaxPool" ? "ReduceMax" : "ReduceMean", n.name, n.outputs[0])};
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
  auto isPool = [](const ir::Node& n) { return n.op == "MaxPool" || n.op == "AveragePool"; };
  auto decomposed = [&](const ir::Node& n) {
    return !n.dead && (n.op == "Tile" || n.op == "Clip" || n.op == "Resize" || n.op == "ReduceL2" || isConv1d(n) ||
                       n.op == "InstanceNormalization" || n.op == "BatchNormalization" || isPool(n) ||
                       n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool");
  };
  // Resize's sampling and the pools' windows are checked before anything moves, so an error
  // leaves the graph as it was.
  std::map<const ir::Node*, std::vector<ir::Node>> checked;
  for (const ir::Node& n : g.nodes) {
    if (decomposed(n) && n.op == "Resize") { FBL_ASSIGN(checked[&n], decomposeResize(g, n)); }
    if (decomposed(n) && isPool(n)) { FBL_ASSIGN(checked[&n], decomposePool(g, n)); }
    if (decomposed(n) && n.op == "BatchNormalization") FBL_TRY(checkBatchNorm(g, n));
  }
  for (const ir::Node& n : g.nodes)
    if (decomposed(n) && isConv1d(n) && g.values[n.outputs[0]].shape.size() != 3)
      return makeError("{}: the output's shape is not inferred; decompose-ops runs after fold-and-infer",
                       ir::describeNode(g, n));
  // A Conv's auto_pad SAME_* becomes the explicit pads its kernels and gradient read.
  bool padded = false;
  for (ir::Node& n : g.nodes) {
    const std::string autoPad = n.attrString("auto_pad", "NOTSET");
    if (n.dead || n.op != "Conv" || (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")) continue;
    const ir::Shape &x = g.values[n.inputs[0]].shape, &w = g.values[n.inputs[1]].shape;
    const std::vector<int64_t> in(x.begin() + 2, x.end()), kernel(w.begin() + 2, w.end());
    n.attrs["pads"] = ops::samePads(in, kernel, n.attrInts("strides", std::vector<int64_t>(in.size(), 1)),
                                    n.attrInts("dilations", std::vector<int64_t>(in.size(), 1)), autoPad == "SAME_UPPER");
    n.attrs["auto_pad"] = std::string("NOTSET");
    padded = true;
    ++rewritten_;
  }
  if (std::none_of(g.nodes.begin(), g.nodes.end(), decomposed)) return padded;
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
                                  : n.op == "InstanceNormalization" ? decomposeInstanceNorm(g, n)
                                  : n.op == "BatchNormalization"    ? decomposeBatchNorm(g, n)
                                  : n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool" ? decomposeGlobalPool(g, n)
                                                       : std::move(checked.at(&n));
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
