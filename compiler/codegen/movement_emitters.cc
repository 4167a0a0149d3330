// Movement ops as strided copies (kernels_cl/strided_copy.cl): each becomes an iteration shape
// with a source and a destination view (an offset and one stride per dim), so all of them share
// one template and one tested index generator. The views come from the movement table
// (layout/movement.h), which also defines the reference executor's copies:
//  - Transpose, Slice: the node's own movement op over its input, iterated over the output.
//  - Concat: one copy per input into its block of the output (a Slice of the output).
//  - Split: one copy per output out of its block of the input.
//  - Pad (constant mode): fill with the pad value, then copy the kept part of the input (a
//    Slice, negative pads crop) into its place in the output (a Slice). Neither Concat nor Pad
//    is one index map of one input, so they are built from slices rather than being table rows.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"
#include "compiler/layout/movement.h"

namespace fbl::codegen {
namespace {

using ir::Shape;
using layout::MovementOp;
using layout::StridedView;

// The launch copying dst-view(i) <- src-view(i) for every index i of `iter`. Offsets are unsigned
// in the kernel, so a view walking backwards (a negative Slice step) is refused.
Result<LaunchSpec> stridedCopy(const ir::Graph& g, const ir::Node& n, const Shape& iter, const StridedView& src,
                               const StridedView& dst, ir::ValueId from, ir::ValueId to, std::string_view tag,
                               const Target& t) {
  for (const StridedView* v : {&src, &dst})
    for (int64_t s : v->strides)
      if (s < 0) return makeError("{}: a negative step (a view walking backwards) is not supported", ir::describeNode(g, n));
  const int64_t count = ir::numElements(iter);
  const std::string index =
      emitOffsets(iter, "i", {{"o_src", src.strides, src.offset}, {"o_dst", dst.strides, dst.offset}});
  return launch("strided_copy",
                {{"T", std::string(clType(g.values[to].dtype))}, {"N", std::to_string(count)}, {"INDEX", index}},
                tag, {val(from), val(to)}, grid1(count, t), {t.workgroup});
}

StridedView dense(const Shape& s) { return {0, ir::stridesOf(s)}; }

// Block [at, at + len) along `axis` of a tensor of shape `s`.
Result<StridedView> block(const Shape& s, int64_t axis, int64_t at, int64_t len) {
  return layout::stridedView(s, MovementOp::slice({axis}, {at}, {at + len}));
}

// Transpose and Slice: the table's op of the node over its input.
Result<NodeCode> view(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  auto constant = [&](size_t slot) -> Result<std::optional<std::vector<int64_t>>> {
    if (n.input(slot) == ir::kNoValue) return std::optional<std::vector<int64_t>>();
    auto v = constInts(g, n.inputs[slot]);
    if (!v) return makeError("input {} must be a compile-time constant", slot);
    return v;
  };
  auto op = layout::onnxMovementOp(n, in.shape, constant);
  if (!op.ok()) return makeError("{}: {}", ir::describeNode(g, n), op.error().message);
  auto src = layout::stridedView(in.shape, *op);
  if (!src.ok()) return makeError("{}: {}", ir::describeNode(g, n), src.error().message);
  NodeCode c;
  FBL_ASSIGN(LaunchSpec l, stridedCopy(g, n, out.shape, *src, dense(out.shape), n.inputs[0], n.outputs[0],
                                       lowerTag(n.op), t));
  c.launches.push_back(std::move(l));
  return c;
}

Result<NodeCode> concat(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& out = g.values[n.outputs[0]];
  const int64_t axis = normAxis(n.attrInt("axis", 0), out.shape.size());
  NodeCode c;
  int64_t at = 0;
  for (ir::ValueId v : n.inputs) {
    const ir::Value& in = g.values[v];
    if (ir::numElements(in.shape) > 0) {
      FBL_ASSIGN(StridedView dst, block(out.shape, axis, at, in.shape[axis]));
      FBL_ASSIGN(LaunchSpec l, stridedCopy(g, n, in.shape, dense(in.shape), dst, v, n.outputs[0], "concat", t));
      c.launches.push_back(std::move(l));
    }
    at += in.shape[axis];
  }
  return c;
}

Result<NodeCode> split(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& in = g.values[n.inputs[0]];
  const int64_t axis = normAxis(n.attrInt("axis", 0), in.shape.size());
  NodeCode c;
  int64_t at = 0;
  for (ir::ValueId o : n.outputs) {
    if (o == ir::kNoValue) continue;
    const ir::Value& out = g.values[o];
    FBL_ASSIGN(StridedView src, block(in.shape, axis, at, out.shape[axis]));
    FBL_ASSIGN(LaunchSpec l, stridedCopy(g, n, out.shape, src, dense(out.shape), n.inputs[0], o, "split", t));
    c.launches.push_back(std::move(l));
    at += out.shape[axis];
  }
  return c;
}

Result<NodeCode> pad(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  const size_t rank = in.shape.size();
  if (n.attrString("mode", "constant") != "constant")
    return makeError("{}: only constant Pad is supported", ir::describeNode(g, n));
  auto pads = n.inputs.size() > 1 ? constInts(g, n.inputs[1]) : std::optional(n.attrInts("pads"));
  if (!pads) return makeError("{}: Pad pads must be compile-time constants", ir::describeNode(g, n));
  double value = 0.0;
  if (n.input(2) != ir::kNoValue) {
    auto v = constScalar(g, n.inputs[2]);
    if (!v) return makeError("{}: Pad value must be a compile-time constant", ir::describeNode(g, n));
    value = *v;
  }
  std::vector<int64_t> axes;
  if (auto a = constInts(g, n.input(3))) axes = *a;
  if (axes.empty())
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  std::vector<int64_t> before(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) before[normAxis(axes[i], rank)] = (*pads)[i];
  // The kept part of the input (negative pads crop it) and its place in the output, both slices.
  std::vector<int64_t> all(rank), from(rank), fromEnd(rank), to(rank), toEnd(rank);
  Shape iter(rank);
  for (size_t d = 0; d < rank; ++d) {
    all[d] = static_cast<int64_t>(d);
    from[d] = std::max<int64_t>(0, -before[d]);
    to[d] = std::max<int64_t>(0, before[d]);
    iter[d] = std::max<int64_t>(0, std::min(in.shape[d] - from[d], out.shape[d] - to[d]));
    fromEnd[d] = from[d] + iter[d];
    toEnd[d] = to[d] + iter[d];
  }
  NodeCode c;
  const int64_t count = ir::numElements(out.shape);
  const std::string lit = ir::isFloat(out.dtype) ? floatLiteral(value) : fmt::format("{}", static_cast<int64_t>(value));
  c.launches.push_back(launch("fill", {{"T", std::string(clType(out.dtype))}, {"N", std::to_string(count)}, {"VALUE", lit}},
                              "fill", {val(n.outputs[0])}, grid1(count, t), {t.workgroup}));
  if (ir::numElements(iter) > 0) {
    FBL_ASSIGN(StridedView src, layout::stridedView(in.shape, MovementOp::slice(all, from, fromEnd)));
    FBL_ASSIGN(StridedView dst, layout::stridedView(out.shape, MovementOp::slice(all, to, toEnd)));
    FBL_ASSIGN(LaunchSpec l, stridedCopy(g, n, iter, src, dst, n.inputs[0], n.outputs[0], "pad", t));
    c.launches.push_back(std::move(l));
  }
  return c;
}

}  // namespace

std::vector<EmitterEntry> movementEmitters() {
  return {{"Transpose", view}, {"Slice", view}, {"Concat", concat}, {"Split", split}, {"Pad", pad}};
}

}  // namespace fbl::codegen
