// Gradient rules for activations, normalizations and the loss. Each is one fused fbl op: the
// natural kernel on a GPU, and fewer nodes for the layout compiler than the composed formula.
// Rules read the forward output where that is what the formula needs (Sigmoid, Tanh,
// Softmax) and the input otherwise (Gelu, Erf, LayerNormalization recomputes its statistics).
// ReLU, a mask, is two ONNX nodes rather than a fused op.
#include "compiler/autodiff/grad_rules.h"

namespace fbl::autodiff {

namespace {

using ir::ValueId;
using Grads = std::vector<ValueId>;

Grads none(const GradContext& c) { return Grads(c.fwd.inputs.size(), ir::kNoValue); }

// dx = fused(dy, saved) with the shape of the saved tensor.
Grads fused(GradContext& c, std::string_view op, ValueId saved, Attrs attrs = {}) {
  Grads g = none(c);
  g[0] = c.b.emit(op, {c.dy[0], saved}, c.b.dtype(c.dy[0]), c.b.shape(saved), std::move(attrs));
  return g;
}

Result<Grads> sigmoidGrad(GradContext& c) { return fused(c, "fbl.SigmoidGrad", c.out(0)); }
Result<Grads> tanhGrad(GradContext& c) { return fused(c, "fbl.TanhGrad", c.out(0)); }
Result<Grads> erfGrad(GradContext& c) { return fused(c, "fbl.ErfGrad", c.in(0)); }

// dx = Where(y > 0, dy, 0): zero at x = 0, as PyTorch's threshold_backward. It reads y, which
// the next layer reads anyway, and needs no fused op: two elementwise ONNX nodes.
Result<Grads> reluGrad(GradContext& c) {
  auto& b = c.b;
  ValueId y = c.out(0), dy = c.dy[0];
  ir::DType dt = b.dtype(dy);
  ValueId open = b.emit("Greater", {y, b.scalar(0.0, b.dtype(y))}, ir::DType::Bool, b.shape(y));
  Grads g = none(c);
  g[0] = b.emit("Where", {open, dy, b.scalar(0.0, dt)}, dt, b.shape(dy));
  return g;
}

Result<Grads> geluGrad(GradContext& c) {
  std::string approx = c.fwd.attrString("approximate", "none");
  if (approx != "none" && approx != "tanh") return c.fail("unknown Gelu approximation " + approx);
  return fused(c, "fbl.GeluGrad", c.in(0), {{"approximate", approx}});
}

Result<Grads> softmaxGrad(GradContext& c) {
  int64_t rank = c.b.rank(c.out(0));
  int64_t axis = c.fwd.attrInt("axis", -1);
  if (axis < 0) axis += rank;
  // Before opset 13 Softmax flattened the trailing axes; only the last-axis case agrees.
  int64_t opset = c.b.graph().opset;
  if (opset != 0 && opset < 13 && axis != rank - 1)
    return c.fail("Softmax before opset 13 is differentiated only along the last axis");
  return fused(c, "fbl.SoftmaxGrad", c.out(0), {{"axis", axis}});
}

// One fbl.LayerNormGrad gives dX, dScale and dBias; only the wanted outputs are produced.
Result<Grads> layerNormGrad(GradContext& c) {
  auto& b = c.b;
  if ((c.dy.size() > 1 && c.dy[1] != ir::kNoValue) || (c.dy.size() > 2 && c.dy[2] != ir::kNoValue))
    return c.fail("gradients through LayerNormalization's Mean/InvStdDev outputs are not supported");
  ValueId x = c.in(0), scale = c.in(1), bias = c.in(2);
  int64_t axis = c.fwd.attrInt("axis", -1);
  if (axis < 0) axis += b.rank(x);
  ir::DType dt = b.dtype(c.dy[0]);
  std::vector<GradBuilder::OutType> outs(3);
  if (c.wants[0]) outs[0] = {dt, b.shape(x), {}};
  if (c.wants[1]) outs[1] = {dt, b.shape(scale), {}};
  if (bias != ir::kNoValue && c.wants[2]) outs[2] = {dt, b.shape(bias), {}};
  auto r = b.emitMulti("fbl.LayerNormGrad", {c.dy[0], x, scale}, outs,
                       {{"axis", axis}, {"epsilon", c.fwd.attrFloat("epsilon", 1e-5f)}});
  Grads g = none(c);
  for (size_t i = 0; i < g.size() && i < 3; ++i) g[i] = r[i];
  return g;
}

// d loss / d scores = scale * w[label] * (softmax(scores) - onehot(label)), zero where the label
// is ignore_index; the scale follows the reduction (1/sum of weights for "mean").
Result<Grads> softmaxCrossEntropyGrad(GradContext& c) {
  auto& b = c.b;
  if (c.dy.size() > 1 && c.dy[1] != ir::kNoValue)
    return c.fail("gradients through SoftmaxCrossEntropyLoss's log_prob output are not supported");
  if (c.in(2) != ir::kNoValue && c.wants[2])
    return c.fail("the gradient with respect to the class weights is not supported");
  std::vector<ValueId> ins{c.dy[0], c.in(0), c.in(1)};
  if (c.in(2) != ir::kNoValue) ins.push_back(c.in(2));
  Attrs at{{"reduction", c.fwd.attrString("reduction", "mean")}};
  if (c.fwd.hasAttr("ignore_index")) at["ignore_index"] = c.fwd.attrInt("ignore_index", 0);
  Grads g = none(c);
  g[0] = b.emit("fbl.SoftmaxCrossEntropyLossGrad", std::move(ins), b.dtype(c.in(0)),
                b.shape(c.in(0)), std::move(at));
  return g;
}

// fbl.Attention (attention.h): one fbl.AttentionGrad from dO and what the forward saved (o and
// the row log-sum-exp), recomputing the scores block by block; only the wanted of dq, dk, dv.
Result<Grads> attentionGrad(GradContext& c) {
  auto& b = c.b;
  if (c.dy.size() > 1 && c.dy[1] != ir::kNoValue) return c.fail("gradients through the log-sum-exp output are not supported");
  const ValueId mask = c.in(3);
  if (mask != ir::kNoValue && c.wants[3]) return c.fail("the attention mask depends on a trainable: no gradient rule for it");
  if (c.out(1) == ir::kNoValue) return c.fail("the forward node does not output its log-sum-exp");
  ir::DType dt = b.dtype(c.dy[0]);
  std::vector<GradBuilder::OutType> outs(3);
  for (size_t i = 0; i < 3; ++i)
    if (c.wants[i]) outs[i] = {dt, b.shape(c.in(i)), {}};
  std::vector<ValueId> in{c.dy[0], c.in(0), c.in(1), c.in(2), c.out(0), c.out(1)};
  if (mask != ir::kNoValue) in.push_back(mask);
  Attrs attrs(c.fwd.attrs.begin(), c.fwd.attrs.end());
  auto r = b.emitMulti("fbl.AttentionGrad", std::move(in), outs, std::move(attrs));
  Grads g = none(c);
  for (size_t i = 0; i < 3; ++i) g[i] = r[i];
  return g;
}

}  // namespace

std::vector<GradRule> nnGradRules() {
  return {
      {"Relu", reluGrad},
      {"Sigmoid", sigmoidGrad},
      {"Tanh", tanhGrad},
      {"Erf", erfGrad},
      {"Gelu", geluGrad},
      {"Softmax", softmaxGrad},
      {"LayerNormalization", layerNormGrad},
      {"SoftmaxCrossEntropyLoss", softmaxCrossEntropyGrad},
      {"fbl.Attention", attentionGrad},
  };
}

}  // namespace fbl::autodiff
