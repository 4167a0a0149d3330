// Gradient rules for movement ops (each the inverse index map applied to dy), and for the ops
// that select or place elements (the Gathers, the Scatters, Where, Slice, Concat, Pad), whose
// gradients scatter dy back or gather it.
#include <set>

#include "compiler/autodiff/grad_rules.h"
#include "compiler/layout/movement.h"

namespace fbl::autodiff {

namespace {

using ir::ValueId;
using Grads = std::vector<ValueId>;

Grads none(const GradContext& c) { return Grads(c.fwd.inputs.size(), ir::kNoValue); }

int64_t normAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// Reshape, Squeeze, Unsqueeze, Flatten and Identity keep the elements in order.
Result<Grads> reshapeGrad(GradContext& c) {
  Grads g = none(c);
  g[0] = c.b.reshape(c.dy[0], c.b.shape(c.in(0)));
  return g;
}

Result<Grads> castGrad(GradContext& c) {
  auto& b = c.b;
  ir::DType from = b.dtype(c.in(0));
  if (!ir::isFloat(from)) return c.fail("cannot differentiate a Cast from a non-float type");
  Grads g = none(c);
  g[0] = from == b.dtype(c.dy[0])
             ? c.dy[0]
             : b.emit("Cast", {c.dy[0]}, from, b.shape(c.dy[0]), {{"to", int64_t(from)}});
  return g;
}

// Dropout is the identity when it is off (ratio 0 or inference mode), as in the corpus.
Result<Grads> dropoutGrad(GradContext& c) {
  auto& b = c.b;
  bool off = c.in(2) == ir::kNoValue;
  if (!off) {
    const ir::Tensor* mode = b.constData(c.in(2));
    off = mode != nullptr && mode->numel() == 1 && mode->at(0) == 0.0;
  }
  if (!off && c.in(1) != ir::kNoValue) {
    const ir::Tensor* ratio = b.constData(c.in(1));
    off = ratio != nullptr && ratio->numel() == 1 && ratio->at(0) == 0.0;
  }
  if (!off) return c.fail("Dropout in training mode with a non-zero ratio is not differentiated");
  Grads g = none(c);
  g[0] = c.dy[0];
  return g;
}

Result<Grads> transposeGrad(GradContext& c) {
  int64_t rank = c.b.rank(c.in(0));
  std::vector<int64_t> perm = c.fwd.attrInts("perm");
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[normAxis(perm[i], perm.size())] = int64_t(i);
  Grads g = none(c);
  g[0] = c.b.transpose(c.dy[0], inverse);
  return g;
}

Result<Grads> expandGrad(GradContext& c) {
  Grads g = none(c);
  g[0] = c.b.reduceSumTo(c.dy[0], c.b.shape(c.in(0)));
  return g;
}

// dx scatters dy into zeros at the sliced positions (fbl.SliceGrad, attributes normalized).
Result<Grads> sliceGrad(GradContext& c) {
  auto& b = c.b;
  std::vector<std::vector<int64_t>> args(4);
  if (c.fwd.inputs.size() == 1) {  // opset < 10: attributes
    args[0] = c.fwd.attrInts("starts");
    args[1] = c.fwd.attrInts("ends");
    args[2] = c.fwd.attrInts("axes");
  } else {
    for (size_t i = 1; i <= 4; ++i) {
      if (c.in(i) == ir::kNoValue) continue;
      const ir::Tensor* t = b.constData(c.in(i));
      if (t == nullptr) return c.fail("Slice parameters must be compile-time constants");
      args[i - 1] = t->toInt64s();
    }
  }
  ir::Shape sx = b.shape(c.in(0));
  auto params = layout::normalizeSlice(sx, args[0], args[1], args[2], args[3]);
  if (!params.ok()) return c.fail(params.error().message);
  const layout::SliceParams& p = params.value();
  Grads g = none(c);
  g[0] = b.emit("fbl.SliceGrad", {c.dy[0]}, b.dtype(c.dy[0]), sx,
                {{"shape", sx}, {"axes", p.axes}, {"starts", p.starts}, {"steps", p.steps}});
  return g;
}

// Constant-mode Pad: dx is the window of dy that holds x, one Slice. Negative pads crop x, so
// then the inverse is a Pad of dy by the negated pads (zeros where x's elements were cut).
// The pad value gets no gradient; reflect/edge modes would scatter dy onto x's border.
Result<Grads> padGrad(GradContext& c) {
  auto& b = c.b;
  std::string mode = c.fwd.attrString("mode", "constant");
  if (mode != "constant") return c.fail("Pad in mode " + mode + " is not differentiated");
  if (c.fwd.inputs.size() > 2 && c.in(2) != ir::kNoValue && c.wants[2])
    return c.fail("the gradient with respect to Pad's constant_value is not supported");
  ir::Shape sx = b.shape(c.in(0));
  size_t rank = sx.size();
  std::vector<int64_t> pads, axes;
  if (c.fwd.inputs.size() > 1 && c.in(1) != ir::kNoValue) {
    const ir::Tensor* t = b.constData(c.in(1));
    if (t == nullptr) return c.fail("Pad's pads must be compile-time constants");
    pads = t->toInt64s();
  } else {
    pads = c.fwd.attrInts("pads");  // opset < 11
  }
  if (c.fwd.inputs.size() > 3 && c.in(3) != ir::kNoValue) {
    const ir::Tensor* t = b.constData(c.in(3));
    if (t == nullptr) return c.fail("Pad's axes must be compile-time constants");
    axes = t->toInt64s();
  } else {
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  }
  if (pads.size() != 2 * axes.size()) return c.fail("Pad's pads do not match its axes");
  std::vector<int64_t> before(rank, 0), after(rank, 0);
  bool crops = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normAxis(axes[i], rank);
    if (a < 0 || a >= static_cast<int64_t>(rank)) return c.fail("Pad axis out of range");
    before[a] = pads[i];
    after[a] = pads[i + axes.size()];
    crops = crops || before[a] < 0 || after[a] < 0;
  }
  ValueId dy = c.dy[0];
  Grads g = none(c);
  if (crops) {
    std::vector<int64_t> inverse;
    for (int64_t p : before) inverse.push_back(-p);
    for (int64_t p : after) inverse.push_back(-p);
    g[0] = b.emit("Pad", {dy, b.ints(inverse)}, b.dtype(dy), sx, {{"mode", std::string("constant")}});
    return g;
  }
  std::vector<int64_t> starts, ends, sliced;
  for (size_t d = 0; d < rank; ++d) {
    if (before[d] == 0 && after[d] == 0) continue;
    starts.push_back(before[d]);
    ends.push_back(before[d] + sx[d]);
    sliced.push_back(static_cast<int64_t>(d));
  }
  g[0] = sliced.empty() ? dy
                        : b.emit("Slice", {dy, b.ints(starts), b.ints(ends), b.ints(sliced)},
                                 b.dtype(dy), sx);
  return g;
}

// Each input's gradient is its slab of dy.
Result<Grads> concatGrad(GradContext& c) {
  auto& b = c.b;
  ir::Shape sy = b.shape(c.dy[0]);
  int64_t axis = normAxis(c.fwd.attrInt("axis", 0), sy.size());
  Grads g = none(c);
  int64_t offset = 0;
  for (size_t i = 0; i < c.fwd.inputs.size(); ++i) {
    ir::Shape si = b.shape(c.in(i));
    int64_t len = si[axis];
    if (c.wants[i]) {
      g[i] = b.emit("Slice",
                    {c.dy[0], b.ints({offset}), b.ints({offset + len}), b.ints({axis})},
                    b.dtype(c.dy[0]), si);
    }
    offset += len;
  }
  return g;
}

// Embedding lookups and index selection: dy is scatter-added back into the table's shape.
Result<Grads> gatherGrad(GradContext& c) {
  auto& b = c.b;
  ir::Shape sx = b.shape(c.in(0));
  int64_t axis = normAxis(c.fwd.attrInt("axis", 0), sx.size());
  Grads g = none(c);
  g[0] = b.emit("fbl.GatherGrad", {c.dy[0], c.in(1)}, b.dtype(c.dy[0]), sx,
                {{"axis", axis}, {"shape", sx}});
  return g;
}

// data[idx[t]] = updates[t] (reduction none) or += (add): dy flows to the updates at their
// tuples (GatherND) and to data everywhere else (none: ScatterND of zeros over dy) or everywhere
// (add). Under none a tuple written twice keeps only its last update; constant indices with a
// repeat are refused, since the earlier updates would get a gradient they do not have.
Result<Grads> scatterNDGrad(GradContext& c) {
  auto& b = c.b;
  const std::string red = c.fwd.attrString("reduction", "none");
  if (red != "none" && red != "add") return c.fail("ScatterND is differentiated for reduction none and add only");
  ValueId dy = c.dy[0];
  if (red == "none")
    if (const ir::Tensor* idx = b.constData(c.in(1))) {
      const std::vector<int64_t> v = idx->toInt64s();
      const int64_t m = idx->shape().back();
      const ir::Shape ds = b.shape(c.in(0));
      std::set<std::vector<int64_t>> seen;
      for (size_t t = 0; m > 0 && t < v.size() / static_cast<size_t>(m); ++t) {
        std::vector<int64_t> tuple(v.begin() + static_cast<int64_t>(t) * m, v.begin() + static_cast<int64_t>(t + 1) * m);
        for (int64_t k = 0; k < m; ++k)
          if (tuple[k] < 0) tuple[k] += ds[k];
        if (!seen.insert(tuple).second) return c.fail("ScatterND with a repeated index tuple is not differentiated");
      }
    }
  Grads g = none(c);
  if (c.wants[0])
    g[0] = red == "add" ? dy
                        : b.emit("ScatterND", {dy, c.in(1), b.expand(b.scalar(0.0, b.dtype(dy)), b.shape(c.in(2)))},
                                 b.dtype(dy), b.shape(dy));
  if (c.wants[2]) g[2] = b.emit("GatherND", {dy, c.in(1)}, b.dtype(dy), b.shape(c.in(2)));
  return g;
}

// ScatterElements, as ScatterND with one index per update position: the updates get dy where they
// landed (GatherElements), data gets dy where nothing was written (none) or everywhere (add).
// Constant indices that write one element twice are refused under none, as for ScatterND.
Result<Grads> scatterElementsGrad(GradContext& c) {
  auto& b = c.b;
  const std::string red = c.fwd.attrString("reduction", "none");
  if (red != "none" && red != "add")
    return c.fail("ScatterElements is differentiated for reduction none and add only");
  const ir::Shape ds = b.shape(c.in(0)), is = b.shape(c.in(1));
  const int64_t axis = normAxis(c.fwd.attrInt("axis", 0), ds.size());
  if (red == "none")
    if (const ir::Tensor* idx = b.constData(c.in(1))) {
      const std::vector<int64_t> v = idx->toInt64s();
      std::set<std::vector<int64_t>> seen;
      std::vector<int64_t> coord(is.size(), 0);
      for (size_t p = 0; p < v.size(); ++p) {
        std::vector<int64_t> target = coord;
        target[axis] = v[p] < 0 ? v[p] + ds[axis] : v[p];
        if (!seen.insert(target).second)
          return c.fail("ScatterElements writing one element twice is not differentiated");
        for (int64_t d = static_cast<int64_t>(is.size()) - 1; d >= 0 && ++coord[d] == is[d]; --d) coord[d] = 0;
      }
    }
  ValueId dy = c.dy[0];
  Grads g = none(c);
  if (c.wants[0])
    g[0] = red == "add" ? dy
                        : b.emit("ScatterElements", {dy, c.in(1), b.expand(b.scalar(0.0, b.dtype(dy)), is)},
                                 b.dtype(dy), ds, {{"axis", axis}});
  if (c.wants[2]) g[2] = b.emit("GatherElements", {dy, c.in(1)}, b.dtype(dy), is, {{"axis", axis}});
  return g;
}

// Split (the exporter's optimizer writes it for fused qkv and gate_up): the parts' gradients
// joined back along the axis; a part no gradient reaches contributes zeros.
Result<Grads> splitGrad(GradContext& c) {
  auto& b = c.b;
  const ir::Shape xs = b.shape(c.in(0));
  const int64_t axis = normAxis(c.fwd.attrInt("axis", 0), xs.size());
  ir::DType dt = ir::DType::Undefined;
  for (ValueId d : c.dy)
    if (d != ir::kNoValue) dt = b.dtype(d);
  std::vector<ValueId> parts;
  for (size_t i = 0; i < c.fwd.outputs.size(); ++i) {
    const ValueId d = i < c.dy.size() ? c.dy[i] : ir::kNoValue;
    parts.push_back(d != ir::kNoValue ? d : b.expand(b.scalar(0.0, dt), b.shape(c.out(i))));
  }
  Grads g = none(c);
  g[0] = parts.size() == 1 ? parts[0] : b.emit("Concat", parts, dt, xs, {{"axis", axis}});
  return g;
}

// GatherND's transpose: dy scatter-added into zeros of the data's shape.
Result<Grads> gatherNDGrad(GradContext& c) {
  auto& b = c.b;
  if (c.fwd.attrInt("batch_dims", 0) != 0) return c.fail("GatherND is differentiated for batch_dims 0 only");
  Grads g = none(c);
  const ir::Shape sx = b.shape(c.in(0));
  g[0] = b.emit("ScatterND", {b.expand(b.scalar(0.0, b.dtype(c.dy[0])), sx), c.in(1), c.dy[0]}, b.dtype(c.dy[0]), sx,
                {{"reduction", std::string("add")}});
  return g;
}

// GatherElements' transpose: dy scatter-added into zeros of the data's shape along the axis (an
// element gathered twice gets both contributions, as PyTorch's gather backward).
Result<Grads> gatherElementsGrad(GradContext& c) {
  auto& b = c.b;
  const ir::Shape sx = b.shape(c.in(0));
  const int64_t axis = normAxis(c.fwd.attrInt("axis", 0), sx.size());
  Grads g = none(c);
  g[0] = b.emit("ScatterElements", {b.expand(b.scalar(0.0, b.dtype(c.dy[0])), sx), c.in(1), c.dy[0]},
                b.dtype(c.dy[0]), sx, {{"axis", axis}, {"reduction", std::string("add")}});
  return g;
}

// TopK: each value's gradient goes back to the position its index names. The K indices of a
// line are distinct, so a plain scatter into zeros is exact (no accumulation order to fix).
Result<Grads> topKGrad(GradContext& c) {
  auto& b = c.b;
  Grads g = none(c);
  if (c.dy[0] == ir::kNoValue) return g;
  const ir::Shape sx = b.shape(c.in(0));
  const int64_t axis = normAxis(c.fwd.attrInt("axis", -1), sx.size());
  g[0] = b.emit("ScatterElements", {b.expand(b.scalar(0.0, b.dtype(c.dy[0])), sx), c.out(1), c.dy[0]},
                b.dtype(c.dy[0]), sx, {{"axis", axis}});
  return g;
}

Result<Grads> whereGrad(GradContext& c) {
  auto& b = c.b;
  ValueId dy = c.dy[0];
  ValueId zero = b.scalar(0.0, b.dtype(dy));
  Grads g = none(c);
  for (size_t i = 1; i <= 2; ++i) {
    if (!c.wants[i]) continue;
    std::vector<ValueId> ins = i == 1 ? std::vector<ValueId>{c.in(0), dy, zero}
                                      : std::vector<ValueId>{c.in(0), zero, dy};
    ValueId picked = b.emit("Where", ins, b.dtype(dy), b.shape(dy));
    g[i] = b.reduceSumTo(picked, b.shape(c.in(i)));
  }
  return g;
}

}  // namespace

std::vector<GradRule> shapeGradRules() {
  return {
      {"Reshape", reshapeGrad},     {"Squeeze", reshapeGrad},     {"Unsqueeze", reshapeGrad},
      {"Flatten", reshapeGrad},     {"Identity", reshapeGrad},    {"Cast", castGrad},
      {"CastLike", castGrad},       {"Dropout", dropoutGrad},     {"Transpose", transposeGrad},
      {"Expand", expandGrad},       {"Slice", sliceGrad},         {"Concat", concatGrad},
      {"Gather", gatherGrad},       {"Where", whereGrad},         {"Pad", padGrad},
      {"ScatterND", scatterNDGrad}, {"GatherND", gatherNDGrad}, {"ScatterElements", scatterElementsGrad},
      {"GatherElements", gatherElementsGrad}, {"Split", splitGrad}, {"TopK", topKGrad},
  };
}

}  // namespace fbl::autodiff
