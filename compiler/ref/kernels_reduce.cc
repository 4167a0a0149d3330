// Reductions and normalizations: ReduceSum/Mean/Max/Min/SumSquare/L2, ArgMax/ArgMin, Softmax,
// LogSoftmax, LayerNormalization, CumSum. Floating-point sums accumulate in double.
//
// A reduction reads its input through a View whose dims are ordered [kept..., reduced...], so
// every output element owns one contiguous run of R = prod(reduced dims) visited elements.
#include <cmath>
#include <limits>
#include <type_traits>

#include "compiler/ref/kernels_common.h"

namespace fbl::ref::detail {
namespace {

enum class Reduce { Sum, Mean, Max, Min, SumSquare, L2 };

template <Reduce kOp>
Outputs reduceOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  std::vector<int64_t> axes;
  if (const Tensor* a = optionalInput(in, 1)) {
    FBL_ASSIGN(axes, intValues(n, *a, "axes"));
  } else {
    axes = n.attrInts("axes");
  }
  const bool keepDims = n.attrInt("keepdims", 1) != 0;
  if (axes.empty() && n.attrInt("noop_with_empty_axes", 0) != 0) return single(*x);
  const int64_t r = x->rank();
  std::vector<bool> reduced(r, axes.empty());
  for (int64_t a : axes) {
    FBL_ASSIGN(int64_t ax, normalizeAxis(n, a, r));
    reduced[ax] = true;
  }
  Shape out, iterShape;
  View v;
  auto strides = ir::stridesOf(x->shape());
  int64_t count = 1;
  for (int64_t d = 0; d < r; ++d) {
    if (reduced[d]) {
      if (keepDims) out.push_back(1);
      count *= x->shape()[d];
    } else {
      out.push_back(x->shape()[d]);
      iterShape.push_back(x->shape()[d]);
      v.strides.push_back(strides[d]);
    }
  }
  for (int64_t d = 0; d < r; ++d)
    if (reduced[d]) {
      iterShape.push_back(x->shape()[d]);
      v.strides.push_back(strides[d]);
    }
  return withNumeric(n, x->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const int64_t outCount = ir::numElements(out);
    Acc init = 0;
    if constexpr (kOp == Reduce::Max) init = std::numeric_limits<T>::lowest();
    if constexpr (kOp == Reduce::Min) init = std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T> && kOp == Reduce::Max) init = -INFINITY;
    if constexpr (std::is_floating_point_v<T> && kOp == Reduce::Min) init = INFINITY;
    std::vector<Acc> acc(outCount, init);
    const T* px = x->data<T>();
    forEachIndex<1>(iterShape, {v}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      Acc& a = acc[i / count];
      Acc val = px[o[0]];
      if constexpr (kOp == Reduce::Max) {
        a = (val > a || val != val) ? val : a;
      } else if constexpr (kOp == Reduce::Min) {
        a = (val < a || val != val) ? val : a;
      } else if constexpr (kOp == Reduce::SumSquare || kOp == Reduce::L2) {
        a += val * val;
      } else {
        a += val;
      }
    });
    Tensor y(x->dtype(), out);
    T* py = y.data<T>();
    for (int64_t i = 0; i < outCount; ++i) {
      if constexpr (kOp == Reduce::Mean) {
        py[i] = static_cast<T>(static_cast<double>(acc[i]) / static_cast<double>(count));
      } else if constexpr (kOp == Reduce::L2) {
        py[i] = static_cast<T>(std::sqrt(static_cast<double>(acc[i])));
      } else {
        py[i] = static_cast<T>(acc[i]);
      }
    }
    return single(std::move(y));
  });
}

// Splits a shape around `axis` into [outer, dim, inner].
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};
AxisSplit splitAt(const Shape& s, int64_t axis) {
  AxisSplit a;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    (d < axis ? a.outer : d == axis ? a.dim : a.inner) *= s[d];
  return a;
}

template <bool kLog>
Outputs softmaxOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_TRY(expectDType(n, *x, 0, {DType::F32}));
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", -1), x->rank()));
  AxisSplit s = splitAt(x->shape(), axis);
  Tensor y(DType::F32, x->shape());
  const float* px = x->data<float>();
  float* py = y.data<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.dim * s.inner + i;
      float m = -INFINITY;
      for (int64_t d = 0; d < s.dim; ++d) m = std::max(m, px[base + d * s.inner]);
      double sum = 0;
      for (int64_t d = 0; d < s.dim; ++d) sum += std::exp(static_cast<double>(px[base + d * s.inner]) - m);
      const double logSum = std::log(sum);
      for (int64_t d = 0; d < s.dim; ++d) {
        double z = static_cast<double>(px[base + d * s.inner]) - m;
        py[base + d * s.inner] = static_cast<float>(kLog ? z - logSum : std::exp(z) / sum);
      }
    }
  return single(std::move(y));
}

Outputs layerNormOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* scale, input(n, in, 1));
  const Tensor* bias = optionalInput(in, 2);
  FBL_TRY(expectDType(n, *x, 0, {DType::F32}));
  FBL_TRY(expectDType(n, *scale, 1, {DType::F32}));
  if (bias) FBL_TRY(expectDType(n, *bias, 2, {DType::F32}));
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", -1), x->rank()));
  const double eps = n.attrFloat("epsilon", 1e-5f);
  Shape norm(x->shape().begin() + axis, x->shape().end());
  // Scale and B broadcast (unidirectionally) to the normalized shape.
  for (const Tensor* t : {scale, bias}) {
    if (!t) continue;
    FBL_ASSIGN(Shape b, broadcastShapes(n, {&t->shape(), &norm}));
    if (b != norm)
      return nodeError(n, "scale/bias shape {} does not broadcast to {}",
                       ir::shapeToString(t->shape()), ir::shapeToString(norm));
  }
  const int64_t d = ir::numElements(norm);
  const int64_t rows = d == 0 ? 0 : x->numel() / d;
  Tensor gamma = gatherView(*scale, View{0, broadcastStrides(scale->shape(), norm)}, norm);
  Tensor beta(DType::F32, norm);
  if (bias) beta = gatherView(*bias, View{0, broadcastStrides(bias->shape(), norm)}, norm);
  Shape statShape = x->shape();
  for (int64_t k = axis; k < x->rank(); ++k) statShape[k] = 1;
  Tensor y(DType::F32, x->shape()), mean(DType::F32, statShape), invStd(DType::F32, statShape);
  const float *px = x->data<float>(), *pg = gamma.data<float>(), *pb = beta.data<float>();
  float* py = y.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = px + r * d;
    double sum = 0;
    for (int64_t k = 0; k < d; ++k) sum += row[k];
    const double mu = sum / d;
    double sq = 0;
    for (int64_t k = 0; k < d; ++k) sq += (row[k] - mu) * (row[k] - mu);
    const double inv = 1.0 / std::sqrt(sq / d + eps);
    for (int64_t k = 0; k < d; ++k)
      py[r * d + k] = static_cast<float>((row[k] - mu) * inv * pg[k] + pb[k]);
    mean.data<float>()[r] = static_cast<float>(mu);
    invStd.data<float>()[r] = static_cast<float>(inv);
  }
  std::vector<Tensor> outs;
  outs.push_back(std::move(y));
  outs.push_back(std::move(mean));
  outs.push_back(std::move(invStd));
  return outs;
}

Outputs cumSumOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* a, input(n, in, 1));
  FBL_ASSIGN(int64_t axisRaw, intScalar(n, *a, "axis"));
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, axisRaw, x->rank()));
  const bool exclusive = n.attrInt("exclusive", 0) != 0;
  const bool reverse = n.attrInt("reverse", 0) != 0;
  AxisSplit s = splitAt(x->shape(), axis);
  return withNumeric(n, x->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    Tensor y(x->dtype(), x->shape());
    const T* px = x->data<T>();
    T* py = y.data<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        Acc acc = 0;
        for (int64_t step = 0; step < s.dim; ++step) {
          int64_t d = reverse ? s.dim - 1 - step : step;
          int64_t at = (o * s.dim + d) * s.inner + i;
          if (exclusive) {
            py[at] = static_cast<T>(acc);
            acc += px[at];
          } else {
            acc += px[at];
            py[at] = static_cast<T>(acc);
          }
        }
      }
    return single(std::move(y));
  });
}

// ArgMax (kMax) or ArgMin: the first position of the extremum along the axis (select_last_index:
// the last); a NaN counts as the extremum, as in PyTorch, and the first NaN wins.
template <bool kMax>
Outputs argExtremumOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  if (x->rank() == 0) return nodeError(n, "the input is a scalar: there is no axis to search");
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", 0), x->rank()));
  if (x->shape()[axis] == 0) return nodeError(n, "the axis is empty: it has no extremum");
  const bool last = n.attrInt("select_last_index", 0) != 0;
  Shape out = x->shape();
  if (n.attrInt("keepdims", 1) != 0) out[axis] = 1;
  else out.erase(out.begin() + axis);
  const AxisSplit s = splitAt(x->shape(), axis);
  return withNumeric(n, x->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    const T* px = x->data<T>();
    Tensor y(DType::I64, out);
    int64_t* py = y.data<int64_t>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        auto at = [&](int64_t d) { return px[(o * s.dim + d) * s.inner + i]; };
        int64_t best = 0;
        for (int64_t d = 1; d < s.dim; ++d) {
          const T v = at(d), b = at(best);
          if (b != b) break;  // NaN: the first one wins
          const bool better = v != v || (kMax ? v > b : v < b) || (last && v == b);
          if (better) best = d;
        }
        py[o * s.inner + i] = best;
      }
    return single(std::move(y));
  });
}

}  // namespace

std::vector<KernelEntry> reduceKernels() {
  return {
      {"ReduceSum", reduceOp<Reduce::Sum>},
      {"ReduceMean", reduceOp<Reduce::Mean>},
      {"ReduceMax", reduceOp<Reduce::Max>},
      {"ReduceMin", reduceOp<Reduce::Min>},
      {"ReduceSumSquare", reduceOp<Reduce::SumSquare>},
      {"ReduceL2", reduceOp<Reduce::L2>},
      {"ArgMax", argExtremumOp<true>},
      {"ArgMin", argExtremumOp<false>},
      {"Softmax", softmaxOp<false>},
      {"LogSoftmax", softmaxOp<true>},
      {"LayerNormalization", layerNormOp},
      {"CumSum", cumSumOp},
  };
}

}  // namespace fbl::ref::detail
