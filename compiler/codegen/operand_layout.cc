// Layout-aware emission, in three cases:
//  1. trivial layouts: exactly emitNode(g, n, target) (every MatMul already takes the tiled,
//     layout-parameterised template);
//  2. the elementwise family: each operand's offset is its layout composed with the broadcast
//     view from the output index (index_code.h, emitLayoutOffsets), the output written through
//     its layout, `sign` applied on load; MatMul / Gemm without bias: emitTiledMatmul with the
//     operands' layouts and transposed reads;
//  3. emitLayoutCopy: elementwise.cl as an N-D copy, source and destination both through their
//     layouts (affine ones as strides with merged dims, others composed and simplified).
#include "compiler/codegen/operand_layout.h"

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/fused_elementwise.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/templates.h"

namespace fbl::codegen {

bool NodeLayouts::trivial() const {
  for (const auto& i : inputs)
    if (i) return false;
  for (const auto& o : outputs)
    if (o) return false;
  return epilogue.empty() && inlined.empty();
}

bool supportsOperandLayouts(const ir::Graph& g, const ir::Node& n) {
  return isElementwiseOp(n.op) || ((n.op == "MatMul" || n.op == "Gemm") && usesTiledMatmul(g, n));
}

Result<NodeCode> emitNode(const ir::Graph& g, const ir::Node& n, const Target& target, const NodeLayouts& layouts) {
  if (layouts.trivial()) return emitNode(g, n, target);
  if (!layouts.epilogue.empty() && !((n.op == "MatMul" || n.op == "Gemm") && usesTiledMatmul(g, n)))
    return makeError("{}: only the tiled MatMul runs fused elementwise steps", ir::describeNode(g, n));
  if (!layouts.inlined.empty()) {
    if (isReduceOp(n.op)) {
      for (const auto& i : layouts.inputs)
        if (i) return makeError("{}: a reduction reads its operands row-major", ir::describeNode(g, n));
      return emitReduce(g, n, target, &layouts.inlined);
    }
    if (!isElementwiseOp(n.op))
      return makeError("{}: only elementwise ops and reductions compute fused producers", ir::describeNode(g, n));
    return emitElementwiseGroup(g, n, target, layouts);
  }
  if (isElementwiseOp(n.op)) return emitElementwiseNode(g, n, target, &layouts);
  if ((n.op == "MatMul" || n.op == "Gemm") && usesTiledMatmul(g, n)) {
    for (const auto& i : layouts.inputs)
      if (i && i->sign) return makeError("{}: a matmul operand cannot carry a sign", ir::describeNode(g, n));
    return emitTiledMatmul(g, n, target, &layouts);
  }
  return makeError("{}: op '{}'{} does not read operands through layouts (materialise them row-major first)",
                   ir::describeNode(g, n), n.op,
                   n.op == "MatMul" || n.op == "Gemm" ? " with a bias, alpha != 1 or integer operands" : "");
}

Result<NodeCode> emitLayoutCopy(const ir::Graph& g, const OperandLayout& src, ir::DType dtype,
                                const layout::Layout& dst, const Target& target) {
  const std::string_view t = clType(dtype);
  const ir::Shape& shape = dst.shape();
  if (t.empty()) return makeError("layout copy of {}: dtype {} has no kernel type", g.values[src.value].name,
                                  ir::dtypeName(dtype));
  layout::Layout from = src.layout;
  if (src.transposed) {
    if (from.shape().size() < 2)
      return makeError("layout copy of {}: a transposed read needs a matrix", g.values[src.value].name);
    FBL_ASSIGN(from, from.transposeLastTwo());
  }
  if (from.shape() != shape)
    return makeError("layout copy of {}: source {} and destination {} differ in shape", g.values[src.value].name,
                     ir::shapeToString(from.shape()), ir::shapeToString(shape));
  if (dst.storage() != layout::Storage::Buffer)
    return makeError("layout copy of {}: the destination must be a buffer", g.values[src.value].name);
  std::vector<LayoutOperand> ops{{"o0", from, src.sign}};
  std::string outAt = "i";
  if (!(dst == layout::Layout::rowMajor(shape))) {
    ops.push_back({"o_out", dst, std::nullopt});
    outAt = "o_out";
  }
  auto index = emitLayoutOffsets(shape, "i", ops);
  if (!index.ok()) return makeError("layout copy of {}: {}", g.values[src.value].name, index.error().message);
  const std::string body = src.sign ? fmt::format("  out[{}] = o0_pos ? in0[o0] : -in0[o0];", outAt)
                                    : fmt::format("  out[{}] = in0[o0];", outAt);
  const int64_t count = ir::numElements(shape);
  NodeCode code;
  // A padded destination (R-Tile) needs its whole buffer; the padding stays unwritten.
  code.scratch.push_back({dtype, dst.bufferSize() == count ? shape : ir::Shape{dst.bufferSize()}});
  code.launches.push_back(
      {instantiate(kernelTemplate("elementwise"),
                   {{"PARAMS", fmt::format("__global const {0}* in0, __global {0}* out", t)},
                    {"N", std::to_string(count)}, {"INDEX", *index}, {"BODY", body}}),
       "", "layoutcopy", {val(src.value), scratch(0)}, grid1(count, target), {target.workgroup}});
  return code;
}

}  // namespace fbl::codegen
