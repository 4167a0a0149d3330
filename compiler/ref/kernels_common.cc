#include "compiler/ref/kernels_common.h"

#include <cstring>

namespace fbl::ref::detail {

namespace {
// Per-tensor element limit of a host run (16 GiB of f32): larger requests come from a bad
// shape input, not from a model this executor can run.
constexpr int64_t kMaxElements = int64_t{1} << 32;

std::string dtypeList(std::initializer_list<DType> ts) {
  std::string s;
  for (DType t : ts) {
    if (!s.empty()) s += ", ";
    s += ir::dtypeName(t);
  }
  return s;
}

template <class E>
void copyElems(const Tensor& src, const View& sv, Tensor& dst, const View& dv,
               const Shape& shape) {
  const E* s = reinterpret_cast<const E*>(src.raw());
  E* d = reinterpret_cast<E*>(dst.raw());
  forEachIndex<2>(shape, {sv, dv},
                  [&](int64_t, const std::array<int64_t, 2>& o) { d[o[1]] = s[o[0]]; });
}
}  // namespace

Result<const Tensor*> input(const Node& n, const Inputs& in, size_t i) {
  if (i >= in.size() || in[i] == nullptr) return nodeError(n, "input {} is missing", i);
  return in[i];
}

Status expectDType(const Node& n, const Tensor& t, size_t i, std::initializer_list<DType> allowed) {
  for (DType a : allowed)
    if (t.dtype() == a) return Status::success();
  return nodeError(n, "input {} has dtype {}, expected {}", i, ir::dtypeName(t.dtype()),
                   dtypeList(allowed));
}

Status expectSameDType(const Node& n, const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return Status::success();
  return nodeError(n, "operand dtypes differ ({} vs {})", ir::dtypeName(a.dtype()),
                   ir::dtypeName(b.dtype()));
}

Result<int64_t> normalizeAxis(const Node& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return nodeError(n, "axis {} is out of range for rank {}", axis, rank);
  return axis < 0 ? axis + rank : axis;
}

Result<std::vector<int64_t>> intValues(const Node& n, const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::I64 && t.dtype() != DType::I32)
    return nodeError(n, "{} must be i64 or i32, got {}", what, ir::dtypeName(t.dtype()));
  if (t.rank() > 1) return nodeError(n, "{} must be 1-D, got rank {}", what, t.rank());
  return t.toInt64s();
}

Result<int64_t> intScalar(const Node& n, const Tensor& t, std::string_view what) {
  if (t.dtype() != DType::I64 && t.dtype() != DType::I32)
    return nodeError(n, "{} must be i64 or i32, got {}", what, ir::dtypeName(t.dtype()));
  if (t.numel() != 1)
    return nodeError(n, "{} must hold one element, has shape {}", what,
                     ir::shapeToString(t.shape()));
  return t.toInt64s()[0];
}

Status checkShape(const Node& n, const Shape& s) {
  int64_t count = 1;
  for (int64_t d : s) {
    if (d < 0) return nodeError(n, "negative dimension in shape {}", ir::shapeToString(s));
    if (__builtin_mul_overflow(count, d, &count) || count > kMaxElements)
      return nodeError(n, "shape {} is too large", ir::shapeToString(s));
  }
  return Status::success();
}

Result<Shape> broadcastShapes(const Node& n, std::initializer_list<const Shape*> shapes) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, 1);
  for (const Shape* s : shapes) {
    size_t off = rank - s->size();
    for (size_t d = 0; d < s->size(); ++d) {
      int64_t v = (*s)[d];
      int64_t& o = out[off + d];
      if (v == o || v == 1) continue;
      if (o == 1) {
        o = v;
        continue;
      }
      std::string all;
      for (const Shape* t : shapes) all += (all.empty() ? "" : " vs ") + ir::shapeToString(*t);
      return nodeError(n, "shapes do not broadcast: {}", all);
    }
  }
  return out;
}

std::vector<int64_t> broadcastStrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> inStrides = ir::stridesOf(in);
  std::vector<int64_t> st(out.size(), 0);
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) st[off + d] = in[d] == 1 ? 0 : inStrides[d];
  return st;
}

void copyStrided(const Tensor& src, const View& sv, Tensor& dst, const View& dv,
                 const Shape& shape) {
  FBL_ASSERT(src.dtype() == dst.dtype());
  switch (ir::dtypeSize(src.dtype())) {
    case 1: return copyElems<uint8_t>(src, sv, dst, dv, shape);
    case 2: return copyElems<uint16_t>(src, sv, dst, dv, shape);
    case 4: return copyElems<uint32_t>(src, sv, dst, dv, shape);
    case 8: return copyElems<uint64_t>(src, sv, dst, dv, shape);
    default: FBL_ASSERT(false && "copyStrided: unsupported element size");
  }
}

Tensor gatherView(const Tensor& src, const View& v, const Shape& shape) {
  Tensor out(src.dtype(), shape);
  copyStrided(src, v, out, denseView(shape), shape);
  return out;
}

void fillWith(Tensor& t, const Tensor& value, int64_t i) {
  FBL_ASSERT(t.dtype() == value.dtype() && i < value.numel());
  const size_t sz = ir::dtypeSize(t.dtype());
  const std::byte* v = value.raw() + i * sz;
  std::byte* d = t.raw();
  for (int64_t e = 0; e < t.numel(); ++e) std::memcpy(d + e * sz, v, sz);
}

}  // namespace fbl::ref::detail
