// Elementwise kernels: unary math, broadcasting binary arithmetic, comparisons, logic, Where,
// variadic Max/Min, and the value-preserving ops (Cast, CastLike, Identity, Dropout).
//
// Every broadcasting op goes through broadcastMap(), one loop over forEachIndex with a View per
// operand whose strides are 0 on broadcast dims.
#include <cmath>
#include <limits>
#include <type_traits>

#include "compiler/ref/kernels_common.h"

namespace fbl::ref::detail {
namespace {

// out[idx] = fn(a[idx'], b[idx'']) over the broadcast shape of a and b.
template <class TIn, class TOut, class Fn>
Tensor broadcastMap(const Tensor& a, const Tensor& b, const Shape& out, Fn fn) {
  Tensor y(ir::dtypeOf<TOut>(), out);
  const TIn* pa = a.data<TIn>();
  const TIn* pb = b.data<TIn>();
  TOut* py = y.data<TOut>();
  forEachIndex<2>(out, {View{0, broadcastStrides(a.shape(), out)},
                        View{0, broadcastStrides(b.shape(), out)}},
                  [&](int64_t i, const std::array<int64_t, 2>& o) { py[i] = fn(pa[o[0]], pb[o[1]]); });
  return y;
}

template <class T, class Fn>
Tensor mapUnary(const Tensor& x, Fn fn) {
  Tensor y(x.dtype(), x.shape());
  const T* s = x.data<T>();
  T* d = y.data<T>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = fn(s[i]);
  return y;
}

// ---- unary -------------------------------------------------------------------------------

template <class Fn>
Outputs unaryFloat(const Node& n, const Inputs& in, Fn fn) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_TRY(expectDType(n, *x, 0, {DType::F32}));
  return single(mapUnary<float>(*x, fn));
}

// Ops defined on signed integers as well as floats.
template <class Fn>
Outputs unarySigned(const Node& n, const Inputs& in, Fn fn) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  return withNumeric(n, x->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    return single(mapUnary<T>(*x, [&](T v) { return static_cast<T>(fn(v)); }));
  });
}

float sigmoid(float x) {
  double d = x;
  return static_cast<float>(d >= 0 ? 1.0 / (1.0 + std::exp(-d)) : std::exp(d) / (1.0 + std::exp(d)));
}

Outputs gelu(const Node& n, const Inputs& in) {
  std::string approx = n.attrString("approximate", "none");
  if (approx == "none")
    return unaryFloat(n, in, [](float x) {
      return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    });
  if (approx == "tanh")
    return unaryFloat(n, in, [](float x) {
      double d = x;
      double inner = std::sqrt(2.0 / M_PI) * (d + 0.044715 * d * d * d);
      return static_cast<float>(0.5 * d * (1.0 + std::tanh(inner)));
    });
  return nodeError(n, "approximate='{}' is not supported (none, tanh)", approx);
}

Outputs notOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_TRY(expectDType(n, *x, 0, {DType::Bool}));
  return single(mapUnary<bool>(*x, [](bool v) { return !v; }));
}

// ---- binary ------------------------------------------------------------------------------

struct Operands {
  const Tensor* a;
  const Tensor* b;
  Shape out;
};

Result<Operands> binaryOperands(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* a, input(n, in, 0));
  FBL_ASSIGN(const Tensor* b, input(n, in, 1));
  FBL_TRY(expectSameDType(n, *a, *b));
  FBL_ASSIGN(Shape out, broadcastShapes(n, {&a->shape(), &b->shape()}));
  return Operands{a, b, std::move(out)};
}

template <class Fn>
Outputs arith(const Node& n, const Inputs& in, Fn fn) {
  FBL_ASSIGN(Operands o, binaryOperands(n, in));
  return withNumeric(n, o.a->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    return single(broadcastMap<T, T>(*o.a, *o.b, o.out, [&](T x, T y) { return static_cast<T>(fn(x, y)); }));
  });
}

Outputs divOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(Operands o, binaryOperands(n, in));
  return withNumeric(n, o.a->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      return single(broadcastMap<T, T>(*o.a, *o.b, o.out, [](T x, T y) { return x / y; }));
    } else {
      // Integer division truncates toward zero; a zero divisor (or MIN / -1) is an error,
      // not a trap.
      bool bad = false;
      Tensor y = broadcastMap<T, T>(*o.a, *o.b, o.out, [&](T x, T d) -> T {
        if (d == 0 || (d == -1 && x == std::numeric_limits<T>::min())) {
          bad = true;
          return 0;
        }
        return x / d;
      });
      if (bad) return nodeError(n, "integer division by zero or overflow");
      return single(std::move(y));
    }
  });
}

// fmod=1: the remainder takes the dividend's sign (C's %, std::fmod); fmod=0 (integers only): the
// divisor's (Python's %). A zero integer divisor is an error, as in Div.
Outputs modOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(Operands o, binaryOperands(n, in));
  const bool truncated = n.attrInt("fmod", 0) == 1;
  return withNumeric(n, o.a->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (!truncated) return nodeError(n, "Mod of floats needs fmod=1");
      return single(broadcastMap<T, T>(*o.a, *o.b, o.out, [](T x, T y) { return static_cast<T>(std::fmod(x, y)); }));
    } else {
      bool bad = false;
      Tensor y = broadcastMap<T, T>(*o.a, *o.b, o.out, [&](T x, T d) -> T {
        if (d == 0 || (d == -1 && x == std::numeric_limits<T>::min())) {
          bad = true;
          return 0;
        }
        T r = static_cast<T>(x % d);
        if (!truncated && r != 0 && ((r < 0) != (d < 0))) r = static_cast<T>(r + d);
        return r;
      });
      if (bad) return nodeError(n, "integer Mod by zero or overflow");
      return single(std::move(y));
    }
  });
}

Outputs powOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* a, input(n, in, 0));
  FBL_ASSIGN(const Tensor* b, input(n, in, 1));
  FBL_ASSIGN(Shape out, broadcastShapes(n, {&a->shape(), &b->shape()}));
  FBL_TRY(expectDType(n, *a, 0, {DType::F32, DType::F64, DType::I64, DType::I32}));
  FBL_TRY(expectDType(n, *b, 1, {DType::F32, DType::F64, DType::I64, DType::I32}));
  // The exponent may have its own dtype (T1, T2 in the spec): compute in the base's type.
  Tensor e = b->castTo(a->dtype());
  return withNumeric(n, a->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    return single(broadcastMap<T, T>(*a, e, out, [](T x, T y) {
      return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }));
  });
}

// Comparisons: any dtype for Equal, numeric for the orderings; output bool.
template <class Fn>
Outputs compare(const Node& n, const Inputs& in, bool orderOnly, Fn fn) {
  FBL_ASSIGN(Operands o, binaryOperands(n, in));
  auto body = [&](auto tag) -> Outputs {
    using T = decltype(tag);
    return single(broadcastMap<T, bool>(*o.a, *o.b, o.out, fn));
  };
  return orderOnly ? withNumeric(n, o.a->dtype(), body) : withAnyDType(n, o.a->dtype(), body);
}

template <class Fn>
Outputs logic(const Node& n, const Inputs& in, Fn fn) {
  FBL_ASSIGN(Operands o, binaryOperands(n, in));
  FBL_TRY(expectDType(n, *o.a, 0, {DType::Bool}));
  return single(broadcastMap<bool, bool>(*o.a, *o.b, o.out, fn));
}

// Max/Min take 1..N inputs, folded left to right with broadcasting. NaN propagates (ONNX and
// PyTorch agree on that).
template <bool kMax>
Outputs extremum(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* first, input(n, in, 0));
  Tensor acc = *first;
  for (size_t i = 1; i < in.size(); ++i) {
    FBL_ASSIGN(const Tensor* next, input(n, in, i));
    FBL_TRY(expectSameDType(n, acc, *next));
    FBL_ASSIGN(Shape out, broadcastShapes(n, {&acc.shape(), &next->shape()}));
    FBL_ASSIGN(auto r, withNumeric(n, acc.dtype(), [&](auto tag) -> Outputs {
      using T = decltype(tag);
      return single(broadcastMap<T, T>(acc, *next, out, [](T x, T y) {
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
        return kMax ? (x < y ? y : x) : (y < x ? y : x);
      }));
    }));
    acc = std::move(r[0]);
  }
  FBL_TRY(withNumeric(n, acc.dtype(), [](auto) -> Outputs { return std::vector<Tensor>{}; }));
  return single(std::move(acc));
}

// Clip(x, min?, max?) = Min(Max(x, min), max): a bound that is absent does nothing, and min > max
// gives max everywhere, as ONNX specifies.
Outputs clipOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  Tensor y = *x;
  if (const Tensor* lo = optionalInput(in, 1)) {
    FBL_ASSIGN(auto r, extremum<true>(n, Inputs{&y, lo}));
    y = std::move(r[0]);
  }
  if (const Tensor* hi = optionalInput(in, 2)) {
    FBL_ASSIGN(auto r, extremum<false>(n, Inputs{&y, hi}));
    y = std::move(r[0]);
  }
  if (y.shape() != x->shape()) return nodeError(n, "the bounds must be scalars");
  return single(std::move(y));
}

Outputs whereOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* c, input(n, in, 0));
  FBL_ASSIGN(const Tensor* x, input(n, in, 1));
  FBL_ASSIGN(const Tensor* y, input(n, in, 2));
  FBL_TRY(expectDType(n, *c, 0, {DType::Bool}));
  FBL_TRY(expectSameDType(n, *x, *y));
  FBL_ASSIGN(Shape out, broadcastShapes(n, {&c->shape(), &x->shape(), &y->shape()}));
  return withAnyDType(n, x->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    Tensor r(x->dtype(), out);
    const bool* pc = c->data<bool>();
    const T* px = x->data<T>();
    const T* py = y->data<T>();
    T* pr = r.data<T>();
    forEachIndex<3>(out, {View{0, broadcastStrides(c->shape(), out)},
                          View{0, broadcastStrides(x->shape(), out)},
                          View{0, broadcastStrides(y->shape(), out)}},
                    [&](int64_t i, const std::array<int64_t, 3>& o) {
                      pr[i] = pc[o[0]] ? px[o[1]] : py[o[2]];
                    });
    return single(std::move(r));
  });
}

// ---- value-preserving ---------------------------------------------------------------------

// Converts with C++ semantics, except that float -> integer saturates (NaN -> 0) instead of
// being undefined, and anything -> bool is "!= 0".
template <class From, class To>
void convert(const Tensor& x, Tensor& y) {
  const From* s = x.data<From>();
  To* d = y.data<To>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    From v = s[i];
    if constexpr (std::is_same_v<To, bool>) {
      d[i] = v != From(0);
    } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
      double lo = static_cast<double>(std::numeric_limits<To>::min());
      double hi = static_cast<double>(std::numeric_limits<To>::max());
      double dv = static_cast<double>(v);
      d[i] = std::isnan(dv) ? To(0) : dv <= lo ? std::numeric_limits<To>::min()
                                   : dv >= hi ? std::numeric_limits<To>::max()
                                              : static_cast<To>(dv);
    } else {
      d[i] = static_cast<To>(v);
    }
  }
}

// A 16-bit float converts only to or from f32 (ir::isFloat16), rounding to nearest even
// (support/float16.h).
Result<Tensor> castTensor(const Node& n, const Tensor& x, DType to) {
  Tensor y(to, x.shape());
  if (ir::isFloat16(x.dtype()) || ir::isFloat16(to)) {
    if (x.dtype() != DType::F32 && to != DType::F32)
      return nodeError(n, "cast from {} to {}: a 16-bit float converts only to or from f32", ir::dtypeName(x.dtype()),
                       ir::dtypeName(to));
    for (int64_t i = 0; i < x.numel(); ++i) y.set(i, x.at(i));
    return y;
  }
  FBL_TRY(withAnyDType(n, x.dtype(), [&](auto from) -> Outputs {
    return withAnyDType(n, to, [&](auto dst) -> Outputs {
      convert<decltype(from), decltype(dst)>(x, y);
      return std::vector<Tensor>{};
    });
  }));
  return y;
}

Outputs castOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  if (!n.hasAttr("to")) return nodeError(n, "attribute 'to' is missing");
  int64_t code = n.attrInt("to", 0);
  auto to = ir::dtypeFromOnnx(static_cast<int32_t>(code));
  if (!to) return nodeError(n, "cast to ONNX dtype {} is not supported", code);
  FBL_ASSIGN(Tensor y, castTensor(n, *x, *to));
  return single(std::move(y));
}

Outputs castLikeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* like, input(n, in, 1));
  FBL_ASSIGN(Tensor y, castTensor(n, *x, like->dtype()));
  return single(std::move(y));
}

Outputs identityOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  return single(*x);
}

// Inference dropout is the identity with an all-true mask. A run that asks for training-mode
// dropout with a non-zero ratio would need randomness the reference does not model.
Outputs dropoutOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  bool training = false;
  if (const Tensor* t = optionalInput(in, 2)) {
    FBL_TRY(expectDType(n, *t, 2, {DType::Bool}));
    if (t->numel() != 1) return nodeError(n, "training_mode must be a scalar");
    training = t->at(0) != 0;
  }
  double ratio = 0.5;
  if (const Tensor* r = optionalInput(in, 1)) {
    FBL_TRY(expectDType(n, *r, 1, {DType::F32, DType::F64}));
    if (r->numel() != 1) return nodeError(n, "ratio must be a scalar");
    ratio = r->at(0);
  }
  if (training && ratio != 0)
    return nodeError(n, "training-mode dropout with ratio {} is not supported", ratio);
  Tensor mask(DType::Bool, x->shape());
  bool* m = mask.data<bool>();
  for (int64_t i = 0; i < mask.numel(); ++i) m[i] = true;
  std::vector<Tensor> out;
  out.push_back(*x);
  out.push_back(std::move(mask));
  return out;
}

}  // namespace

std::vector<KernelEntry> elementwiseKernels() {
  return {
      {"Add", [](const Node& n, const Inputs& in) { return arith(n, in, [](auto x, auto y) { return x + y; }); }},
      {"Sub", [](const Node& n, const Inputs& in) { return arith(n, in, [](auto x, auto y) { return x - y; }); }},
      {"Mul", [](const Node& n, const Inputs& in) { return arith(n, in, [](auto x, auto y) { return x * y; }); }},
      {"Div", divOp},
      {"Pow", powOp},
      {"Mod", modOp},
      {"Max", extremum<true>},
      {"Min", extremum<false>},
      {"Clip", clipOp},
      {"Equal", [](const Node& n, const Inputs& in) { return compare(n, in, false, [](auto x, auto y) { return x == y; }); }},
      {"Less", [](const Node& n, const Inputs& in) { return compare(n, in, true, [](auto x, auto y) { return x < y; }); }},
      {"LessOrEqual", [](const Node& n, const Inputs& in) { return compare(n, in, true, [](auto x, auto y) { return x <= y; }); }},
      {"Greater", [](const Node& n, const Inputs& in) { return compare(n, in, true, [](auto x, auto y) { return x > y; }); }},
      {"GreaterOrEqual", [](const Node& n, const Inputs& in) { return compare(n, in, true, [](auto x, auto y) { return x >= y; }); }},
      {"And", [](const Node& n, const Inputs& in) { return logic(n, in, [](bool x, bool y) { return x && y; }); }},
      {"Or", [](const Node& n, const Inputs& in) { return logic(n, in, [](bool x, bool y) { return x || y; }); }},
      {"Xor", [](const Node& n, const Inputs& in) { return logic(n, in, [](bool x, bool y) { return x != y; }); }},
      {"Not", notOp},
      {"Where", whereOp},
      {"Neg", [](const Node& n, const Inputs& in) { return unarySigned(n, in, [](auto x) { return -x; }); }},
      {"Abs", [](const Node& n, const Inputs& in) { return unarySigned(n, in, [](auto x) { return x < 0 ? -x : x; }); }},
      {"Sign", [](const Node& n, const Inputs& in) { return unarySigned(n, in, [](auto x) { return (x > 0) - (x < 0); }); }},
      {"Ceil", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::ceil(x); }); }},
      {"Floor", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::floor(x); }); }},
      // Halves to even, as ONNX and PyTorch round (the default rounding mode).
      {"Round", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::nearbyint(x); }); }},
      {"Sqrt", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::sqrt(x); }); }},
      {"Reciprocal", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return 1.0f / x; }); }},
      {"Exp", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::exp(x); }); }},
      {"Log", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::log(x); }); }},
      {"Erf", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::erf(x); }); }},
      {"Sigmoid", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, sigmoid); }},
      {"Tanh", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::tanh(x); }); }},
      {"Relu", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return x > 0 ? x : (x == x ? 0.0f : x); }); }},
      {"Cos", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::cos(x); }); }},
      {"Sin", [](const Node& n, const Inputs& in) { return unaryFloat(n, in, [](float x) { return std::sin(x); }); }},
      {"Gelu", gelu},
      {"Cast", castOp},
      {"CastLike", castLikeOp},
      {"Identity", identityOp},
      {"Dropout", dropoutOp},
  };
}

}  // namespace fbl::ref::detail
