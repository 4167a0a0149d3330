// Reference kernels of Conv's gradients and of the optimizer updates.
//
// Both Conv gradients walk the same (output position, kernel position) -> input position map
// that the forward convolution reads, precomputed once per call as a table, so N-d convolutions
// with strides, pads, dilations and groups share one loop nest.
#include <cmath>

#include <fmt/format.h>

#include "compiler/ref/training_kernels.h"

namespace fbl::ref {

namespace {

using ir::Shape;
using ir::Tensor;
using Out = Result<std::vector<Tensor>>;


struct ConvGeometry {
  int64_t batch, channels, features, groups;
  int64_t outCount, kernelCount, inCount;  // spatial element counts
  std::vector<int64_t> table;              // [outCount * kernelCount] -> input index or -1
};

// x: [N, C, in...], w: [M, C/groups, k...], y: [N, M, out...].
Result<ConvGeometry> geometry(const ir::Node& n, const Shape& x, const Shape& w, const Shape& y) {
  size_t sp = x.size() < 2 ? 0 : x.size() - 2;
  if (x.size() < 3 || w.size() != x.size() || y.size() != x.size())
    return kernelError(n, "x, w and dy must have the same rank, 3 or more");
  std::vector<int64_t> strides = n.attrInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dil = n.attrInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = n.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  ConvGeometry g{x[0], x[1], w[0], n.attrInt("group", 1), 1, 1, 1, {}};
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp || g.groups <= 0 ||
      g.channels % g.groups != 0 || g.features % g.groups != 0 ||
      w[1] * g.groups != g.channels || y[0] != x[0] || y[1] != w[0])
    return kernelError(n, "inconsistent convolution shapes or attributes");
  for (size_t d = 0; d < sp; ++d) {
    int64_t span = dil[d] * (w[d + 2] - 1) + 1;
    if (strides[d] <= 0 || (x[d + 2] + pads[d] + pads[d + sp] - span) / strides[d] + 1 != y[d + 2])
      return kernelError(n, "dy's spatial shape does not match the convolution");
    g.outCount *= y[d + 2];
    g.kernelCount *= w[d + 2];
    g.inCount *= x[d + 2];
  }
  g.table.assign(g.outCount * g.kernelCount, -1);
  std::vector<int64_t> o(sp), k(sp);
  for (int64_t oi = 0; oi < g.outCount; ++oi) {
    for (int64_t r = oi, d = int64_t(sp) - 1; d >= 0; --d) o[d] = r % y[d + 2], r /= y[d + 2];
    for (int64_t ki = 0; ki < g.kernelCount; ++ki) {
      for (int64_t r = ki, d = int64_t(sp) - 1; d >= 0; --d) k[d] = r % w[d + 2], r /= w[d + 2];
      int64_t flat = 0;
      bool inside = true;
      for (size_t d = 0; d < sp && inside; ++d) {
        int64_t pos = o[d] * strides[d] - pads[d] + k[d] * dil[d];
        inside = pos >= 0 && pos < x[d + 2];
        flat = flat * x[d + 2] + pos;
      }
      if (inside) g.table[oi * g.kernelCount + ki] = flat;
    }
  }
  return g;
}

// Calls fn(dyValue, xOffset, wOffset) for every multiply-add of the forward convolution.
template <typename F>
void forEachTap(const ConvGeometry& g, const float* dy, F fn) {
  int64_t mPerGroup = g.features / g.groups, cPerGroup = g.channels / g.groups;
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t m = 0; m < g.features; ++m) {
      int64_t group = m / mPerGroup;
      const float* dyRow = dy + (b * g.features + m) * g.outCount;
      for (int64_t c = 0; c < cPerGroup; ++c) {
        int64_t xBase = (b * g.channels + group * cPerGroup + c) * g.inCount;
        int64_t wBase = (m * cPerGroup + c) * g.kernelCount;
        for (int64_t oi = 0; oi < g.outCount; ++oi) {
          const int64_t* row = g.table.data() + oi * g.kernelCount;
          for (int64_t ki = 0; ki < g.kernelCount; ++ki)
            if (row[ki] >= 0) fn(dyRow[oi], xBase + row[ki], wBase + ki);
        }
      }
    }
}

Out convGradInput(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 2));
  Shape xs = n.attrInts("shape");
  FBL_ASSIGN(ConvGeometry g, geometry(n, xs, in[1]->shape(), in[0]->shape()));
  Tensor dx(ir::DType::F32, xs);
  float* out = dx.data<float>();
  const float* w = in[1]->data<float>();
  forEachTap(g, in[0]->data<float>(), [&](float d, int64_t xo, int64_t wo) { out[xo] += d * w[wo]; });
  return std::vector<Tensor>{std::move(dx)};
}

Out convGradWeight(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 2));
  Shape ws = n.attrInts("shape");
  FBL_ASSIGN(ConvGeometry g, geometry(n, in[1]->shape(), ws, in[0]->shape()));
  std::vector<double> acc(ir::numElements(ws), 0.0);
  const float* x = in[1]->data<float>();
  forEachTap(g, in[0]->data<float>(), [&](float d, int64_t xo, int64_t wo) { acc[wo] += double(d) * x[xo]; });
  Tensor dw(ir::DType::F32, ws);
  for (size_t i = 0; i < acc.size(); ++i) dw.data<float>()[i] = static_cast<float>(acc[i]);
  return std::vector<Tensor>{std::move(dw)};
}

Status sameShapes(const ir::Node& n, const Inputs& in, size_t count) {
  for (size_t i = 1; i < count; ++i)
    if (in[i]->shape() != in[0]->shape())
      return kernelError(n, fmt::format("input {} differs in shape from the parameter", i));
  return Status::success();
}

// torch.optim.SGD (dampening 0, no Nesterov): g += wd * p; buf = momentum * buf + g; p -= lr * buf.
Out sgd(const ir::Node& n, const Inputs& in) {
  bool withState = in.size() > 2 && in[2] != nullptr;
  FBL_TRY(requireF32(n, in, withState ? 3 : 2));
  FBL_TRY(sameShapes(n, in, withState ? 3 : 2));
  float lr = n.attrFloat("lr", 1e-3f), mom = n.attrFloat("momentum", 0), wd = n.attrFloat("weight_decay", 0);
  Tensor p = *in[0], buf = withState ? *in[2] : Tensor();
  float* pp = p.data<float>();
  const float* g = in[1]->data<float>();
  for (int64_t i = 0; i < p.numel(); ++i) {
    float d = g[i] + wd * pp[i];
    if (withState) d = buf.data<float>()[i] = mom * buf.data<float>()[i] + d;
    pp[i] -= lr * d;
  }
  std::vector<Tensor> outs{std::move(p)};
  if (withState) outs.push_back(std::move(buf));
  return outs;
}

// torch.optim.AdamW: p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
// p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). Scalars in double, as torch.
Out adamw(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 4));
  FBL_TRY(sameShapes(n, in, 4));
  if (in.size() < 5 || in[4] == nullptr || in[4]->numel() != 1 || ir::isFloat(in[4]->dtype()))
    return kernelError(n, "step must be an integer scalar");
  int64_t t = in[4]->toInt64s()[0];
  if (t < 1) return kernelError(n, fmt::format("step must be 1 or more, not {}", t));
  if (in.size() != 5 && in.size() != 7) return kernelError(n, "takes 5 inputs, or 7 with lr and grad_scale");
  for (size_t k = 5; k < in.size(); ++k)
    if (in[k] == nullptr || in[k]->numel() != 1 || in[k]->dtype() != ir::DType::F32)
      return kernelError(n, "lr and grad_scale must be f32 scalars");
  const bool loop = in.size() == 7;
  double lr = loop ? double(in[5]->data<float>()[0]) : n.attrFloat("lr", 1e-3f), b1 = n.attrFloat("beta1", 0.9f),
         b2 = n.attrFloat("beta2", 0.999f), eps = n.attrFloat("epsilon", 1e-8f),
         wd = n.attrFloat("weight_decay", 0.0f);
  double stepSize = lr / (1 - std::pow(b1, double(t)));
  double bc2Sqrt = std::sqrt(1 - std::pow(b2, double(t)));
  float decay = static_cast<float>(1 - lr * wd);
  Tensor p = *in[0], m = *in[2], v = *in[3];
  // clip_grad_norm_ multiplies the gradient in place, in float, before the step reads it.
  std::vector<float> g(in[1]->data<float>(), in[1]->data<float>() + in[1]->numel());
  if (loop)
    for (float& x : g) x *= in[6]->data<float>()[0];
  float* pp = p.data<float>();
  float* mm = m.data<float>();
  float* vv = v.data<float>();
  for (int64_t i = 0; i < p.numel(); ++i) {
    pp[i] *= decay;
    mm[i] = static_cast<float>(b1 * mm[i] + (1 - b1) * g[i]);
    vv[i] = static_cast<float>(b2 * vv[i] + (1 - b2) * double(g[i]) * g[i]);
    double denom = std::sqrt(double(vv[i])) / bc2Sqrt + eps;
    pp[i] = static_cast<float>(pp[i] - stepSize * mm[i] / denom);
  }
  return std::vector<Tensor>{std::move(p), std::move(m), std::move(v)};
}

}  // namespace

std::vector<KernelEntry> convAndOptimizerKernels() {
  return {
      {"fbl.ConvGradInput", convGradInput},
      {"fbl.ConvGradWeight", convGradWeight},
      {"fbl.SGD", sgd},
      {"fbl.AdamW", adamw},
  };
}

}  // namespace fbl::ref
