// Movement ops as strided copies (kernels_cl/strided_copy.cl): each becomes an iteration shape
// with a source and a destination stride per dim plus base offsets, so all of them share one
// template and one tested index generator.
//  - Transpose: iterate the output; source strides permuted.
//  - Slice: iterate the output; source strides times step, base at the clamped starts.
//  - Concat: one copy per input into the output, base at the input's offset along the axis.
//  - Split: one copy per output out of the input.
//  - Pad (constant mode): fill with the pad value, then copy the overlap of input and output.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"

namespace fbl::codegen {
namespace {

using ir::Shape;

LaunchSpec stridedCopy(const Shape& iter, std::vector<int64_t> srcStrides, int64_t srcBase,
                       std::vector<int64_t> dstStrides, int64_t dstBase, ir::DType dt,
                       ir::ValueId src, ir::ValueId dst, std::string_view tag, const Target& t) {
  const int64_t count = ir::numElements(iter);
  const std::string index = emitOffsets(
      iter, "i", {{"o_src", std::move(srcStrides), srcBase}, {"o_dst", std::move(dstStrides), dstBase}});
  return launch("strided_copy",
                {{"T", std::string(clType(dt))}, {"N", std::to_string(count)}, {"INDEX", index}},
                tag, {val(src), val(dst)}, grid1(count, t), {t.workgroup});
}

Result<NodeCode> transpose(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  std::vector<int64_t> perm = n.attrInts("perm");
  if (perm.empty())
    for (size_t d = in.shape.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  const std::vector<int64_t> inStrides = ir::stridesOf(in.shape);
  std::vector<int64_t> src;
  for (int64_t p : perm) src.push_back(inStrides[p]);
  NodeCode c;
  c.launches.push_back(stridedCopy(out.shape, src, 0, ir::stridesOf(out.shape), 0, out.dtype,
                                   n.inputs[0], n.outputs[0], "transpose", t));
  return c;
}

Result<NodeCode> slice(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  const size_t rank = in.shape.size();
  std::vector<int64_t> starts, axes, steps;
  if (n.inputs.size() > 1) {
    auto s = constInts(g, n.inputs[1]);
    if (!s) return makeError("{}: Slice starts must be compile-time constants", ir::describeNode(g, n));
    starts = *s;
    if (auto a = constInts(g, n.input(3))) axes = *a;
    if (auto st = constInts(g, n.input(4))) steps = *st;
  } else {
    starts = n.attrInts("starts");
    axes = n.attrInts("axes");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t ax = normAxis(axes[i], rank), dim = in.shape[ax];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    // Clamp as ONNX does: [0, dim] for positive steps, [0, dim-1] for negative ones.
    s = steps[i] > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
    begin[ax] = s;
    step[ax] = steps[i];
  }
  const std::vector<int64_t> inStrides = ir::stridesOf(in.shape);
  std::vector<int64_t> src(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    src[d] = inStrides[d] * step[d];
    base += begin[d] * inStrides[d];
  }
  // Negative steps walk backwards: unsigned strides cannot, so reject them (none in the corpus).
  for (int64_t s : step)
    if (s < 0) return makeError("{}: Slice with a negative step is not supported", ir::describeNode(g, n));
  NodeCode c;
  c.launches.push_back(stridedCopy(out.shape, src, base, ir::stridesOf(out.shape), 0, out.dtype,
                                   n.inputs[0], n.outputs[0], "slice", t));
  return c;
}

Result<NodeCode> concat(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& out = g.values[n.outputs[0]];
  const int64_t axis = normAxis(n.attrInt("axis", 0), out.shape.size());
  const std::vector<int64_t> outStrides = ir::stridesOf(out.shape);
  NodeCode c;
  int64_t at = 0;
  for (ir::ValueId v : n.inputs) {
    const ir::Value& in = g.values[v];
    if (ir::numElements(in.shape) > 0)
      c.launches.push_back(stridedCopy(in.shape, ir::stridesOf(in.shape), 0, outStrides,
                                       at * outStrides[axis], out.dtype, v, n.outputs[0], "concat", t));
    at += in.shape[axis];
  }
  return c;
}

Result<NodeCode> split(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& in = g.values[n.inputs[0]];
  const int64_t axis = normAxis(n.attrInt("axis", 0), in.shape.size());
  const std::vector<int64_t> inStrides = ir::stridesOf(in.shape);
  NodeCode c;
  int64_t at = 0;
  for (ir::ValueId o : n.outputs) {
    if (o == ir::kNoValue) continue;
    const ir::Value& out = g.values[o];
    c.launches.push_back(stridedCopy(out.shape, inStrides, at * inStrides[axis],
                                     ir::stridesOf(out.shape), 0, out.dtype, n.inputs[0], o, "split", t));
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
  const std::vector<int64_t> inStrides = ir::stridesOf(in.shape), outStrides = ir::stridesOf(out.shape);
  Shape iter(rank);
  int64_t srcBase = 0, dstBase = 0;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t s0 = std::max<int64_t>(0, -before[d]), d0 = std::max<int64_t>(0, before[d]);
    iter[d] = std::max<int64_t>(0, std::min(in.shape[d] - s0, out.shape[d] - d0));
    srcBase += s0 * inStrides[d];
    dstBase += d0 * outStrides[d];
  }
  NodeCode c;
  const int64_t count = ir::numElements(out.shape);
  const std::string lit = ir::isFloat(out.dtype) ? floatLiteral(value) : fmt::format("{}", static_cast<int64_t>(value));
  c.launches.push_back(launch("fill", {{"T", std::string(clType(out.dtype))}, {"N", std::to_string(count)}, {"VALUE", lit}},
                              "fill", {val(n.outputs[0])}, grid1(count, t), {t.workgroup}));
  if (ir::numElements(iter) > 0)
    c.launches.push_back(stridedCopy(iter, inStrides, srcBase, outStrides, dstBase, out.dtype,
                                     n.inputs[0], n.outputs[0], "pad", t));
  return c;
}

}  // namespace

std::vector<EmitterEntry> movementEmitters() {
  return {{"Transpose", transpose}, {"Slice", slice}, {"Concat", concat}, {"Split", split}, {"Pad", pad}};
}

}  // namespace fbl::codegen
