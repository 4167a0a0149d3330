// Reductions and normalizations: ReduceSum/Mean/Max/Min/SumSquare/L2, ArgMax/ArgMin, TopK, Softmax,
// LogSoftmax, Layer/Instance/BatchNormalization, the pools, CumSum. Floating-point sums
// accumulate in double.
//
// A reduction reads its input through a View whose dims are ordered [kept..., reduced...], so
// every output element owns one contiguous run of R = prod(reduced dims) visited elements.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "compiler/ops/pooling.h"
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

// InstanceNormalization and BatchNormalization over X [N, C, d1..]: per channel c, the mean and
// biased variance over the elements `stats` groups (one sample's channel, or the channel across
// the batch), then Y = (X - mean) / sqrt(var + eps) * scale[c] + B[c]. BatchNormalization in
// inference mode normalizes with its inputs input_mean and input_var instead; in training mode
// its optional outputs are ONNX's running statistics, input * momentum + batch * (1 - momentum).
enum class ChannelNorm { Instance, Batch };

template <ChannelNorm kNorm>
Outputs channelNormOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_TRY(expectDType(n, *x, 0, {DType::F32}));
  if (x->rank() < 2) return nodeError(n, "X {} has no channel axis", ir::shapeToString(x->shape()));
  const int64_t N = x->shape()[0], C = x->shape()[1], D = N * C == 0 ? 0 : x->numel() / (N * C);
  const size_t perChannel = kNorm == ChannelNorm::Batch ? 4 : 2;
  std::vector<const float*> p(perChannel + 1);
  for (size_t i = 1; i <= perChannel; ++i) {
    FBL_ASSIGN(const Tensor* t, input(n, in, i));
    FBL_TRY(expectDType(n, *t, i, {DType::F32}));
    if (t->shape() != Shape{C})
      return nodeError(n, "input {} is {}, not [{}]", i, ir::shapeToString(t->shape()), C);
    p[i] = t->data<float>();
  }
  const double eps = n.attrFloat("epsilon", 1e-5f), momentum = n.attrFloat("momentum", 0.9f);
  const bool batchStats = kNorm == ChannelNorm::Instance || n.attrInt("training_mode", 0) != 0;
  const float* px = x->data<float>();
  Tensor y(DType::F32, x->shape()), runMean(DType::F32, {C}), runVar(DType::F32, {C});
  float* py = y.data<float>();
  // The elements of channel c in sample s: px[(s * C + c) * D + k].
  auto normalize = [&](int64_t c, int64_t s0, int64_t s1) {
    double mu, var;
    if (batchStats) {
      const double count = static_cast<double>((s1 - s0) * D);
      double sum = 0, sq = 0;
      for (int64_t s = s0; s < s1; ++s)
        for (int64_t k = 0; k < D; ++k) sum += px[(s * C + c) * D + k];
      mu = sum / count;
      for (int64_t s = s0; s < s1; ++s)
        for (int64_t k = 0; k < D; ++k) sq += (px[(s * C + c) * D + k] - mu) * (px[(s * C + c) * D + k] - mu);
      var = sq / count;
    } else {
      mu = p[3][c], var = p[4][c];
    }
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t k = 0; k < D; ++k) {
        const int64_t e = (s * C + c) * D + k;
        py[e] = static_cast<float>((px[e] - mu) * inv * p[1][c] + p[2][c]);
      }
    if (kNorm == ChannelNorm::Batch && batchStats) {
      runMean.data<float>()[c] = static_cast<float>(p[3][c] * momentum + mu * (1 - momentum));
      runVar.data<float>()[c] = static_cast<float>(p[4][c] * momentum + var * (1 - momentum));
    }
  };
  for (int64_t c = 0; c < C; ++c) {
    if (kNorm == ChannelNorm::Batch) normalize(c, 0, N);
    else
      for (int64_t s = 0; s < N; ++s) normalize(c, s, s + 1);
  }
  std::vector<Tensor> outs;
  outs.push_back(std::move(y));
  if (n.outputs.size() > 1) outs.push_back(std::move(runMean));
  if (n.outputs.size() > 2) outs.push_back(std::move(runVar));
  return outs;
}

// MaxPool / AveragePool by their windows (ops/pooling.h), visited naively: per output element,
// every kernel tap inside the input. A max keeps the first of equal elements and takes a NaN.
template <bool kMax>
Outputs poolOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_TRY(expectDType(n, *x, 0, {DType::F32}));
  auto geometry = ops::poolGeometry(n, x->shape());
  if (!geometry.ok()) return nodeError(n, "{}", geometry.error().message);
  const std::vector<ops::PoolAxis>& axes = *geometry;
  const size_t k = axes.size();
  Shape yShape(x->shape().begin(), x->shape().begin() + 2);
  int64_t taps = 1;
  for (const auto& a : axes) yShape.push_back(a.out), taps *= a.kernel;
  Tensor y(DType::F32, yShape);
  const std::vector<double> divisors = ops::averagePoolDivisors(axes, n.attrInt("count_include_pad", 0) != 0);
  const int64_t planes = yShape[0] * yShape[1], outPerPlane = static_cast<int64_t>(divisors.size());
  const int64_t inPerPlane = planes == 0 ? 0 : x->numel() / planes;
  const float* px = x->data<float>();
  float* py = y.data<float>();
  std::vector<int64_t> o(k), inStride(k, 1);  // row-major strides of a plane's spatial axes
  for (size_t i = k; i-- > 1;) inStride[i - 1] = inStride[i] * axes[i].in;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t e = 0; e < outPerPlane; ++e) {
      for (size_t i = k, rest = static_cast<size_t>(e); i-- > 0;) o[i] = rest % axes[i].out, rest /= axes[i].out;
      double acc = kMax ? -INFINITY : 0.0;
      for (int64_t tap = 0; tap < taps; ++tap) {
        int64_t offset = 0;
        bool inside = true;
        for (size_t i = k, rest = static_cast<size_t>(tap); i-- > 0;) {
          const int64_t at = o[i] * axes[i].stride + static_cast<int64_t>(rest % axes[i].kernel) * axes[i].dilation -
                             axes[i].padBegin;
          rest /= axes[i].kernel;
          inside &= at >= 0 && at < axes[i].in;
          offset += at * inStride[i];
        }
        if (!inside) continue;
        const double v = px[p * inPerPlane + offset];
        if (kMax) acc = (v > acc || v != v) && acc == acc ? v : acc;
        else acc += v;
      }
      py[p * outPerPlane + e] = static_cast<float>(kMax ? acc : acc / divisors[e]);
    }
  return single(std::move(y));
}

// GlobalAveragePool / GlobalMaxPool: per [N, C] plane, the mean or max of its elements.
template <bool kMax>
Outputs globalPoolOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_TRY(expectDType(n, *x, 0, {DType::F32}));
  if (x->rank() < 3) return nodeError(n, "X {} has no spatial axis", ir::shapeToString(x->shape()));
  Shape yShape = x->shape();
  std::fill(yShape.begin() + 2, yShape.end(), 1);
  Tensor y(DType::F32, yShape);
  const int64_t planes = yShape[0] * yShape[1], d = planes == 0 ? 0 : x->numel() / planes;
  for (int64_t p = 0; p < planes; ++p) {
    const float* row = x->data<float>() + p * d;
    double acc = kMax ? -INFINITY : 0.0;
    for (int64_t i = 0; i < d; ++i) acc = kMax ? ((row[i] > acc || row[i] != row[i]) && acc == acc ? row[i] : acc) : acc + row[i];
    y.data<float>()[p] = static_cast<float>(kMax ? acc : acc / static_cast<double>(d));
  }
  return single(std::move(y));
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

// TopK: per line along the axis, the K elements first in the order "larger first" (largest=1) or
// "smaller first", NaN ranked above every number either way (as PyTorch ranks it), equal values
// by their position; always sorted (ONNX leaves sorted=0's order open).
template <typename T>
bool rankedBefore(T a, int64_t ia, T b, int64_t ib, bool largest) {
  const bool na = a != a, nb = b != b;
  if (na != nb) return largest ? na : nb;
  if (!na && a != b) return largest ? a > b : a < b;
  return ia < ib;
}

Outputs topKOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* kt, input(n, in, 1));
  if (x->rank() == 0) return nodeError(n, "X is a scalar: there is no axis to rank along");
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", -1), x->rank()));
  if (kt->numel() != 1) return nodeError(n, "K holds {} values, not one", kt->numel());
  const int64_t k = static_cast<int64_t>(kt->at(0));
  if (k < 0 || k > x->shape()[axis]) return nodeError(n, "K = {} is outside [0, {}]", k, x->shape()[axis]);
  const bool largest = n.attrInt("largest", 1) != 0;
  Shape out = x->shape();
  out[axis] = k;
  const AxisSplit s = splitAt(x->shape(), axis);
  return withNumeric(n, x->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    const T* px = x->data<T>();
    Tensor values(x->dtype(), out), indices(DType::I64, out);
    std::vector<int64_t> order(static_cast<size_t>(s.dim));
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        auto at = [&](int64_t d) { return px[(o * s.dim + d) * s.inner + i]; };
        for (int64_t d = 0; d < s.dim; ++d) order[d] = d;
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return rankedBefore(at(a), a, at(b), b, largest); });
        for (int64_t j = 0; j < k; ++j) {
          values.data<T>()[(o * k + j) * s.inner + i] = at(order[j]);
          indices.data<int64_t>()[(o * k + j) * s.inner + i] = order[j];
        }
      }
    std::vector<Tensor> outs;
    outs.push_back(std::move(values));
    outs.push_back(std::move(indices));
    return outs;
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
      {"TopK", topKOp},
      {"Softmax", softmaxOp<false>},
      {"LogSoftmax", softmaxOp<true>},
      {"LayerNormalization", layerNormOp},
      {"InstanceNormalization", channelNormOp<ChannelNorm::Instance>},
      {"BatchNormalization", channelNormOp<ChannelNorm::Batch>},
      {"MaxPool", poolOp<true>},
      {"AveragePool", poolOp<false>},
      {"GlobalMaxPool", globalPoolOp<true>},
      {"GlobalAveragePool", globalPoolOp<false>},
      {"CumSum", cumSumOp},
  };
}

}  // namespace fbl::ref::detail
