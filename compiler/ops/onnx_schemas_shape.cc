// Shape rules of the constant and movement ops: Constant, ConstantOfShape, Shape, Reshape,
// Transpose, (Un)Squeeze, Flatten, Concat, Slice, Split, Pad, Expand, Tile, Resize, the Gathers, the Scatters,
// Range, CumSum and Trilu. Targets given as inputs (Reshape's shape, Slice's starts, ...) must be compile-time
// constants: fold_and_infer folds the chains that compute them before it reaches these nodes.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "compiler/ops/broadcast.h"
#include "compiler/ops/onnx_schemas_common.h"
#include "compiler/ops/resize_sampling.h"

namespace fbl::ops::rules {

namespace {

using ir::DType;
using ir::Shape;

Status constant(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  const ir::Node& n = c.node;
  if (n.attrs.size() != 1)
    return c.fail("must carry exactly one of value, value_float, value_floats, value_int, "
                  "value_ints");
  if (const ir::Tensor* t = n.attrTensor("value")) {
    setOut(c, 0, t->dtype(), t->shape());
  } else if (n.hasAttr("value_float")) {
    setOut(c, 0, DType::F32, {});
  } else if (n.hasAttr("value_floats")) {
    setOut(c, 0, DType::F32, {static_cast<int64_t>(n.attrFloats("value_floats").size())});
  } else if (n.hasAttr("value_int")) {
    setOut(c, 0, DType::I64, {});
  } else if (n.hasAttr("value_ints")) {
    setOut(c, 0, DType::I64, {static_cast<int64_t>(n.attrInts("value_ints").size())});
  } else {
    return c.fail("attribute 'value' is not a tensor");
  }
  return Status::success();
}

// The dimensions a shape-valued input holds; negative sizes are errors.
Result<Shape> constDims(const InferContext& c, size_t i, std::string_view what) {
  if (rankOf(c, i) != 1)
    return c.fail(fmt::format("input '{}' ({}) must be 1-D, not {}", inputName(c, i), what,
                              ir::shapeToString(c.in[i].shape)));
  return constInts(c, i, what);
}

Status constantOfShape(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_ASSIGN(Shape dims, constDims(c, 0, "the output shape"));
  for (int64_t d : dims)
    if (d < 0) return c.fail(fmt::format("negative output size in {}", ir::shapeToString(dims)));
  DType t = DType::F32;
  if (const ir::Tensor* v = c.node.attrTensor("value")) {
    if (v->numel() != 1) return c.fail("attribute 'value' must hold exactly one element");
    t = v->dtype();
  }
  setOut(c, 0, t, std::move(dims));
  return Status::success();
}

Status shape(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  int64_t rank = rankOf(c, 0);
  auto clampEnd = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  int64_t start = clampEnd(c.node.attrInt("start", 0));
  int64_t end = clampEnd(c.node.attrInt("end", rank));
  setOut(c, 0, DType::I64, {std::max<int64_t>(0, end - start)});
  return Status::success();
}

Status reshape(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_ASSIGN(Shape target, constDims(c, 1, "the target shape"));
  const Shape& in = c.in[0].shape;
  bool allowZero = c.node.attrInt("allowzero", 0) != 0;
  int64_t inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (i >= in.size())
        return c.fail(fmt::format("target {} copies dimension {} (0), but the input {} has "
                                  "no such dimension",
                                  ir::shapeToString(target), i, ir::shapeToString(in)));
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (inferred >= 0)
        return c.fail(fmt::format("target {} has more than one -1", ir::shapeToString(target)));
      inferred = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      return c.fail(fmt::format("target {} has a negative size", ir::shapeToString(target)));
    } else if (__builtin_mul_overflow(known, target[i], &known)) {
      return c.fail(fmt::format("target {} is out of range", ir::shapeToString(target)));
    }
  }
  int64_t total = ir::numElements(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return c.fail(fmt::format("cannot reshape {} to {}", ir::shapeToString(in),
                                ir::shapeToString(target)));
    target[inferred] = total / known;
  } else if (known != total) {
    return c.fail(fmt::format("cannot reshape {} ({} elements) to {}", ir::shapeToString(in),
                              total, ir::shapeToString(target)));
  }
  setOut(c, 0, c.in[0].dtype, std::move(target));
  return Status::success();
}

Status transpose(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  int64_t rank = rankOf(c, 0);
  std::vector<int64_t> perm(rank);
  for (int64_t i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
  perm = c.node.attrInts("perm", perm);
  std::vector<bool> seen(rank, false);
  if (static_cast<int64_t>(perm.size()) != rank)
    return c.fail(fmt::format("perm [{}] does not match rank {}", fmt::join(perm, ","), rank));
  Shape out(rank);
  for (int64_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
      return c.fail(fmt::format("perm [{}] is not a permutation", fmt::join(perm, ",")));
    seen[perm[i]] = true;
    out[i] = c.in[0].shape[perm[i]];
  }
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

Status unsqueeze(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_ASSIGN(std::vector<int64_t> axes, constInts(c, 1, "the axes"));
  int64_t outRank = rankOf(c, 0) + static_cast<int64_t>(axes.size());
  std::vector<bool> inserted(outRank, false);
  for (int64_t a : axes) {
    FBL_ASSIGN(int64_t ax, normalizeAxis(c, a, outRank));
    if (inserted[ax]) return c.fail(fmt::format("axis {} is repeated", a));
    inserted[ax] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i) out.push_back(inserted[i] ? 1 : c.in[0].shape[next++]);
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

Status squeeze(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  const Shape& in = c.in[0].shape;
  int64_t rank = rankOf(c, 0);
  std::vector<bool> drop(rank, false);
  if (hasInput(c, 1)) {
    FBL_ASSIGN(std::vector<int64_t> axes, constInts(c, 1, "the axes"));
    for (int64_t a : axes) {
      FBL_ASSIGN(int64_t ax, normalizeAxis(c, a, rank));
      if (in[ax] != 1)
        return c.fail(fmt::format("cannot squeeze axis {} of size {}", a, in[ax]));
      drop[ax] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) drop[i] = in[i] == 1;
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) out.push_back(in[i]);
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

Status concat(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  if (!c.node.hasAttr("axis")) return c.fail("attribute 'axis' is missing");
  int64_t rank = rankOf(c, 0);
  FBL_ASSIGN(int64_t axis, normalizeAxis(c, c.node.attrInt("axis", 0), rank));
  Shape out = c.in[0].shape;
  out[axis] = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!hasInput(c, i)) return c.fail(fmt::format("input {} is missing", i));
    FBL_TRY(expectSameDType(c, 0, i));
    const Shape& s = c.in[i].shape;
    bool fits = rankOf(c, i) == rank;
    for (int64_t d = 0; fits && d < rank; ++d) fits = d == axis || s[d] == out[d];
    if (!fits)
      return c.fail(fmt::format("input '{}' {} does not fit {} along axis {}", inputName(c, i),
                                ir::shapeToString(s), ir::shapeToString(c.in[0].shape), axis));
    out[axis] += s[axis];
  }
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

// Slice: ONNX's clamping rules; starts/ends may be huge (INT64_MAX means "to the end").
Status slice(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  int64_t rank = rankOf(c, 0);
  FBL_ASSIGN(std::vector<int64_t> starts, constInts(c, 1, "starts"));
  FBL_ASSIGN(std::vector<int64_t> ends, constInts(c, 2, "ends"));
  std::vector<int64_t> axes(starts.size());
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  if (hasInput(c, 3)) {
    FBL_ASSIGN(axes, constInts(c, 3, "axes"));
  }
  std::vector<int64_t> steps(starts.size(), 1);
  if (hasInput(c, 4)) {
    FBL_ASSIGN(steps, constInts(c, 4, "steps"));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return c.fail("starts, ends, axes and steps must have the same length");
  Shape out = c.in[0].shape;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    FBL_ASSIGN(int64_t ax, normalizeAxis(c, axes[i], rank));
    if (seen[ax]) return c.fail(fmt::format("axis {} is repeated", axes[i]));
    seen[ax] = true;
    int64_t dim = out[ax], step = steps[i];
    if (step == 0) return c.fail("a step is 0");
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    // 128-bit: a step of INT64_MIN has no 64-bit magnitude.
    __int128 span = 0, stride = step > 0 ? __int128{step} : -__int128{step};
    if (dim == 0) {
      span = 0;
    } else if (step > 0) {
      span = std::clamp<int64_t>(end, 0, dim) - std::clamp<int64_t>(start, 0, dim);
    } else {
      span = std::clamp<int64_t>(start, 0, dim - 1) - std::clamp<int64_t>(end, -1, dim - 1);
    }
    out[ax] = span > 0 ? static_cast<int64_t>((span - 1) / stride + 1) : 0;
  }
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

// Split into as many parts as the node has outputs: sizes from the `split` input, or equal
// parts (opset 18's num_outputs: ceil-sized parts, the last one smaller).
Status split(InferContext& c) {
  size_t n = c.node.outputs.size();
  if (n == 0) return c.fail("has no outputs");
  int64_t rank = rankOf(c, 0);
  FBL_ASSIGN(int64_t axis, normalizeAxis(c, c.node.attrInt("axis", 0), rank));
  int64_t dim = c.in[0].shape[axis];
  std::vector<int64_t> sizes;
  if (hasInput(c, 1)) {
    FBL_ASSIGN(sizes, constInts(c, 1, "the split sizes"));
  } else {
    int64_t parts = c.node.attrInt("num_outputs", static_cast<int64_t>(n));
    if (parts != static_cast<int64_t>(n))
      return c.fail(fmt::format("num_outputs={} but the node has {} outputs", parts, n));
    bool opset18 = c.node.hasAttr("num_outputs");
    if (!opset18 && dim % parts != 0)
      return c.fail(fmt::format("cannot split size {} into {} equal parts", dim, parts));
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::clamp<int64_t>(dim - i * chunk, 0, chunk));
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s < 0 ? dim + 1 : s;
  if (sizes.size() != n || total != dim)
    return c.fail(fmt::format("split sizes [{}] do not cover size {} in {} parts",
                              fmt::join(sizes, ","), dim, n));
  for (size_t i = 0; i < n; ++i) {
    Shape s = c.in[0].shape;
    s[axis] = sizes[i];
    setOut(c, i, c.in[0].dtype, std::move(s));
  }
  return Status::success();
}

Status pad(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  std::string mode = c.node.attrString("mode", "constant");
  if (mode != "constant")
    return c.fail(fmt::format("mode '{}' is not supported (only 'constant')", mode));
  int64_t rank = rankOf(c, 0);
  FBL_ASSIGN(std::vector<int64_t> pads, constInts(c, 1, "the pads"));
  std::vector<int64_t> axes(rank);
  for (int64_t i = 0; i < rank; ++i) axes[i] = i;
  if (hasInput(c, 3)) {
    FBL_ASSIGN(axes, constInts(c, 3, "the axes"));
  }
  if (pads.size() != 2 * axes.size())
    return c.fail(fmt::format("pads has {} entries, expected {}", pads.size(), 2 * axes.size()));
  if (hasInput(c, 2)) {
    FBL_TRY(expectSameDType(c, 0, 2));
    if (ir::numElements(c.in[2].shape) != 1)
      return c.fail("the constant_value input must hold one element");
  }
  Shape out = c.in[0].shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    FBL_ASSIGN(int64_t ax, normalizeAxis(c, axes[i], rank));
    __int128 size = __int128{out[ax]} + pads[i] + pads[i + axes.size()];
    if (size < 0) return c.fail(fmt::format("pads crop axis {} below size 0", axes[i]));
    if (size > std::numeric_limits<int64_t>::max())
      return c.fail(fmt::format("pads grow axis {} out of range", axes[i]));
    out[ax] = static_cast<int64_t>(size);
  }
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

Status expand(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_ASSIGN(Shape target, constDims(c, 1, "the target shape"));
  auto out = broadcastShapes(c.in[0].shape, target);
  if (!out)
    return c.fail(fmt::format("cannot expand {} to {}", ir::shapeToString(c.in[0].shape),
                              ir::shapeToString(target)));
  setOut(c, 0, c.in[0].dtype, std::move(*out));
  return Status::success();
}

// Tile: each axis repeated whole repeats[d] times (decompose-ops rewrites it for the device).
Status tile(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_ASSIGN(Shape repeats, constDims(c, 1, "the repeats"));
  const Shape& in = c.in[0].shape;
  if (repeats.size() != in.size())
    return c.fail(fmt::format("repeats {} must have one entry per axis of the input {}", ir::shapeToString(repeats),
                              ir::shapeToString(in)));
  Shape out(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (repeats[d] < 0) return c.fail(fmt::format("repeats {} has a negative entry", ir::shapeToString(repeats)));
    if (repeats[d] > 0 && in[d] > std::numeric_limits<int64_t>::max() / repeats[d])
      return c.fail(fmt::format("repeats {} overflow the input {}", ir::shapeToString(repeats), ir::shapeToString(in)));
    out[d] = in[d] * repeats[d];
  }
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

// Resize: the output size from the constant scales or sizes (resize_sampling.h says what is
// supported); roi is ignored, as every supported coordinate mode ignores it.
Status resize(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  for (size_t i : {2, 3})
    if (hasInput(c, i) && ir::numElements(c.in[i].shape) > 0 && c.constIn[i] == nullptr)
      return c.fail(fmt::format("the {} must be known at compile time", i == 2 ? "scales" : "sizes"));
  if (c.node.attrString("mode", "nearest") == "linear") FBL_TRY(expectFloat(c, 0));
  auto s = resizeSampling(c.node, c.in[0].shape, c.constIn.size() > 2 ? c.constIn[2] : nullptr,
                          c.constIn.size() > 3 ? c.constIn[3] : nullptr);
  if (!s.ok()) return c.fail(s.error().message);
  setOut(c, 0, c.in[0].dtype, s->outShape);
  return Status::success();
}

Status gather(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectIndex(c, 1));
  const Shape& data = c.in[0].shape;
  FBL_ASSIGN(int64_t axis, normalizeAxis(c, c.node.attrInt("axis", 0), rankOf(c, 0)));
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), c.in[1].shape.begin(), c.in[1].shape.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

Status gatherElements(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectIndex(c, 1));
  if (rankOf(c, 0) != rankOf(c, 1))
    return c.fail(fmt::format("data {} and indices {} must have the same rank",
                              ir::shapeToString(c.in[0].shape), ir::shapeToString(c.in[1].shape)));
  FBL_TRY(normalizeAxis(c, c.node.attrInt("axis", 0), rankOf(c, 0)));
  setOut(c, 0, c.in[0].dtype, c.in[1].shape);
  return Status::success();
}

// GatherND: out = indices.shape[:-1] + data.shape[batch_dims + k:], k = indices.shape[-1].
Status gatherND(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectDType(c, 1, DType::I64));
  const Shape& data = c.in[0].shape;
  const Shape& idx = c.in[1].shape;
  int64_t r = rankOf(c, 0), q = rankOf(c, 1), b = c.node.attrInt("batch_dims", 0);
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q))
    return c.fail(fmt::format("batch_dims={} does not fit data {} and indices {}", b,
                              ir::shapeToString(data), ir::shapeToString(idx)));
  int64_t k = idx.back();
  if (k < 1 || k > r - b)
    return c.fail(fmt::format("indices {} index {} dimensions of data {} (batch_dims={})",
                              ir::shapeToString(idx), k, ir::shapeToString(data), b));
  for (int64_t i = 0; i < b; ++i)
    if (data[i] != idx[i])
      return c.fail(fmt::format("batch dimensions of data {} and indices {} differ",
                                ir::shapeToString(data), ir::shapeToString(idx)));
  Shape out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + k, data.end());
  setOut(c, 0, c.in[0].dtype, std::move(out));
  return Status::success();
}

// ScatterND: out = data; updates = indices.shape[:-1] + data.shape[k:], k = indices.shape[-1].
Status scatterND(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectDType(c, 1, DType::I64));
  FBL_TRY(expectSameDType(c, 0, 2));
  const Shape& data = c.in[0].shape;
  const Shape& idx = c.in[1].shape;
  const int64_t r = rankOf(c, 0), q = rankOf(c, 1);
  if (r < 1 || q < 1) return c.fail("data and indices must have rank 1 or more");
  const int64_t k = idx.back();
  if (k < 1 || k > r)
    return c.fail(fmt::format("indices {} index {} dimensions of data {}", ir::shapeToString(idx), k,
                              ir::shapeToString(data)));
  Shape upd(idx.begin(), idx.end() - 1);
  upd.insert(upd.end(), data.begin() + k, data.end());
  if (c.in[2].shape != upd)
    return c.fail(fmt::format("updates {} must have shape {} (indices {}, data {})", ir::shapeToString(c.in[2].shape),
                              ir::shapeToString(upd), ir::shapeToString(idx), ir::shapeToString(data)));
  const std::string red = c.node.attrString("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return c.fail(fmt::format("reduction '{}' is not one of none, add, mul, max, min", red));
  c.out[0] = c.in[0];
  return Status::success();
}

// ScatterElements: out = data; indices and updates share a shape of data's rank, no larger
// than data on any axis (ONNX); the indices run along `axis`.
Status scatterElements(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectIndex(c, 1));
  FBL_TRY(expectSameDType(c, 0, 2));
  const Shape& data = c.in[0].shape;
  const Shape& idx = c.in[1].shape;
  if (rankOf(c, 0) < 1 || rankOf(c, 0) != rankOf(c, 1))
    return c.fail(fmt::format("data {} and indices {} must have the same rank, 1 or more", ir::shapeToString(data),
                              ir::shapeToString(idx)));
  if (c.in[2].shape != idx)
    return c.fail(fmt::format("updates {} must have the indices' shape {}", ir::shapeToString(c.in[2].shape),
                              ir::shapeToString(idx)));
  for (size_t d = 0; d < idx.size(); ++d)
    if (idx[d] > data[d])
      return c.fail(fmt::format("indices {} exceed data {} on axis {}", ir::shapeToString(idx),
                                ir::shapeToString(data), d));
  FBL_TRY(normalizeAxis(c, c.node.attrInt("axis", 0), rankOf(c, 0)));
  const std::string red = c.node.attrString("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return c.fail(fmt::format("reduction '{}' is not one of none, add, mul, max, min", red));
  c.out[0] = c.in[0];
  return Status::success();
}

// Flatten: [prod(dims before axis), prod(dims from axis)].
Status flatten(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  const int64_t r = rankOf(c, 0);
  int64_t axis = c.node.attrInt("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r)
    return c.fail(fmt::format("axis {} is outside [-{}, {}]", c.node.attrInt("axis", 1), r, r));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= c.in[0].shape[d];
  setOut(c, 0, c.in[0].dtype, {outer, inner});
  return Status::success();
}

Status range(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectSameDType(c, 0, 1));
  FBL_TRY(expectSameDType(c, 0, 2));
  if (c.in[0].dtype == DType::Bool) return c.fail("Range needs numbers, not bool");
  FBL_ASSIGN(double start, constScalar(c, 0, "start"));
  FBL_ASSIGN(double limit, constScalar(c, 1, "limit"));
  FBL_ASSIGN(double delta, constScalar(c, 2, "delta"));
  if (delta == 0) return c.fail("delta is 0");
  int64_t n = 0;
  if (ir::isFloat(c.in[0].dtype)) {
    double count = std::max(0.0, std::ceil((limit - start) / delta));
    if (!(count < 9e15)) return c.fail("the range has too many elements");
    n = static_cast<int64_t>(count);
  } else {
    // Integers exactly (128-bit, so no span overflows): ceil((limit - start) / delta).
    const ir::Tensor *s = c.constIn[0], *l = c.constIn[1], *d = c.constIn[2];
    __int128 span = __int128{l->toInt64s()[0]} - s->toInt64s()[0];
    __int128 step = d->toInt64s()[0];
    if (step < 0) span = -span, step = -step;
    __int128 count = span > 0 ? (span + step - 1) / step : 0;
    if (count > std::numeric_limits<int64_t>::max())
      return c.fail("the range has too many elements");
    n = static_cast<int64_t>(count);
  }
  setOut(c, 0, c.in[0].dtype, {n});
  return Status::success();
}

Status cumSum(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectIndex(c, 1));
  if (ir::numElements(c.in[1].shape) != 1 || rankOf(c, 1) > 1)
    return c.fail("the axis input must be a scalar");
  if (c.constIn[1] != nullptr)
    FBL_TRY(normalizeAxis(c, c.constIn[1]->toInt64s()[0], rankOf(c, 0)));
  c.out[0] = c.in[0];
  return Status::success();
}

Status trilu(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  if (rankOf(c, 0) < 2)
    return c.fail(fmt::format("input {} must have rank 2 or more",
                              ir::shapeToString(c.in[0].shape)));
  if (hasInput(c, 1) && ir::numElements(c.in[1].shape) != 1)
    return c.fail("the k input must be a scalar");
  c.out[0] = c.in[0];
  return Status::success();
}

}  // namespace

std::vector<OpSchema> shapeSchemas() {
  return {
      {"Constant", 0, 0, {"value", "value_float", "value_floats", "value_int", "value_ints"},
       constant},
      {"ConstantOfShape", 1, 1, {"value"}, constantOfShape},
      {"Shape", 1, 1, {"start", "end"}, shape},
      {"Reshape", 2, 2, {"allowzero"}, reshape},
      {"Transpose", 1, 1, {"perm"}, transpose},
      {"Unsqueeze", 2, 2, {}, unsqueeze},
      {"Squeeze", 1, 2, {}, squeeze},
      {"Concat", 1, kVariadic, {"axis"}, concat},
      {"Slice", 3, 5, {}, slice},
      {"Split", 1, 2, {"axis", "num_outputs"}, split},
      {"Pad", 2, 4, {"mode"}, pad},
      {"Expand", 2, 2, {}, expand},
      {"Tile", 2, 2, {}, tile},
      {"Resize", 1, 4, {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                        "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"}, resize},
      {"Gather", 2, 2, {"axis"}, gather},
      {"GatherElements", 2, 2, {"axis"}, gatherElements},
      {"GatherND", 2, 2, {"batch_dims"}, gatherND},
      {"ScatterND", 3, 3, {"reduction"}, scatterND},
      {"ScatterElements", 3, 3, {"axis", "reduction"}, scatterElements},
      {"Flatten", 1, 1, {"axis"}, flatten},
      {"Range", 3, 3, {}, range},
      {"CumSum", 2, 2, {"exclusive", "reverse"}, cumSum},
      {"Trilu", 1, 2, {"upper"}, trilu},
  };
}

}  // namespace fbl::ops::rules
