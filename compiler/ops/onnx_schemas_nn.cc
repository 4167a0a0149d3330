// Shape rules of the compute ops: MatMul (numpy semantics, 1-D operands promoted then dropped),
// Gemm, 1-D and 2-D Conv, the reductions, (Log)Softmax, Layer/Instance/BatchNormalization, the
// pools and SoftmaxCrossEntropyLoss.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "compiler/ops/broadcast.h"
#include "compiler/ops/conv_1d.h"
#include "compiler/ops/onnx_schemas_common.h"
#include "compiler/ops/pooling.h"

namespace fbl::ops::rules {

namespace {

using ir::DType;
using ir::Shape;

std::string str(const Shape& s) { return ir::shapeToString(s); }

Status matMul(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectSameDType(c, 0, 1));
  Shape a = c.in[0].shape, b = c.in[1].shape;
  if (a.empty() || b.empty()) return c.fail("MatMul operands must have rank 1 or more");
  bool vecA = a.size() == 1, vecB = b.size() == 1;
  if (vecA) a.insert(a.begin(), 1);
  if (vecB) b.push_back(1);
  if (a.back() != b[b.size() - 2])
    return c.fail(fmt::format("inner dimensions of {} and {} differ", str(c.in[0].shape),
                              str(c.in[1].shape)));
  auto batch = broadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  if (!batch)
    return c.fail(fmt::format("batch dimensions of {} and {} do not broadcast",
                              str(c.in[0].shape), str(c.in[1].shape)));
  Shape out = *batch;
  if (!vecA) out.push_back(a[a.size() - 2]);
  if (!vecB) out.push_back(b.back());
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

Status gemm(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectSameDType(c, 0, 1));
  const Shape &a = c.in[0].shape, &b = c.in[1].shape;
  if (a.size() != 2 || b.size() != 2)
    return c.fail(fmt::format("Gemm operands {} and {} must be 2-D", str(a), str(b)));
  bool ta = c.node.attrInt("transA", 0) != 0, tb = c.node.attrInt("transB", 0) != 0;
  int64_t m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (ka != kb)
    return c.fail(fmt::format("inner dimensions of {} and {} differ (transA={}, transB={})",
                              str(a), str(b), ta, tb));
  if (hasInput(c, 2)) {
    FBL_TRY(expectSameDType(c, 0, 2));
    if (!broadcastsTo(c.in[2].shape, {m, n}))
      return c.fail(fmt::format("C {} does not broadcast to [{},{}]", str(c.in[2].shape), m, n));
  }
  setOut(c, 0, c.in[0].dtype, {m, n});
  return Status::success();
}

Status conv2d(InferContext& c);

// 1-D convolution (conv_1d.h): the 2-D rule on [N, C, 1, L], then the 1 dropped.
Status conv1d(InferContext& c) {
  const ir::Node n2 = conv1dAs2d(c.node);
  InferContext c2{c.graph, n2, c.in, c.constIn, c.out};
  for (size_t i = 0; i < 2; ++i) c2.in[i].shape.insert(c2.in[i].shape.begin() + 2, 1);
  FBL_TRY(conv2d(c2));
  c.out = c2.out;
  c.out[0].shape.erase(c.out[0].shape.begin() + 2);
  return Status::success();
}

Status conv(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  const Shape &x = c.in[0].shape, &w = c.in[1].shape;
  if (isConv1d(x, w)) return conv1d(c);
  if (x.size() != 4 || w.size() != 4)
    return c.fail(fmt::format("only 1-D and 2-D Conv (3-D or 4-D input and weight) are supported, not {} and {}",
                              str(x), str(w)));
  return conv2d(c);
}

// 2-D convolution, NCHW: out = floor((in + padBegin + padEnd - dilation*(k-1) - 1)/stride) + 1.
Status conv2d(InferContext& c) {
  FBL_TRY(expectSameDType(c, 0, 1));
  const Shape &x = c.in[0].shape, &w = c.in[1].shape;
  int64_t group = c.node.attrInt("group", 1);
  if (group < 1 || x[1] != w[1] * group || w[0] % group != 0)
    return c.fail(fmt::format("input {} and weight {} do not match group={}", str(x), str(w),
                              group));
  std::vector<int64_t> kernel = c.node.attrInts("kernel_shape", {w[2], w[3]});
  if (kernel != std::vector<int64_t>{w[2], w[3]})
    return c.fail(fmt::format("kernel_shape [{}] does not match weight {}",
                              fmt::join(kernel, ","), str(w)));
  std::vector<int64_t> strides = c.node.attrInts("strides", {1, 1});
  std::vector<int64_t> dil = c.node.attrInts("dilations", {1, 1});
  std::vector<int64_t> pads = c.node.attrInts("pads", {0, 0, 0, 0});
  std::string autoPad = c.node.attrString("auto_pad", "NOTSET");
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return c.fail("strides and dilations need 2 entries and pads 4");
  if (autoPad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    if (strides[0] < 1 || strides[1] < 1) return c.fail("strides must be positive");
    pads = ops::samePads({x[2], x[3]}, {w[2], w[3]}, strides, dil, autoPad == "SAME_UPPER");
  } else if (autoPad != "NOTSET") {
    return c.fail(fmt::format("auto_pad '{}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", autoPad));
  }
  if (hasInput(c, 2) && c.in[2].shape != Shape{w[0]})
    return c.fail(fmt::format("bias {} must be [{}]", str(c.in[2].shape), w[0]));
  Shape out = {x[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (strides[i] < 1 || dil[i] < 1) return c.fail("strides and dilations must be positive");
    // 128-bit: pads and dilations come straight from the file.
    __int128 span = __int128{x[2 + i]} + pads[i] + pads[i + 2] -
                    __int128{dil[i]} * (w[2 + i] - 1) - 1;
    if (span < 0)
      return c.fail(fmt::format("the kernel {} is larger than the padded input {}", str(w),
                                str(x)));
    if (span >= std::numeric_limits<int64_t>::max())
      return c.fail("pads are out of range");
    out[2 + i] = static_cast<int64_t>(span / strides[i] + 1);
  }
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

// ReduceMean/Sum/Max/SumSquare/L2: axes as an attribute (before opset 18; ReduceSum before 13) or as input 1.
Status reduce(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  if (c.in[0].dtype == DType::Bool) return c.fail("cannot reduce a bool tensor");
  if (c.node.hasAttr("axes") && hasInput(c, 1))
    return c.fail("axes are given both as an attribute and as an input");
  std::vector<int64_t> axes = c.node.attrInts("axes");
  if (hasInput(c, 1)) {
    FBL_ASSIGN(axes, constInts(c, 1, "the axes"));
  }
  bool keep = c.node.attrInt("keepdims", 1) != 0;
  int64_t rank = rankOf(c, 0);
  if (axes.empty() && c.node.attrInt("noop_with_empty_axes", 0) != 0) {
    c.out[0] = c.in[0];
    return Status::success();
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    FBL_ASSIGN(int64_t ax, normalizeAxis(c, a, rank));
    if (reduced[ax]) return c.fail(fmt::format("axis {} is repeated", a));
    reduced[ax] = true;
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i]) out.push_back(c.in[0].shape[i]);
    else if (keep) out.push_back(1);
  }
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

// ArgMax/ArgMin: int64 positions along `axis`, which stays as a 1 with keepdims (the default).
Status argExtremum(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  if (c.in[0].dtype == DType::Bool) return c.fail("cannot take the position of an extremum of a bool tensor");
  const int64_t rank = rankOf(c, 0);
  if (rank == 0) return c.fail("the input is a scalar: there is no axis to search");
  FBL_ASSIGN(int64_t axis, normalizeAxis(c, c.node.attrInt("axis", 0), rank));
  if (c.in[0].shape[axis] == 0) return c.fail(fmt::format("axis {} is empty: it has no extremum", axis));
  Shape out = c.in[0].shape;
  if (c.node.attrInt("keepdims", 1) != 0) out[axis] = 1;
  else out.erase(out.begin() + axis);
  setOut(c, 0, DType::I64, std::move(out));
  return Status::success();
}

// TopK: Values (X's dtype) and Indices (i64), X's shape with `axis` cut to K, a constant.
Status topK(InferContext& c) {
  FBL_TRY(expectOutputs(c, 2, 2));
  if (c.in[0].dtype == DType::Bool) return c.fail("cannot rank a bool tensor");
  const int64_t rank = rankOf(c, 0);
  if (rank == 0) return c.fail("X is a scalar: there is no axis to rank along");
  FBL_ASSIGN(int64_t axis, normalizeAxis(c, c.node.attrInt("axis", -1), rank));
  FBL_ASSIGN(std::vector<int64_t> k, constInts(c, 1, "K"));
  if (k.size() != 1) return c.fail(fmt::format("K holds {} values, not one", k.size()));
  if (k[0] < 0 || k[0] > c.in[0].shape[axis])
    return c.fail(fmt::format("K = {} is outside [0, {}], the length of axis {}", k[0], c.in[0].shape[axis], axis));
  Shape out = c.in[0].shape;
  out[axis] = k[0];
  setOut(c, 0, c.in[0].dtype, out);
  setOut(c, 1, DType::I64, std::move(out));
  return Status::success();
}

Status softmax(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectFloat(c, 0));
  FBL_TRY(normalizeAxis(c, c.node.attrInt("axis", -1), rankOf(c, 0)));
  c.out[0] = c.in[0];
  return Status::success();
}

// Outputs: Y like X; Mean and InvStdDev X.shape[:axis] + 1s, typed by stash_type.
Status layerNorm(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 3));
  FBL_TRY(expectFloat(c, 0));
  FBL_TRY(expectSameDType(c, 0, 1));
  int64_t rank = rankOf(c, 0);
  FBL_ASSIGN(int64_t axis, normalizeAxis(c, c.node.attrInt("axis", -1), rank));
  const Shape& x = c.in[0].shape;
  Shape normalized(x.begin() + axis, x.end());
  for (size_t i = 1; i < 3; ++i) {
    if (!hasInput(c, i)) continue;
    FBL_TRY(expectSameDType(c, 0, i));
    if (!broadcastsTo(c.in[i].shape, normalized))
      return c.fail(fmt::format("'{}' {} does not broadcast to the normalized shape {}",
                                inputName(c, i), str(c.in[i].shape), str(normalized)));
  }
  auto stash = ir::dtypeFromOnnx(static_cast<int32_t>(c.node.attrInt("stash_type", 1)));
  if (!stash || !ir::isFloat(*stash)) return c.fail("stash_type must be a float type");
  c.out[0] = c.in[0];
  Shape stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), 1);
  for (size_t i = 1; i < c.out.size(); ++i) setOut(c, i, *stash, stats);
  return Status::success();
}

// The per-channel normalizations over X [N, C, d1..]: every other input is [C], Y is like X.
// InstanceNormalization: (scale, B). BatchNormalization: (scale, B, input_mean, input_var); in
// training mode (training_mode=1) its optional outputs 1 and 2 are the running mean and variance.
Status channelNorm(InferContext& c, size_t channelInputs, size_t maxOutputs) {
  FBL_TRY(expectOutputs(c, 1, maxOutputs));
  FBL_TRY(expectFloat(c, 0));
  const Shape& x = c.in[0].shape;
  if (x.size() < 2) return c.fail(fmt::format("X {} has no channel axis: expected [N, C, ...]", str(x)));
  for (size_t i = 1; i <= channelInputs; ++i) {
    FBL_TRY(expectSameDType(c, 0, i));
    if (c.in[i].shape != Shape{x[1]})
      return c.fail(fmt::format("'{}' is {}, not [{}]: one value per channel of X {}", inputName(c, i),
                                str(c.in[i].shape), x[1], str(x)));
  }
  c.out[0] = c.in[0];
  if (c.out.size() > 1 && c.node.attrInt("training_mode", 0) == 0)
    return c.fail("the running mean and variance outputs exist in training mode only (training_mode=1)");
  for (size_t i = 1; i < c.out.size(); ++i) setOut(c, i, c.in[0].dtype, {x[1]});
  return Status::success();
}

Status instanceNorm(InferContext& c) {
  if (c.in[0].shape.size() < 3)
    return c.fail(fmt::format("X is {}: expected [N, C, d1, ...], statistics over d1..", str(c.in[0].shape)));
  return channelNorm(c, 2, 1);
}
Status batchNorm(InferContext& c) {
  if (c.node.attrInt("spatial", 1) != 1)
    return c.fail("spatial=0 (statistics per activation, before opset 9) is not supported");
  return channelNorm(c, 4, 3);
}

// MaxPool and AveragePool: Y [N, C, out1..] by pooling.h; MaxPool's optional Indices output is
// not supported. GlobalAveragePool and GlobalMaxPool: Y [N, C, 1, ...].
Status pool(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 2));
  if (c.out.size() > 1) return c.fail("MaxPool's Indices output is not supported");
  FBL_TRY(expectFloat(c, 0));
  auto axes = poolGeometry(c.node, c.in[0].shape);
  if (!axes.ok()) return c.fail(axes.error().message);
  Shape y(c.in[0].shape.begin(), c.in[0].shape.begin() + 2);
  for (const PoolAxis& a : *axes) y.push_back(a.out);
  setOut(c, 0, c.in[0].dtype, std::move(y));
  return Status::success();
}

Status globalPool(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectFloat(c, 0));
  if (c.in[0].shape.size() < 3) return c.fail(fmt::format("X is {}: expected [N, C, d1, ...]", str(c.in[0].shape)));
  Shape y = c.in[0].shape;
  std::fill(y.begin() + 2, y.end(), 1);
  setOut(c, 0, c.in[0].dtype, std::move(y));
  return Status::success();
}

// Scores [N,C,d1..], labels [N,d1..]; loss [] (mean, sum) or [N,d1..] (none); log_prob like
// scores.
Status softmaxCrossEntropy(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 2));
  FBL_TRY(expectFloat(c, 0));
  FBL_TRY(expectIndex(c, 1));
  const Shape& scores = c.in[0].shape;
  if (scores.size() < 2) return c.fail(fmt::format("scores {} must be [N,C,...]", str(scores)));
  Shape labels = scores;
  labels.erase(labels.begin() + 1);
  if (c.in[1].shape != labels)
    return c.fail(fmt::format("labels {} must be {} for scores {}", str(c.in[1].shape),
                              str(labels), str(scores)));
  if (hasInput(c, 2)) {
    FBL_TRY(expectSameDType(c, 0, 2));
    if (c.in[2].shape != Shape{scores[1]})
      return c.fail(fmt::format("weights {} must be [{}]", str(c.in[2].shape), scores[1]));
  }
  std::string reduction = c.node.attrString("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return c.fail(fmt::format("reduction '{}' is not one of mean, sum, none", reduction));
  setOut(c, 0, c.in[0].dtype, reduction == "none" ? labels : Shape{});
  if (c.out.size() > 1) setOut(c, 1, c.in[0].dtype, scores);
  return Status::success();
}

}  // namespace

std::vector<OpSchema> nnSchemas() {
  std::vector<std::string_view> reduceAttrs = {"axes", "keepdims", "noop_with_empty_axes"};
  return {
      {"MatMul", 2, 2, {}, matMul},
      {"Gemm", 2, 3, {"alpha", "beta", "transA", "transB"}, gemm},
      {"Conv", 2, 3, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}, conv},
      {"ReduceMean", 1, 2, reduceAttrs, reduce},
      {"ReduceSum", 1, 2, reduceAttrs, reduce},
      {"ReduceSumSquare", 1, 2, reduceAttrs, reduce},
      {"ReduceL2", 1, 2, reduceAttrs, reduce},
      {"ReduceMax", 1, 2, reduceAttrs, reduce},
      {"ArgMax", 1, 1, {"axis", "keepdims", "select_last_index"}, argExtremum},
      {"ArgMin", 1, 1, {"axis", "keepdims", "select_last_index"}, argExtremum},
      {"TopK", 2, 2, {"axis", "largest", "sorted"}, topK},
      {"Softmax", 1, 1, {"axis"}, softmax},
      {"LogSoftmax", 1, 1, {"axis"}, softmax},
      {"LayerNormalization", 2, 3, {"axis", "epsilon", "stash_type"}, layerNorm},
      {"InstanceNormalization", 3, 3, {"epsilon"}, instanceNorm},
      {"MaxPool", 1, 1, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}, pool},
      {"AveragePool", 1, 1, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}, pool},
      {"GlobalAveragePool", 1, 1, {}, globalPool},
      {"GlobalMaxPool", 1, 1, {}, globalPool},
      {"BatchNormalization", 5, 5, {"epsilon", "momentum", "training_mode", "spatial"}, batchNorm},
      {"SoftmaxCrossEntropyLoss", 2, 3, {"ignore_index", "reduction"}, softmaxCrossEntropy},
  };
}

}  // namespace fbl::ops::rules
