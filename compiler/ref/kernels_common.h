// What every reference-kernel family shares: node-named errors, input and attribute checks,
// dtype dispatch, and the one strided N-d iterator that elementwise broadcasting and every
// movement op (Transpose, Slice, Expand, Pad) are written with.
//
// A movement op is an index rewrite: it builds a View (offset + one stride per output dim) over
// its input and copies through it; broadcasting is a View whose strides are 0 on broadcast dims.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "compiler/ref/kernel_tables.h"

namespace fbl::ref::detail {

using ir::DType;
using ir::Node;
using ir::Shape;
using ir::Tensor;
using Outputs = Result<std::vector<Tensor>>;

// The per-family kernel lists that onnxKernels() concatenates.
std::vector<KernelEntry> elementwiseKernels();  // kernels_elementwise.cc
std::vector<KernelEntry> shapeKernels();        // kernels_shape.cc
std::vector<KernelEntry> reduceKernels();       // kernels_reduce.cc
std::vector<KernelEntry> linalgKernels();       // kernels_linalg.cc
std::vector<KernelEntry> indexKernels();        // kernels_index.cc

// "node 'name' (Op): message"; evalNode prefixes the file.
template <typename... Args>
Error nodeError(const Node& n, fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format("node '{}' ({}): {}", n.name, n.op,
                           fmt::format(f, std::forward<Args>(args)...))};
}

inline Outputs single(Tensor t) {
  std::vector<Tensor> v;
  v.push_back(std::move(t));
  return v;
}

// Input i, or an error naming the node when it is absent.
Result<const Tensor*> input(const Node& n, const Inputs& in, size_t i);
inline const Tensor* optionalInput(const Inputs& in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}
Status expectDType(const Node& n, const Tensor& t, size_t i, std::initializer_list<DType> allowed);
Status expectSameDType(const Node& n, const Tensor& a, const Tensor& b);
// Maps an axis in [-rank, rank) to [0, rank).
Result<int64_t> normalizeAxis(const Node& n, int64_t axis, int64_t rank);
// The elements of an integer tensor (shape, axes, pads inputs); `what` names it in errors.
Result<std::vector<int64_t>> intValues(const Node& n, const Tensor& t, std::string_view what);
// A scalar (or one-element) integer tensor.
Result<int64_t> intScalar(const Node& n, const Tensor& t, std::string_view what);
// Rejects negative dims and element counts that overflow or exceed what a host run can hold.
Status checkShape(const Node& n, const Shape& s);

// Multidirectional (numpy) broadcast of the shapes.
Result<Shape> broadcastShapes(const Node& n, std::initializer_list<const Shape*> shapes);
// Strides of `in` read as `out` (right-aligned; 0 on broadcast dims). `in` must broadcast to out.
std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out);

struct View {
  int64_t offset = 0;
  std::vector<int64_t> strides;  // in elements, one per iterated dim
};

// Calls f(i, offs) for every index of `shape` in row-major order, i being the flat index and
// offs[k] the element offset of that index in views[k]. Size-1 dims are skipped and contiguous
// dims merged, so the inner loop is long; f is inlined.
template <size_t K, class F>
void forEachIndex(const Shape& shape, const std::array<View, K>& views, F&& f) {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, K> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < K && merge; ++k)
      merge = st[k].back() == views[k].strides[d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < K; ++k) st[k].back() = views[k].strides[d];
    } else {
      dims.push_back(shape[d]);
      for (size_t k = 0; k < K; ++k) st[k].push_back(views[k].strides[d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (size_t k = 0; k < K; ++k) st[k].push_back(0);
  }
  const size_t outerRank = dims.size() - 1;
  const int64_t inner = dims.back();
  std::array<int64_t, K> innerStride, base;
  for (size_t k = 0; k < K; ++k) {
    innerStride[k] = st[k].back();
    base[k] = views[k].offset;
  }
  std::vector<int64_t> idx(outerRank, 0);
  int64_t outer = 1;
  for (size_t d = 0; d < outerRank; ++d) outer *= dims[d];
  int64_t i = 0;
  for (int64_t o = 0; o < outer; ++o) {
    std::array<int64_t, K> off = base;
    for (int64_t j = 0; j < inner; ++j, ++i) {
      f(i, static_cast<const std::array<int64_t, K>&>(off));
      for (size_t k = 0; k < K; ++k) off[k] += innerStride[k];
    }
    for (size_t d = outerRank; d-- > 0;) {
      for (size_t k = 0; k < K; ++k) base[k] += st[k][d];
      if (++idx[d] < dims[d]) break;
      for (size_t k = 0; k < K; ++k) base[k] -= st[k][d] * dims[d];
      idx[d] = 0;
    }
  }
}

// A contiguous view of a tensor of shape `s`.
inline View denseView(const Shape& s) { return View{0, ir::stridesOf(s)}; }

// dst[dv(idx)] = src[sv(idx)] for every idx of `shape`; any dtype (copies element bytes).
void copyStrided(const Tensor& src, const View& sv, Tensor& dst, const View& dv,
                 const Shape& shape);
// A new dense tensor of `shape` read from `src` through `v`.
Tensor gatherView(const Tensor& src, const View& v, const Shape& shape);
// Sets every element of t to element `i` of `value` (same dtype).
void fillWith(Tensor& t, const Tensor& value, int64_t i = 0);

// Calls f(T{}) with the C++ type of a numeric dtype (f32, f64, i64, i32); error otherwise.
template <class F>
Outputs withNumeric(const Node& n, DType t, F&& f) {
  switch (t) {
    case DType::F32: return f(float{});
    case DType::F64: return f(double{});
    case DType::I64: return f(int64_t{});
    case DType::I32: return f(int32_t{});
    default:
      return nodeError(n, "dtype {} is not supported (f32, f64, i64, i32)", ir::dtypeName(t));
  }
}

// As withNumeric, plus bool, i8 and u8: for ops that only compare or move values.
template <class F>
Outputs withAnyDType(const Node& n, DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(bool{});
    case DType::I8: return f(int8_t{});
    case DType::U8: return f(uint8_t{});
    default: return withNumeric(n, t, std::forward<F>(f));
  }
}

// The (2-D, contiguous, row-major) product C[M,N] = A[M,K] * B[K,N] with double accumulation,
// blocked so that a tile of B stays in cache while rows of A stream past it.
void matmulF32(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);

}  // namespace fbl::ref::detail
