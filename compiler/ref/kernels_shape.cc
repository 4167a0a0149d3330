// Shape and movement kernels. Movement ops are index rewrites: each builds a View (offset and
// strides over its input) and copies through it with gatherView/copyStrided, so Transpose,
// Slice, Expand and Pad share one loop and work for every dtype.
#include <algorithm>
#include <cstring>
#include <limits>

#include "compiler/ref/kernels_common.h"

namespace fbl::ref::detail {
namespace {

// Larger pads than this cannot describe a tensor a host run holds; rejecting them early keeps
// the shape arithmetic from overflowing.
constexpr int64_t kMaxPad = int64_t{1} << 40;

// ---- producers of constants and shapes ----------------------------------------------------

Outputs constantOp(const Node& n, const Inputs&) {
  if (const Tensor* t = n.attrTensor("value")) return single(*t);
  if (n.hasAttr("value_float")) return single(Tensor::scalar<float>(n.attrFloat("value_float", 0)));
  if (n.hasAttr("value_int")) return single(Tensor::scalar<int64_t>(n.attrInt("value_int", 0)));
  if (n.hasAttr("value_floats")) {
    auto v = n.attrFloats("value_floats");
    return single(Tensor::fromVector<float>({static_cast<int64_t>(v.size())}, v));
  }
  if (n.hasAttr("value_ints")) {
    auto v = n.attrInts("value_ints");
    return single(Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  return nodeError(n, "needs one of the attributes value, value_float(s), value_int(s)");
}

Outputs constantOfShapeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* s, input(n, in, 0));
  FBL_ASSIGN(Shape shape, intValues(n, *s, "shape"));
  FBL_TRY(checkShape(n, shape));
  Tensor value = Tensor::scalar<float>(0.0f);
  if (const Tensor* v = n.attrTensor("value")) {
    if (v->numel() != 1) return nodeError(n, "attribute 'value' must hold one element");
    value = *v;
  }
  Tensor out(value.dtype(), shape);
  fillWith(out, value);
  return single(std::move(out));
}

Outputs shapeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  const int64_t r = x->rank();
  auto clampDim = [r](int64_t d) { return std::clamp(d < 0 ? d + r : d, int64_t{0}, r); };
  int64_t start = clampDim(n.attrInt("start", 0));
  int64_t end = clampDim(n.attrInt("end", r));
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(x->shape()[d]);
  return single(Tensor::fromVector<int64_t>({static_cast<int64_t>(dims.size())}, dims));
}

Outputs sizeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  return single(Tensor::scalar<int64_t>(x->numel()));
}

Outputs rangeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* start, input(n, in, 0));
  FBL_ASSIGN(const Tensor* limit, input(n, in, 1));
  FBL_ASSIGN(const Tensor* delta, input(n, in, 2));
  for (const Tensor* t : {start, limit, delta}) {
    FBL_TRY(expectSameDType(n, *start, *t));
    if (t->numel() != 1) return nodeError(n, "start, limit and delta must be scalars");
  }
  return withNumeric(n, start->dtype(), [&](auto tag) -> Outputs {
    using T = decltype(tag);
    T s = start->data<T>()[0], l = limit->data<T>()[0], d = delta->data<T>()[0];
    if (d == T(0)) return nodeError(n, "delta is zero");
    double count = std::ceil((static_cast<double>(l) - static_cast<double>(s)) / static_cast<double>(d));
    if (!(count >= 0)) count = 0;  // also NaN
    if (count > static_cast<double>(std::numeric_limits<int32_t>::max()))
      return nodeError(n, "range of {} elements is too large", count);
    Tensor out(start->dtype(), {static_cast<int64_t>(count)});
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = static_cast<T>(s + static_cast<T>(i) * d);
    return single(std::move(out));
  });
}

// ---- reshapes (same bytes, new shape) ----------------------------------------------------

Outputs reshapeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* s, input(n, in, 1));
  FBL_ASSIGN(Shape shape, intValues(n, *s, "shape"));
  const bool allowZero = n.attrInt("allowzero", 0) != 0;
  int64_t inferAt = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferAt >= 0) return nodeError(n, "shape {} has more than one -1", ir::shapeToString(shape));
      inferAt = static_cast<int64_t>(i);
      continue;
    }
    if (shape[i] == 0 && !allowZero) {
      if (i >= x->shape().size())
        return nodeError(n, "shape {} copies dim {} of a rank-{} input", ir::shapeToString(shape), i, x->rank());
      shape[i] = x->shape()[i];
    }
    if (shape[i] < 0) return nodeError(n, "shape {} has a negative dim", ir::shapeToString(shape));
    if (__builtin_mul_overflow(known, shape[i], &known))
      return nodeError(n, "shape {} is too large", ir::shapeToString(shape));
  }
  if (inferAt >= 0) {
    if (known == 0 || x->numel() % known != 0)
      return nodeError(n, "cannot reshape {} to {}", ir::shapeToString(x->shape()), ir::shapeToString(shape));
    shape[inferAt] = x->numel() / known;
  }
  if (ir::numElements(shape) != x->numel())
    return nodeError(n, "cannot reshape {} ({} elements) to {}", ir::shapeToString(x->shape()),
                     x->numel(), ir::shapeToString(shape));
  return single(x->reshaped(shape));
}

// Axes come from input 1 (opset >= 13) or the 'axes' attribute (older files).
Result<std::vector<int64_t>> axesOf(const Node& n, const Inputs& in, size_t slot) {
  if (const Tensor* a = optionalInput(in, slot)) return intValues(n, *a, "axes");
  return n.attrInts("axes");
}

Result<std::vector<bool>> axisMask(const Node& n, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<bool> mask(rank, false);
  for (int64_t a : axes) {
    FBL_ASSIGN(int64_t ax, normalizeAxis(n, a, rank));
    if (mask[ax]) return nodeError(n, "axis {} is repeated", a);
    mask[ax] = true;
  }
  return mask;
}

Outputs unsqueezeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(auto axes, axesOf(n, in, 1));
  const int64_t outRank = x->rank() + static_cast<int64_t>(axes.size());
  FBL_ASSIGN(auto mask, axisMask(n, axes, outRank));
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d) out.push_back(mask[d] ? 1 : x->shape()[next++]);
  return single(x->reshaped(out));
}

Outputs squeezeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(auto axes, axesOf(n, in, 1));
  std::vector<bool> mask(x->rank(), false);
  if (axes.empty()) {
    for (int64_t d = 0; d < x->rank(); ++d) mask[d] = x->shape()[d] == 1;
  } else {
    FBL_ASSIGN(mask, axisMask(n, axes, x->rank()));
  }
  Shape out;
  for (int64_t d = 0; d < x->rank(); ++d) {
    if (!mask[d]) {
      out.push_back(x->shape()[d]);
    } else if (x->shape()[d] != 1) {
      return nodeError(n, "cannot squeeze axis {} of size {}", d, x->shape()[d]);
    }
  }
  return single(x->reshaped(out));
}

Outputs flattenOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  int64_t axis = n.attrInt("axis", 1);
  if (axis < 0) axis += x->rank();
  if (axis < 0 || axis > x->rank()) return nodeError(n, "axis {} is out of range", n.attrInt("axis", 1));
  int64_t rows = 1;
  for (int64_t d = 0; d < axis; ++d) rows *= x->shape()[d];
  return single(x->reshaped({rows, rows == 0 ? 0 : x->numel() / rows}));
}

// ---- movement through views ----------------------------------------------------------------

Outputs transposeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  const int64_t r = x->rank();
  std::vector<int64_t> perm = n.attrInts("perm");
  if (perm.empty())
    for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != r)
    return nodeError(n, "perm has {} entries for a rank-{} input", perm.size(), r);
  FBL_TRY(axisMask(n, perm, r));
  auto inStrides = ir::stridesOf(x->shape());
  Shape out(r);
  View v;
  for (int64_t d = 0; d < r; ++d) {
    int64_t p = perm[d] < 0 ? perm[d] + r : perm[d];
    out[d] = x->shape()[p];
    v.strides.push_back(inStrides[p]);
  }
  return single(gatherView(*x, v, out));
}

Outputs sliceOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* st, input(n, in, 1));
  FBL_ASSIGN(const Tensor* en, input(n, in, 2));
  FBL_ASSIGN(auto starts, intValues(n, *st, "starts"));
  FBL_ASSIGN(auto ends, intValues(n, *en, "ends"));
  std::vector<int64_t> axes, steps;
  if (const Tensor* a = optionalInput(in, 3)) { FBL_ASSIGN(axes, intValues(n, *a, "axes")); }
  if (const Tensor* s = optionalInput(in, 4)) { FBL_ASSIGN(steps, intValues(n, *s, "steps")); }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return nodeError(n, "starts, ends, axes and steps differ in length");
  FBL_TRY(axisMask(n, axes, x->rank()));

  Shape out = x->shape();
  View v = denseView(x->shape());
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + x->rank() : axes[i];
    int64_t dim = x->shape()[ax], step = steps[i];
    if (step == 0) return nodeError(n, "step is zero on axis {}", ax);
    // A step longer than the axis picks at most one element: shortening it changes nothing and
    // keeps the index arithmetic below from overflowing.
    step = std::clamp<int64_t>(step, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t count;
    if (dim == 0) {
      count = 0;
    } else if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    out[ax] = count;
    if (count > 0) v.offset += s * v.strides[ax];
    v.strides[ax] *= step;
  }
  return single(gatherView(*x, v, out));
}

Outputs expandOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* s, input(n, in, 1));
  FBL_ASSIGN(Shape target, intValues(n, *s, "shape"));
  FBL_ASSIGN(Shape out, broadcastShapes(n, {&x->shape(), &target}));
  FBL_TRY(checkShape(n, out));
  return single(gatherView(*x, View{0, broadcastStrides(x->shape(), out)}, out));
}

Outputs concatOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* first, input(n, in, 0));
  if (!n.hasAttr("axis")) return nodeError(n, "attribute 'axis' is missing");
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", 0), first->rank()));
  Shape out = first->shape();
  out[axis] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    FBL_ASSIGN(const Tensor* t, input(n, in, i));
    FBL_TRY(expectSameDType(n, *first, *t));
    bool same = t->rank() == first->rank();
    for (int64_t d = 0; same && d < t->rank(); ++d)
      same = d == axis || t->shape()[d] == first->shape()[d];
    if (!same)
      return nodeError(n, "input {} has shape {}, incompatible with {} on axis {}", i,
                       ir::shapeToString(t->shape()), ir::shapeToString(first->shape()), axis);
    out[axis] += t->shape()[axis];
  }
  Tensor y(first->dtype(), out);
  // Each input is a block of rows of shape [outer, dim_i * inner] within the output's rows.
  const size_t esz = ir::dtypeSize(first->dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  for (int64_t d = axis + 1; d < y.rank(); ++d) inner *= out[d];
  const size_t rowBytes = out[axis] * inner * esz;
  size_t colBytes = 0;
  for (const Tensor* t : in) {
    const size_t chunk = t->shape()[axis] * inner * esz;
    for (int64_t o = 0; o < outer; ++o)
      if (chunk) std::memcpy(y.raw() + o * rowBytes + colBytes, t->raw() + o * chunk, chunk);
    colBytes += chunk;
  }
  return single(std::move(y));
}

Outputs splitOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(int64_t axis, normalizeAxis(n, n.attrInt("axis", 0), x->rank()));
  const int64_t dim = x->shape()[axis];
  std::vector<int64_t> sizes;
  if (const Tensor* s = optionalInput(in, 1)) {
    FBL_ASSIGN(sizes, intValues(n, *s, "split"));
  } else {
    sizes = n.attrInts("split");
  }
  if (sizes.empty()) {
    // Equal parts; the last may be smaller (opset 18).
    int64_t parts = n.attrInt("num_outputs", static_cast<int64_t>(std::max<size_t>(n.outputs.size(), 1)));
    if (parts <= 0 || (!n.outputs.empty() && parts != static_cast<int64_t>(n.outputs.size())))
      return nodeError(n, "num_outputs {} does not match the node's {} outputs", parts, n.outputs.size());
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p) sizes.push_back(std::clamp<int64_t>(dim - p * chunk, 0, chunk));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return nodeError(n, "negative split size {}", s);
    total += s;
  }
  if (total != dim) return nodeError(n, "split sizes sum to {}, axis {} has {}", total, axis, dim);
  if (!n.outputs.empty() && sizes.size() != n.outputs.size())
    return nodeError(n, "{} split sizes for {} outputs", sizes.size(), n.outputs.size());
  std::vector<Tensor> outs;
  View v = denseView(x->shape());
  for (int64_t s : sizes) {
    Shape part = x->shape();
    part[axis] = s;
    outs.push_back(gatherView(*x, v, part));
    v.offset += s * v.strides[axis];
  }
  return outs;
}

Outputs padOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  std::string mode = n.attrString("mode", "constant");
  if (mode != "constant") return nodeError(n, "mode '{}' is not supported (constant)", mode);
  std::vector<int64_t> pads;
  if (const Tensor* p = optionalInput(in, 1)) {
    FBL_ASSIGN(pads, intValues(n, *p, "pads"));
  } else {
    pads = n.attrInts("pads");
  }
  const int64_t r = x->rank();
  std::vector<int64_t> axes;
  if (const Tensor* a = optionalInput(in, 3)) { FBL_ASSIGN(axes, intValues(n, *a, "axes")); }
  if (axes.empty())
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  if (pads.size() != 2 * axes.size())
    return nodeError(n, "pads has {} entries for {} axes", pads.size(), axes.size());
  FBL_TRY(axisMask(n, axes, r));
  for (int64_t p : pads)
    if (p < -kMaxPad || p > kMaxPad) return nodeError(n, "pad {} is out of range", p);
  std::vector<int64_t> before(r, 0), after(r, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax = axes[i] < 0 ? axes[i] + r : axes[i];
    before[ax] = pads[i];
    after[ax] = pads[i + axes.size()];
  }
  Shape out(r), region(r);
  for (int64_t d = 0; d < r; ++d) {
    out[d] = x->shape()[d] + before[d] + after[d];
    // Negative pads crop: the copied region loses them on the input side.
    region[d] = std::max<int64_t>(0, x->shape()[d] - std::max<int64_t>(0, -before[d]) -
                                         std::max<int64_t>(0, -after[d]));
  }
  FBL_TRY(checkShape(n, out));
  Tensor y(x->dtype(), out);
  if (const Tensor* c = optionalInput(in, 2)) {
    FBL_TRY(expectSameDType(n, *x, *c));
    if (c->numel() > 1) return nodeError(n, "constant_value must be a scalar");
    if (c->numel() == 1) fillWith(y, *c);
  }
  View src = denseView(x->shape()), dst = denseView(out);
  for (int64_t d = 0; d < r; ++d) {
    src.offset += std::max<int64_t>(0, -before[d]) * src.strides[d];
    dst.offset += std::max<int64_t>(0, before[d]) * dst.strides[d];
  }
  copyStrided(*x, src, y, dst, region);
  return single(std::move(y));
}

Outputs triluOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  if (x->rank() < 2) return nodeError(n, "input must have rank >= 2, has {}", x->rank());
  int64_t k = 0;
  if (const Tensor* kt = optionalInput(in, 1)) { FBL_ASSIGN(k, intScalar(n, *kt, "k")); }
  const bool upper = n.attrInt("upper", 1) != 0;
  const int64_t rows = x->shape()[x->rank() - 2], cols = x->shape()[x->rank() - 1];
  Tensor y = *x;
  const size_t esz = ir::dtypeSize(x->dtype());
  const int64_t mats = rows * cols == 0 ? 0 : x->numel() / (rows * cols);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) std::memset(y.raw() + ((m * rows + i) * cols + j) * esz, 0, esz);
      }
  return single(std::move(y));
}

}  // namespace

std::vector<KernelEntry> shapeKernels() {
  return {
      {"Constant", constantOp},   {"ConstantOfShape", constantOfShapeOp},
      {"Shape", shapeOp},         {"Size", sizeOp},
      {"Range", rangeOp},         {"Reshape", reshapeOp},
      {"Unsqueeze", unsqueezeOp}, {"Squeeze", squeezeOp},
      {"Flatten", flattenOp},     {"Transpose", transposeOp},
      {"Slice", sliceOp},         {"Expand", expandOp},
      {"Concat", concatOp},       {"Split", splitOp},
      {"Pad", padOp},             {"Trilu", triluOp},
  };
}

}  // namespace fbl::ref::detail
