// Gradient rules for movement ops (each the inverse index map applied to dy), and for the ops
// that select elements (Gather, Where, Slice, Concat), whose gradients scatter dy back.
#include "compiler/autodiff/grad_rules.h"
#include "compiler/autodiff/slice_params.h"

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
  auto params = normalizeSlice(sx, args[0], args[1], args[2], args[3]);
  if (!params.ok()) return c.fail(params.error().message);
  const SliceParams& p = params.value();
  Grads g = none(c);
  g[0] = b.emit("fbl.SliceGrad", {c.dy[0]}, b.dtype(c.dy[0]), sx,
                {{"shape", sx}, {"axes", p.axes}, {"starts", p.starts}, {"steps", p.steps}});
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
      {"Gather", gatherGrad},       {"Where", whereGrad},
  };
}

}  // namespace fbl::autodiff
