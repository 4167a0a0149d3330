// Shape and movement kernels. Movement ops are index rewrites: the movement table
// (layout/movement.h) gives each its View (offset and strides over its input), and
// gatherView/copyStrided copy through it, so Transpose, Slice, Expand, Concat, Split and Pad
// share one loop, one statement of their meaning with the plan's strided copies, and every dtype.
#include <algorithm>
#include <cstring>
#include <limits>

#include "compiler/layout/movement.h"
#include "compiler/ops/resize_sampling.h"
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

// An op of the movement table (layout/movement.h) as the View gatherView and copyStrided read.
Result<View> viewOf(const Node& n, const Shape& in, const layout::MovementOp& op) {
  auto v = layout::stridedView(in, op);
  if (!v.ok()) return nodeError(n, "{}", v.error().message);
  return View{v->offset, std::move(v->strides)};
}

// Block [at, at + len) along `axis` of a tensor of shape `s`.
Result<View> blockOf(const Node& n, const Shape& s, int64_t axis, int64_t at, int64_t len) {
  return viewOf(n, s, layout::MovementOp::slice({axis}, {at}, {at + len}));
}

// Transpose, Slice and Expand: the table's op for the node, gathered through its view.
Outputs viewOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  auto operand = [&](size_t slot) -> Result<std::optional<std::vector<int64_t>>> {
    const Tensor* t = optionalInput(in, slot);
    if (t == nullptr) return std::optional<std::vector<int64_t>>();
    FBL_ASSIGN(auto v, intValues(n, *t, fmt::format("input {}", slot)));
    return std::optional(std::move(v));
  };
  auto op = layout::onnxMovementOp(n, x->shape(), operand);
  if (!op.ok()) return nodeError(n, "{}", op.error().message);
  auto out = layout::outputShape(x->shape(), *op);
  if (!out.ok()) return nodeError(n, "{}", out.error().message);
  FBL_TRY(checkShape(n, *out));
  FBL_ASSIGN(View v, viewOf(n, x->shape(), *op));
  return single(gatherView(*x, v, *out));
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
  // Each input is copied into its block of the output: a Slice of the output along the axis.
  Tensor y(first->dtype(), out);
  int64_t at = 0;
  for (const Tensor* t : in) {
    FBL_ASSIGN(View dst, blockOf(n, out, axis, at, t->shape()[axis]));
    copyStrided(*t, denseView(t->shape()), y, dst, t->shape());
    at += t->shape()[axis];
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
  // Each output is a Slice of the input along the axis.
  std::vector<Tensor> outs;
  int64_t at = 0;
  for (int64_t s : sizes) {
    Shape part = x->shape();
    part[axis] = s;
    FBL_ASSIGN(View v, blockOf(n, x->shape(), axis, at, s));
    outs.push_back(gatherView(*x, v, part));
    at += s;
  }
  return outs;
}

// Not one index map of its input (it writes the pad value): a fill, then the kept part of the
// input (a Slice; negative pads crop) copied into its place in the output (a Slice).
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
  std::vector<int64_t> all(r), from(r), fromEnd(r), to(r), toEnd(r);
  for (int64_t d = 0; d < r; ++d) {
    out[d] = x->shape()[d] + before[d] + after[d];
    all[d] = d;
    from[d] = std::max<int64_t>(0, -before[d]);
    to[d] = std::max<int64_t>(0, before[d]);
    region[d] = std::max<int64_t>(0, x->shape()[d] - from[d] - std::max<int64_t>(0, -after[d]));
    fromEnd[d] = from[d] + region[d];
    toEnd[d] = to[d] + region[d];
  }
  FBL_TRY(checkShape(n, out));
  Tensor y(x->dtype(), out);
  if (const Tensor* c = optionalInput(in, 2)) {
    FBL_TRY(expectSameDType(n, *x, *c));
    if (c->numel() > 1) return nodeError(n, "constant_value must be a scalar");
    if (c->numel() == 1) fillWith(y, *c);
  }
  if (ir::numElements(region) == 0) return single(std::move(y));
  FBL_ASSIGN(View src, viewOf(n, x->shape(), layout::MovementOp::slice(all, from, fromEnd)));
  FBL_ASSIGN(View dst, viewOf(n, out, layout::MovementOp::slice(all, to, toEnd)));
  copyStrided(*x, src, y, dst, region);
  return single(std::move(y));
}

// out[i] = x[i mod x.shape], axis by axis: the input repeated whole along each axis.
Outputs tileOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* r, input(n, in, 1));
  FBL_ASSIGN(const std::vector<int64_t> repeats, intValues(n, *r, "repeats"));
  const Shape& xs = x->shape();
  if (repeats.size() != xs.size())
    return nodeError(n, "repeats has {} entries for an input of rank {}", repeats.size(), xs.size());
  Shape out(xs.size());
  for (size_t d = 0; d < xs.size(); ++d) {
    if (repeats[d] < 0 || (repeats[d] > 0 && xs[d] > std::numeric_limits<int64_t>::max() / repeats[d]))
      return nodeError(n, "repeats {} do not fit the input {}", ir::shapeToString(repeats), ir::shapeToString(xs));
    out[d] = xs[d] * repeats[d];
  }
  FBL_TRY(checkShape(n, out));
  Tensor y(x->dtype(), out);
  const size_t esz = ir::dtypeSize(x->dtype());
  const std::vector<int64_t> xStrides = ir::stridesOf(xs);
  std::vector<int64_t> coord(out.size(), 0);
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t from = 0;
    for (size_t d = 0; d < out.size(); ++d) from += coord[d] % xs[d] * xStrides[d];
    std::memcpy(y.raw() + i * esz, x->raw() + from * esz, esz);
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0 && ++coord[d] == out[d]; --d) coord[d] = 0;
  }
  return single(std::move(y));
}

// Resize, one sampled axis at a time (ops/resize_sampling.h): each output element along the axis
// is its input neighbours' weighted sum (linear) or one of them (nearest), in double.
Outputs resizeOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  auto sampling = ops::resizeSampling(n, x->shape(), optionalInput(in, 2), optionalInput(in, 3));
  if (!sampling.ok()) return nodeError(n, "{}", sampling.error().message);
  FBL_TRY(checkShape(n, sampling->outShape));
  Tensor cur = *x;
  for (const ops::ResizeAxis& ax : sampling->axes) {
    Shape outShape = cur.shape();
    const int64_t len = outShape[ax.axis], out = static_cast<int64_t>(ax.index0.size());
    outShape[ax.axis] = out;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < ax.axis; ++d) outer *= outShape[d];
    for (size_t d = ax.axis + 1; d < outShape.size(); ++d) inner *= outShape[d];
    Tensor next(cur.dtype(), outShape);
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t b = 0; b < inner; ++b) {
          const double v0 = cur.at((a * len + ax.index0[o]) * inner + b);
          const double v = ax.index1.empty() ? v0
                                             : v0 * (1.0 - ax.weight1[o]) +
                                                   cur.at((a * len + ax.index1[o]) * inner + b) * ax.weight1[o];
          next.set((a * out + o) * inner + b, v);
        }
    cur = std::move(next);
  }
  return single(std::move(cur));
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
      {"Flatten", flattenOp},     {"Transpose", viewOp},
      {"Slice", viewOp},          {"Expand", viewOp},
      {"Concat", concatOp},       {"Split", splitOp},
      {"Pad", padOp},             {"Trilu", triluOp},
      {"Tile", tileOp},           {"Resize", resizeOp},
  };
}

}  // namespace fbl::ref::detail
