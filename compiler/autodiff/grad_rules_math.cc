// Gradient rules for arithmetic, reductions, CumSum, Max/Min and the contractions (MatMul, Gemm,
// Conv).
//
// Broadcasting is undone by one fbl.ReduceSumTo per operand that was broadcast; MatMul and Gemm
// gradients are again MatMul and Gemm nodes on (possibly transposed) operands, so the layout
// compiler sees the same contraction kinds in backward as in forward.
#include <cmath>

#include "compiler/autodiff/grad_rules.h"
#include "compiler/ops/broadcast.h"

namespace fbl::autodiff {

namespace {

using ir::ValueId;
using Grads = std::vector<ValueId>;

Grads none(const GradContext& c) { return Grads(c.fwd.inputs.size(), ir::kNoValue); }

Result<Grads> addGrad(GradContext& c) {
  Grads g = none(c);
  for (size_t i = 0; i < 2; ++i)
    if (c.wants[i]) g[i] = c.b.reduceSumTo(c.dy[0], c.b.shape(c.in(i)));
  return g;
}

Result<Grads> subGrad(GradContext& c) {
  Grads g = none(c);
  if (c.wants[0]) g[0] = c.b.reduceSumTo(c.dy[0], c.b.shape(c.in(0)));
  if (c.wants[1]) g[1] = c.b.reduceSumTo(c.b.neg(c.dy[0]), c.b.shape(c.in(1)));
  return g;
}

Result<Grads> mulGrad(GradContext& c) {
  Grads g = none(c);
  for (size_t i = 0; i < 2; ++i)
    if (c.wants[i]) g[i] = c.b.reduceSumTo(c.b.mul(c.dy[0], c.in(1 - i)), c.b.shape(c.in(i)));
  return g;
}

// y = a / b: da = dy / b, db = -dy * y / b.
Result<Grads> divGrad(GradContext& c) {
  auto& b = c.b;
  Grads g = none(c);
  if (c.wants[0]) g[0] = b.reduceSumTo(b.div(c.dy[0], c.in(1)), b.shape(c.in(0)));
  if (c.wants[1]) {
    ValueId t = b.neg(b.div(b.mul(c.dy[0], c.out(0)), c.in(1)));
    g[1] = b.reduceSumTo(t, b.shape(c.in(1)));
  }
  return g;
}

// y = x^p with a compile-time p: dx = dy * p * x^(p-1); x^2 (RMSNorm) is just dy * 2x.
Result<Grads> powGrad(GradContext& c) {
  auto& b = c.b;
  if (c.wants[1]) return c.fail("the gradient with respect to Pow's exponent is not supported");
  const ir::Tensor* p = b.constData(c.in(1));
  if (p == nullptr) return c.fail("Pow's exponent must be a compile-time constant to differentiate");
  ValueId x = c.in(0);
  ir::DType dt = b.dtype(x);
  bool uniform = p->numel() > 0;
  for (int64_t i = 1; uniform && i < p->numel(); ++i) uniform = p->at(i) == p->at(0);
  ValueId local;
  if (uniform && p->at(0) == 1.0) {
    local = ir::kNoValue;
  } else if (uniform && p->at(0) == 2.0) {
    local = b.mul(x, b.scalar(2.0, dt));
  } else {
    ir::Tensor pm1 = p->castTo(dt), pc = p->castTo(dt);
    for (int64_t i = 0; i < pm1.numel(); ++i) pm1.set(i, pm1.at(i) - 1.0);
    ValueId ePm1 = b.graph().newConstant("grad_const", std::move(pm1));
    ValueId eP = b.graph().newConstant("grad_const", std::move(pc));
    auto powShape = ops::broadcastShapes(b.shape(x), p->shape());
    if (!powShape) return c.fail("Pow's exponent does not broadcast against its base");
    local = b.mul(b.emit("Pow", {x, ePm1}, dt, *powShape), eP);
  }
  Grads g = none(c);
  g[0] = b.reduceSumTo(local == ir::kNoValue ? c.dy[0] : b.mul(c.dy[0], local), b.shape(x));
  return g;
}

Result<Grads> negGrad(GradContext& c) {
  Grads g = none(c);
  g[0] = c.b.neg(c.dy[0]);
  return g;
}

// y = sqrt(x): dx = dy * 0.5 / y.
Result<Grads> sqrtGrad(GradContext& c) {
  auto& b = c.b;
  Grads g = none(c);
  g[0] = b.div(b.mul(c.dy[0], b.scalar(0.5, b.dtype(c.out(0)))), c.out(0));
  return g;
}

// y = 1/x: dx = -dy * y^2.
Result<Grads> reciprocalGrad(GradContext& c) {
  auto& b = c.b;
  Grads g = none(c);
  g[0] = b.neg(b.mul(c.dy[0], b.mul(c.out(0), c.out(0))));
  return g;
}

Result<Grads> expGrad(GradContext& c) {
  Grads g = none(c);
  g[0] = c.b.mul(c.dy[0], c.out(0));
  return g;
}

Result<Grads> logGrad(GradContext& c) {
  Grads g = none(c);
  g[0] = c.b.div(c.dy[0], c.in(0));
  return g;
}

// The reduced axes of ReduceMean/Sum/Max (an input since opset 18, an attribute before) as the
// input's shape with those axes set to 1, and how many elements each output element covers.
// `identity` is set when empty axes with noop_with_empty_axes make the reduction a copy.
struct Reduction {
  bool identity = false;
  ir::Shape kept;
  int64_t n = 1;
};

Result<Reduction> reduction(GradContext& c) {
  auto& b = c.b;
  ir::Shape sx = b.shape(c.in(0));
  std::vector<int64_t> axes;
  if (c.in(1) != ir::kNoValue) {
    const ir::Tensor* t = b.constData(c.in(1));
    if (t == nullptr) return c.fail("the reduction axes must be compile-time constants");
    axes = t->toInt64s();
  } else {
    axes = c.fwd.attrInts("axes");
  }
  Reduction r;
  r.kept = sx;
  if (axes.empty() && c.fwd.attrInt("noop_with_empty_axes", 0) != 0) {
    r.identity = true;
    return r;
  }
  if (axes.empty())
    for (size_t i = 0; i < sx.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  for (int64_t a : axes) {
    if (a < 0) a += static_cast<int64_t>(sx.size());
    if (a < 0 || a >= static_cast<int64_t>(sx.size())) return c.fail("reduction axis out of range");
    if (r.kept[a] != 1) r.n *= sx[a];
    r.kept[a] = 1;
  }
  return r;
}

// Both reductions spread dy back over the reduced axes (scaled by 1/n for the mean).
Result<Grads> reduceGrad(GradContext& c, bool mean) {
  auto& b = c.b;
  FBL_ASSIGN(Reduction r, reduction(c));
  Grads g = none(c);
  if (r.identity) {
    g[0] = c.dy[0];
    return g;
  }
  ValueId d = c.dy[0];
  if (mean) d = b.mul(d, b.scalar(1.0 / static_cast<double>(r.n), b.dtype(d)));
  g[0] = b.expand(b.reshape(d, r.kept), b.shape(c.in(0)));
  return g;
}

// ReduceMax shares dy evenly among the elements that attain the maximum, as PyTorch's amax
// does: m = Cast(x == y), dx = m * dy / sum(m) over the reduced axes (sum(m) >= 1 unless y is
// NaN). Max pooling written as Reshape + ReduceMax has no ties on real data, so the count is 1.
Result<Grads> reduceMaxGrad(GradContext& c) {
  auto& b = c.b;
  FBL_ASSIGN(Reduction r, reduction(c));
  Grads g = none(c);
  if (r.identity) {
    g[0] = c.dy[0];
    return g;
  }
  ValueId x = c.in(0);
  ir::Shape sx = b.shape(x);
  ir::DType dt = b.dtype(c.dy[0]);
  ValueId hit = b.emit("Equal", {x, b.reshape(c.out(0), r.kept)}, ir::DType::Bool, sx);
  ValueId mask = b.emit("Cast", {hit}, dt, sx, {{"to", int64_t(dt)}});
  ValueId share = b.div(b.reshape(c.dy[0], r.kept), b.reduceSumTo(mask, r.kept));
  g[0] = b.mul(mask, share);
  return g;
}

// Max and Min (variadic, broadcasting) pass dy to the input that attains y. On a tie the first
// such input takes all of it (PyTorch's maximum/minimum split a two-way tie equally instead):
// a remainder r starts as dy; input i gets Where(x_i == y, r, 0) and r becomes
// Where(x_i == y, 0, r), so later inputs that tie get nothing. Three elementwise nodes per
// input, none after the last input that wants a gradient; ReLU6's Min(x, 6) needs two.
Result<Grads> extremumGrad(GradContext& c) {
  auto& b = c.b;
  ValueId y = c.out(0), rest = c.dy[0];
  ir::Shape sy = b.shape(rest);
  ir::DType dt = b.dtype(rest);
  ValueId zero = b.scalar(0.0, dt);
  size_t last = 0;
  for (size_t i = 0; i < c.fwd.inputs.size(); ++i)
    if (c.wants[i]) last = i;
  Grads g = none(c);
  if (c.fwd.inputs.size() == 1) {
    g[0] = rest;
    return g;
  }
  for (size_t i = 0; i <= last; ++i) {
    ValueId hit = b.emit("Equal", {c.in(i), y}, ir::DType::Bool, sy);
    if (c.wants[i])
      g[i] = b.reduceSumTo(b.emit("Where", {hit, rest, zero}, dt, sy), b.shape(c.in(i)));
    if (i < last) rest = b.emit("Where", {hit, zero, rest}, dt, sy);
  }
  return g;
}

Result<Grads> reduceMeanGrad(GradContext& c) { return reduceGrad(c, true); }
Result<Grads> reduceSumGrad(GradContext& c) { return reduceGrad(c, false); }

// numpy.matmul semantics: 1-D operands are promoted to matrices and the gradient is reshaped
// back. dA = dY @ B^T and dB = A^T @ dY, each summed over the batch dimensions its operand was
// broadcast along. A batched activation times a 2-D weight folds the batch into the rows, so
// the weight gradient is one plain matrix product instead of a batched one and a reduction.
Result<Grads> matmulGrad(GradContext& c) {
  auto& b = c.b;
  ValueId a = c.in(0), w = c.in(1);
  ir::Shape sa = b.shape(a), sb = b.shape(w);
  if (sa.empty() || sb.empty()) return c.fail("MatMul operands must have rank 1 or more");
  ir::Shape sa2 = sa.size() == 1 ? ir::Shape{1, sa[0]} : sa;
  ir::Shape sb2 = sb.size() == 1 ? ir::Shape{sb[0], 1} : sb;
  ir::Shape sy2 = b.shape(c.dy[0]);
  if (sa.size() == 1) sy2.insert(sy2.end() - (sb.size() == 1 ? 0 : 1), 1);
  if (sb.size() == 1) sy2.push_back(1);
  ValueId dy = b.reshape(c.dy[0], sy2);
  Grads g = none(c);
  if (c.wants[0]) {
    ValueId d = b.matmul(dy, b.swapLastTwo(b.reshape(w, sb2)));
    g[0] = b.reshape(b.reduceSumTo(d, sa2), sa);
  }
  if (c.wants[1]) {
    ValueId a2 = b.reshape(a, sa2);
    ValueId d;
    if (sb2.size() == 2 && sa2.size() > 2) {
      int64_t k = sa2.back(), rows = ir::numElements(sa2) / k;
      ValueId af = b.reshape(a2, {rows, k});
      ValueId dyf = b.reshape(dy, {rows, sy2.back()});
      d = b.matmul(b.swapLastTwo(af), dyf);
    } else {
      d = b.reduceSumTo(b.matmul(b.swapLastTwo(a2), dy), sb2);
    }
    g[1] = b.reshape(d, sb);
  }
  return g;
}

// Y = alpha * A' B' + beta * C with A' = transA ? A^T : A (and B' alike). Each gradient is one
// Gemm whose trans flags pick the operand orientation, so no Transpose node is needed.
Result<Grads> gemmGrad(GradContext& c) {
  auto& b = c.b;
  ValueId a = c.in(0), w = c.in(1), dy = c.dy[0];
  ir::Shape sa = b.shape(a), sb = b.shape(w);
  if (sa.size() != 2 || sb.size() != 2) return c.fail("Gemm operands must be 2-D");
  int64_t ta = c.fwd.attrInt("transA", 0) != 0, tb = c.fwd.attrInt("transB", 0) != 0;
  float alpha = c.fwd.attrFloat("alpha", 1.0f), beta = c.fwd.attrFloat("beta", 1.0f);
  ir::DType dt = b.dtype(dy);
  auto gemm = [&](ValueId p, ValueId q, int64_t tp, int64_t tq) {
    ir::Shape sp = b.shape(p), sq = b.shape(q);
    ir::Shape out{tp ? sp[1] : sp[0], tq ? sq[0] : sq[1]};
    Attrs at{{"transA", tp}, {"transB", tq}};
    if (alpha != 1.0f) at["alpha"] = alpha;
    return b.emit("Gemm", {p, q}, dt, out, std::move(at));
  };
  Grads g = none(c);
  if (c.wants[0]) g[0] = ta ? gemm(w, dy, tb, 1) : gemm(dy, w, 0, 1 - tb);
  if (c.wants[1]) g[1] = tb ? gemm(dy, a, 1, ta) : gemm(a, dy, 1 - ta, 0);
  if (c.in(2) != ir::kNoValue && c.wants[2]) {
    ValueId d = beta == 1.0f ? dy : b.mul(dy, b.scalar(beta, dt));
    g[2] = b.reduceSumTo(d, b.shape(c.in(2)));
  }
  return g;
}

// Conv's input and weight gradients are fbl ops (a transposed convolution and a correlation of
// dy with x); the bias gradient sums dy over batch and space.
Result<Grads> convGrad(GradContext& c) {
  auto& b = c.b;
  std::string autoPad = c.fwd.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID")
    return c.fail("Conv with auto_pad " + autoPad + " is not differentiated; export explicit pads");
  ir::Shape sx = b.shape(c.in(0)), sw = b.shape(c.in(1));
  size_t spatial = sx.size() - 2;
  Attrs common{
      {"strides", c.fwd.attrInts("strides", std::vector<int64_t>(spatial, 1))},
      {"dilations", c.fwd.attrInts("dilations", std::vector<int64_t>(spatial, 1))},
      {"pads", autoPad == "VALID" ? std::vector<int64_t>(2 * spatial, 0)
                                  : c.fwd.attrInts("pads", std::vector<int64_t>(2 * spatial, 0))},
      {"group", c.fwd.attrInt("group", 1)}};
  ValueId dy = c.dy[0];
  Grads g = none(c);
  if (c.wants[0]) {
    Attrs at = common;
    at["shape"] = sx;
    g[0] = b.emit("fbl.ConvGradInput", {dy, c.in(1)}, b.dtype(dy), sx, std::move(at));
  }
  if (c.wants[1]) {
    Attrs at = common;
    at["shape"] = sw;
    g[1] = b.emit("fbl.ConvGradWeight", {dy, c.in(0)}, b.dtype(dy), sw, std::move(at));
  }
  if (c.in(2) != ir::kNoValue && c.wants[2]) {
    ir::Shape perChannel(sx.size(), 1);
    perChannel[1] = sw[0];
    g[2] = b.reshape(b.reduceSumTo(dy, perChannel), {sw[0]});
  }
  return g;
}

// A running sum's transpose is the running sum the other way, exclusive as it was:
// y_i = sum_{j <= i} x_j gives dx_j = sum_{i >= j} dy_i.
Result<Grads> cumSumGrad(GradContext& c) {
  auto& b = c.b;
  if (!ir::isFloat(b.dtype(c.in(0)))) return c.fail("an integer CumSum has no gradient");
  Grads g = none(c);
  g[0] = b.emit("CumSum", {c.dy[0], c.in(1)}, b.dtype(c.dy[0]), b.shape(c.dy[0]),
                {{"exclusive", c.fwd.attrInt("exclusive", 0)},
                 {"reverse", int64_t{c.fwd.attrInt("reverse", 0) == 0 ? 1 : 0}}});
  return g;
}

}  // namespace

std::vector<GradRule> mathGradRules() {
  return {
      {"Add", addGrad},
      {"Sub", subGrad},
      {"Mul", mulGrad},
      {"Div", divGrad},
      {"Pow", powGrad},
      {"Neg", negGrad},
      {"Sqrt", sqrtGrad},
      {"Reciprocal", reciprocalGrad},
      {"Exp", expGrad},
      {"Log", logGrad},
      {"ReduceMean", reduceMeanGrad},
      {"ReduceSum", reduceSumGrad},
      {"ReduceMax", reduceMaxGrad},
      {"CumSum", cumSumGrad},
      {"Max", extremumGrad},
      {"Min", extremumGrad},
      {"MatMul", matmulGrad},
      {"Gemm", gemmGrad},
      {"Conv", convGrad},
  };
}

}  // namespace fbl::autodiff
