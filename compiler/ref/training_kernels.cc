// Reference kernels of the gradient ops: plain fp32 loops that define what each fbl op computes
// (see the op list in ops/training_schemas.cc). Reductions accumulate in double.
#include <cmath>

#include <fmt/format.h>

#include "compiler/ops/broadcast.h"
#include "compiler/ref/training_kernels.h"

namespace fbl::ref {

Error kernelError(const ir::Node& n, std::string_view msg) {
  return makeError("{} '{}': {}", n.op, n.name, msg);
}

Status requireF32(const ir::Node& n, const Inputs& in, size_t count) {
  if (in.size() < count) return kernelError(n, fmt::format("expects {} inputs", count));
  for (size_t i = 0; i < count; ++i)
    if (in[i] == nullptr || in[i]->dtype() != ir::DType::F32)
      return kernelError(n, fmt::format("input {} must be an f32 tensor", i));
  return Status::success();
}

namespace {

using ir::Shape;
using ir::Tensor;
using Out = Result<std::vector<Tensor>>;


// Calls fn(i, offset) for every element i of `shape` in row-major order, where offset is the
// dot product of the element's index with `strides` (an odometer: no division per element).
template <typename F>
void walk(const Shape& shape, const std::vector<int64_t>& strides, F fn) {
  int64_t total = ir::numElements(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    fn(i, off);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// [outer, n, inner] around `axis`.
struct Split3 {
  int64_t outer = 1, n = 1, inner = 1;
};
Split3 split(const Shape& s, int64_t axis) {
  Split3 r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    (d < axis ? r.outer : d == axis ? r.n : r.inner) *= s[d];
  return r;
}

Out reduceSumTo(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 1));
  Shape to = n.attrInts("shape");
  if (!ops::broadcastsTo(to, in[0]->shape())) return kernelError(n, "shape does not broadcast");
  Tensor out(ir::DType::F32, to);
  const float* x = in[0]->data<float>();
  float* o = out.data<float>();
  std::vector<double> acc(out.numel(), 0.0);
  walk(in[0]->shape(), ops::broadcastStrides(to, in[0]->shape()),
       [&](int64_t i, int64_t off) { acc[off] += x[i]; });
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<float>(acc[i]);
  return std::vector<Tensor>{std::move(out)};
}

// Elementwise dx = f(dy, saved) over equal shapes.
template <typename F>
Out pointwise(const ir::Node& n, const Inputs& in, F f) {
  FBL_TRY(requireF32(n, in, 2));
  if (in[0]->shape() != in[1]->shape()) return kernelError(n, "dy and the saved tensor differ in shape");
  Tensor out(ir::DType::F32, in[1]->shape());
  const float* dy = in[0]->data<float>();
  const float* s = in[1]->data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = static_cast<float>(f(double(dy[i]), double(s[i])));
  return std::vector<Tensor>{std::move(out)};
}

constexpr double kPi = 3.14159265358979323846;

Out sigmoidGrad(const ir::Node& n, const Inputs& in) {
  return pointwise(n, in, [](double dy, double y) { return dy * y * (1 - y); });
}
Out tanhGrad(const ir::Node& n, const Inputs& in) {
  return pointwise(n, in, [](double dy, double y) { return dy * (1 - y * y); });
}
Out erfGrad(const ir::Node& n, const Inputs& in) {
  return pointwise(n, in, [](double dy, double x) { return dy * 2 / std::sqrt(kPi) * std::exp(-x * x); });
}
Out geluGrad(const ir::Node& n, const Inputs& in) {
  if (n.attrString("approximate", "none") == "tanh")
    return pointwise(n, in, [](double dy, double x) {
      const double k = std::sqrt(2 / kPi), c = 0.044715;
      double t = std::tanh(k * (x + c * x * x * x));
      return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x));
    });
  return pointwise(n, in, [](double dy, double x) {
    double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
    double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * kPi);
    return dy * (cdf + x * pdf);
  });
}

Out softmaxGrad(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 2));
  const Shape& s = in[1]->shape();
  if (in[0]->shape() != s) return kernelError(n, "dy and y differ in shape");
  int64_t axis = n.attrInt("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  if (axis < 0 || axis >= static_cast<int64_t>(s.size())) return kernelError(n, "axis out of range");
  Split3 p = split(s, axis);
  Tensor out(ir::DType::F32, s);
  const float* dy = in[0]->data<float>();
  const float* y = in[1]->data<float>();
  float* dx = out.data<float>();
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t i = 0; i < p.inner; ++i) {
      int64_t base = o * p.n * p.inner + i;
      double dot = 0;
      for (int64_t k = 0; k < p.n; ++k) dot += double(dy[base + k * p.inner]) * y[base + k * p.inner];
      for (int64_t k = 0; k < p.n; ++k) {
        int64_t j = base + k * p.inner;
        dx[j] = static_cast<float>(y[j] * (dy[j] - dot));
      }
    }
  return std::vector<Tensor>{std::move(out)};
}

// Per row of the normalized axes: xhat = (x - mean) * rstd, g = dy * scale,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); dscale = sum dy * xhat, dbias = sum dy.
Out layerNormGrad(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 3));
  const Shape& s = in[1]->shape();
  if (in[0]->shape() != s) return kernelError(n, "dy and x differ in shape");
  int64_t axis = n.attrInt("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  if (axis < 0 || axis > static_cast<int64_t>(s.size())) return kernelError(n, "axis out of range");
  Shape normShape(s.begin() + axis, s.end());
  const Shape& scaleShape = in[2]->shape();
  if (!ops::broadcastsTo(scaleShape, normShape)) return kernelError(n, "scale does not broadcast");
  int64_t rows = ir::numElements(Shape(s.begin(), s.begin() + axis));
  int64_t cols = ir::numElements(normShape);
  std::vector<int64_t> scaleAt(cols);
  walk(normShape, ops::broadcastStrides(scaleShape, normShape),
       [&](int64_t j, int64_t off) { scaleAt[j] = off; });
  double eps = n.attrFloat("epsilon", 1e-5f);
  const float* dy = in[0]->data<float>();
  const float* x = in[1]->data<float>();
  const float* scale = in[2]->data<float>();
  Tensor dx(ir::DType::F32, s);
  std::vector<double> dscale(in[2]->numel(), 0.0), dbias(in[2]->numel(), 0.0);
  std::vector<double> xhat(cols), g(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) mean += xr[j];
    mean /= double(cols);
    for (int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    double rstd = 1 / std::sqrt(var / double(cols) + eps);
    double meanG = 0, meanGX = 0;
    for (int64_t j = 0; j < cols; ++j) {
      xhat[j] = (xr[j] - mean) * rstd;
      g[j] = double(dyr[j]) * scale[scaleAt[j]];
      meanG += g[j];
      meanGX += g[j] * xhat[j];
      dscale[scaleAt[j]] += dyr[j] * xhat[j];
      dbias[scaleAt[j]] += dyr[j];
    }
    meanG /= double(cols);
    meanGX /= double(cols);
    float* dxr = dx.data<float>() + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      dxr[j] = static_cast<float>(rstd * (g[j] - meanG - xhat[j] * meanGX));
  }
  auto toTensor = [&](const std::vector<double>& v) {
    Tensor t(ir::DType::F32, scaleShape);
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
    return t;
  };
  std::vector<Tensor> outs(n.outputs.size());
  if (!outs.empty()) outs[0] = std::move(dx);
  if (outs.size() > 1) outs[1] = toTensor(dscale);
  if (outs.size() > 2) outs[2] = toTensor(dbias);
  return outs;
}

// scores [N, C, d...], labels [N, d...]: softmax over C, minus the one-hot label, times the
// label's weight and the reduction's scale; rows whose label is ignore_index get zero.
Out sceGrad(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 2));
  const Tensor& scores = *in[1];
  if (in[2] == nullptr) return kernelError(n, "missing labels");
  const Shape& s = scores.shape();
  if (s.size() < 2) return kernelError(n, "scores must have rank 2 or more");
  int64_t batch = s[0], classes = s[1], inner = ir::numElements(Shape(s.begin() + 2, s.end()));
  if (in[2]->numel() != batch * inner) return kernelError(n, "labels do not match the scores' shape");
  std::vector<int64_t> labels = in[2]->toInt64s();
  const Tensor* weights = in.size() > 3 ? in[3] : nullptr;
  if (weights && (weights->dtype() != ir::DType::F32 || weights->numel() != classes))
    return kernelError(n, "weights must be f32 with one entry per class");
  std::string reduction = n.attrString("reduction", "mean");
  bool hasIgnore = n.hasAttr("ignore_index");
  int64_t ignore = n.attrInt("ignore_index", 0);
  const Tensor& dloss = *in[0];
  if (reduction == "none" ? dloss.numel() != batch * inner : dloss.numel() != 1)
    return kernelError(n, "dloss has the wrong number of elements for reduction " + reduction);
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return kernelError(n, "unknown reduction " + reduction);
  double weightSum = 0;
  for (int64_t r = 0; r < batch * inner; ++r) {
    int64_t l = labels[r];
    if (hasIgnore && l == ignore) continue;
    if (l < 0 || l >= classes)
      return kernelError(n, fmt::format("label {} is outside [0, {})", l, classes));
    weightSum += weights ? weights->data<float>()[l] : 1.0;
  }
  Tensor out(ir::DType::F32, s);
  const float* x = scores.data<float>();
  const float* dl = dloss.data<float>();
  float* dx = out.data<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t r = b * inner + i, l = labels[r];
      if (hasIgnore && l == ignore) continue;
      double scale = reduction == "none" ? dl[r] : dl[0];
      // A mean over no counted labels is 0/0 in the forward pass; its gradient is taken as 0.
      if (reduction == "mean") scale = weightSum == 0 ? 0 : scale / weightSum;
      scale *= weights ? weights->data<float>()[l] : 1.0;
      const float* xr = x + b * classes * inner + i;
      double mx = xr[0];
      for (int64_t c = 1; c < classes; ++c) mx = std::max(mx, double(xr[c * inner]));
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(xr[c * inner] - mx);
      for (int64_t c = 0; c < classes; ++c) {
        double p = std::exp(xr[c * inner] - mx) / sum;
        dx[b * classes * inner + c * inner + i] = static_cast<float>(scale * (p - (c == l)));
      }
    }
  return std::vector<Tensor>{std::move(out)};
}

Out gatherGrad(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 1));
  if (in.size() < 2 || in[1] == nullptr) return kernelError(n, "missing indices");
  Shape s = n.attrInts("shape");
  int64_t axis = n.attrInt("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  if (axis < 0 || axis >= static_cast<int64_t>(s.size())) return kernelError(n, "axis out of range");
  Split3 p = split(s, axis);
  std::vector<int64_t> idx = in[1]->toInt64s();
  int64_t count = static_cast<int64_t>(idx.size());
  if (in[0]->numel() != p.outer * count * p.inner) return kernelError(n, "dy does not match the indices");
  Tensor out(ir::DType::F32, s);
  const float* dy = in[0]->data<float>();
  float* dx = out.data<float>();
  for (int64_t j = 0; j < count; ++j) {
    int64_t k = idx[j] < 0 ? idx[j] + p.n : idx[j];
    if (k < 0 || k >= p.n) return kernelError(n, fmt::format("index {} is outside [0, {})", idx[j], p.n));
    idx[j] = k;
  }
  for (int64_t o = 0; o < p.outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      float* dst = dx + (o * p.n + idx[j]) * p.inner;
      const float* src = dy + (o * count + j) * p.inner;
      for (int64_t i = 0; i < p.inner; ++i) dst[i] += src[i];
    }
  return std::vector<Tensor>{std::move(out)};
}

// dy walks the sliced positions: offset start*stride on each sliced axis, step*stride per index.
Out sliceGrad(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 1));
  Shape s = n.attrInts("shape");
  std::vector<int64_t> axes = n.attrInts("axes"), starts = n.attrInts("starts"),
                       steps = n.attrInts("steps");
  const Shape& sy = in[0]->shape();
  if (sy.size() != s.size() || axes.size() != starts.size() || axes.size() != steps.size())
    return kernelError(n, "inconsistent slice attributes");
  std::vector<int64_t> outStrides = ir::stridesOf(s), walkStrides = outStrides;
  int64_t base = 0;
  std::vector<bool> sliced(s.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < 0 || a >= static_cast<int64_t>(s.size()) || sliced[a]) return kernelError(n, "bad axis");
    sliced[a] = true;
    int64_t last = starts[i] + (sy[a] - 1) * steps[i];
    if (sy[a] > 0 && (starts[i] < 0 || starts[i] >= s[a] || last < 0 || last >= s[a]))
      return kernelError(n, "slice runs outside the input");
    base += starts[i] * outStrides[a];
    walkStrides[a] = outStrides[a] * steps[i];
  }
  for (size_t d = 0; d < s.size(); ++d)
    if (!sliced[d] && sy[d] != s[d]) return kernelError(n, "dy does not match the input shape");
  Tensor out(ir::DType::F32, s);
  const float* dy = in[0]->data<float>();
  float* dx = out.data<float>();
  walk(sy, walkStrides, [&](int64_t i, int64_t off) { dx[base + off] = dy[i]; });
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace

std::vector<KernelEntry> gradKernels() {
  return {
      {"fbl.ReduceSumTo", reduceSumTo},
      {"fbl.SoftmaxGrad", softmaxGrad},
      {"fbl.LayerNormGrad", layerNormGrad},
      {"fbl.GeluGrad", geluGrad},
      {"fbl.ErfGrad", erfGrad},
      {"fbl.SigmoidGrad", sigmoidGrad},
      {"fbl.TanhGrad", tanhGrad},
      {"fbl.SoftmaxCrossEntropyLossGrad", sceGrad},
      {"fbl.GatherGrad", gatherGrad},
      {"fbl.SliceGrad", sliceGrad},
  };
}

std::vector<KernelEntry> trainingKernels() {
  std::vector<KernelEntry> all = gradKernels();
  for (const auto& k : convAndOptimizerKernels()) all.push_back(k);
  for (const auto& k : attentionKernels()) all.push_back(k);
  return all;
}

}  // namespace fbl::ref
