// Layout-aware emission, in three cases:
//  1. trivial layouts: exactly emitNode(g, n, target) (every MatMul already takes the tiled,
//     layout-parameterised template);
//  2. the elementwise family: each operand's offset is its layout composed with the broadcast
//     view from the output index (index_code.h, emitLayoutOffsets), the output written through
//     its layout, `sign` applied on load; MatMul / Gemm: emitTiledMatmul with the
//     operands' layouts and transposed reads;
//  3. emitLayoutCopy: elementwise.cl as an N-D copy, source and destination both through their
//     layouts (affine ones as strides with merged dims, others composed and simplified).
#include "compiler/codegen/operand_layout.h"

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/fused_elementwise.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/rtile_kernels.h"
#include "compiler/codegen/templates.h"

namespace fbl::codegen {

bool NodeLayouts::trivial() const {
  for (const auto& i : inputs)
    if (i) return false;
  for (const auto& o : outputs)
    if (o) return false;
  return epilogue.empty() && inlined.empty() && !lowRank;
}

bool supportsOperandLayouts(const ir::Graph& g, const ir::Node& n) {
  return isElementwiseOp(n.op) || isOptimizerOp(n.op) || n.op == "Gather" || isAttentionOp(n.op) ||
         ((n.op == "MatMul" || n.op == "Gemm") && usesTiledMatmul(g, n));
}

bool writesImageTexels(const ir::Graph& g, const ir::Node& n) {
  return (n.op == "MatMul" || n.op == "Gemm") && usesTiledMatmul(g, n);
}

bool readsImageTexels(const ir::Graph& g, const ir::Node& n, int slot, const layout::Layout& read) {
  // A gather fetches one element's texel and picks its lane: any image layout of float data.
  if (n.op == "Gather") return slot == 0 && g.values[n.inputs[0]].dtype == ir::DType::F32;
  if (!writesImageTexels(g, n) || slot > 1 || read.shape().size() < 2) return false;
  if (texelsContiguous(read)) return true;
  auto flipped = read.transposeLastTwo();
  return flipped.ok() && texelsContiguous(*flipped);
}

bool readsEncoded(const ir::Graph& g, const ir::Node& n, int slot) {
  if (n.op == "Gather") return slot == 0;
  return (n.op == "MatMul" || n.op == "Gemm") && usesTiledMatmul(g, n) && slot >= 0 && slot < 2;
}

Result<NodeCode> emitNode(const ir::Graph& g, const ir::Node& n, const Target& target, const NodeLayouts& layouts) {
  if (layouts.trivial()) return emitNode(g, n, target);
  for (size_t slot = 0; slot < layouts.inputs.size(); ++slot)
    if (layouts.inputs[slot] && !layouts.inputs[slot]->layout.encoding().plain() &&
        !readsEncoded(g, n, static_cast<int>(slot)))
      return makeError("{}: input {} is stored {}, which only products and gathers read", ir::describeNode(g, n), slot,
                       layouts.inputs[slot]->layout.encoding().str());
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
  if (isOptimizerOp(n.op)) return emitOptimizer(g, n, target, &layouts);
  if (n.op == "Gather") return emitGather(g, n, target, &layouts);
  if (isAttentionOp(n.op)) return emitAttention(g, n, target, &layouts);
  if ((n.op == "MatMul" || n.op == "Gemm") && usesTiledMatmul(g, n)) {
    for (const auto& i : layouts.inputs)
      if (i && i->sign) return makeError("{}: a matmul operand cannot carry a sign", ir::describeNode(g, n));
    return emitTiledMatmul(g, n, target, &layouts);
  }
  return makeError("{}: op '{}' does not read operands through layouts (materialise them row-major first)",
                   ir::describeNode(g, n), n.op);
}

namespace {

// dst = from (sign applied), elementwise.cl as an N-D copy over dst's shape; `what` names the
// value in errors. Args: source, destination.
Result<LaunchSpec> layoutCopy(const std::string& what, const layout::Layout& from, const std::optional<layout::Expr>& sign,
                              ir::DType dtype, const layout::Layout& dst, const Target& target) {
  const std::string_view t = clType(dtype);
  const ir::Shape& shape = dst.shape();
  if (t.empty()) return makeError("layout copy of {}: dtype {} has no kernel type", what, ir::dtypeName(dtype));
  if (from.shape() != shape)
    return makeError("layout copy of {}: source {} and destination {} differ in shape", what,
                     ir::shapeToString(from.shape()), ir::shapeToString(shape));
  if (dst.storage() != layout::Storage::Buffer || from.storage() != layout::Storage::Buffer)
    return makeError("layout copy of {}: source and destination must be buffers", what);
  std::vector<LayoutOperand> ops{{"o0", from, sign}};
  std::string outAt = "i";
  if (!(dst == layout::Layout::rowMajor(shape))) {
    ops.push_back({"o_out", dst, std::nullopt});
    outAt = "o_out";
  }
  auto index = emitLayoutOffsets(shape, "i", ops);
  if (!index.ok()) return makeError("layout copy of {}: {}", what, index.error().message);
  return elementwiseLaunch({fmt::format("__global const {0}* in0, __global {0}* out", t), *index, "",
                            sign ? "o0_pos ? in0[o0] : -in0[o0]" : "in0[o0]", outAt, std::string(t),
                            ir::numElements(shape)},
                           "layoutcopy", {}, target);
}

}  // namespace

Result<NodeCode> emitLayoutCopy(const ir::Graph& g, const OperandLayout& src, ir::DType dtype,
                                const layout::Layout& dst, const Target& target) {
  const std::string& what = g.values[src.value].name;
  if (!src.layout.encoding().plain() || !dst.encoding().plain())
    return makeError("copy of {}: it is stored {}, which only products and gathers read", what,
                     src.layout.encoding().plain() ? dst.encoding().str() : src.layout.encoding().str());
  layout::Layout from = src.layout;
  if (src.transposed) {
    if (from.shape().size() < 2) return makeError("layout copy of {}: a transposed read needs a matrix", what);
    FBL_ASSIGN(from, from.transposeLastTwo());
  }
  FBL_ASSIGN(LaunchSpec copy, layoutCopy(what, from, src.sign, dtype, dst, target));
  copy.args = {val(src.value), scratch(0)};
  NodeCode code;
  // A padded destination (R-Tile) needs its whole buffer; the padding stays unwritten.
  const ir::Shape& shape = dst.shape();
  code.scratch.push_back({dtype, dst.bufferSize() == ir::numElements(shape) ? shape : ir::Shape{dst.bufferSize()}});
  code.launches.push_back(std::move(copy));
  return code;
}

Result<LaunchSpec> emitTransfer(const std::string& tensor, const layout::Layout& stored, ir::DType dtype, bool unpack,
                                int64_t chunkRows, const Target& target) {
  if (!stored.encoding().plain())
    return makeError("transfer of {}: an encoded tensor ({}) is written as it is, not packed", tensor, stored.encoding().str());
  const ir::Shape& shape = stored.shape();
  // A matrix of the last dimension's columns: the other dimensions fold into its rows.
  const int64_t cols = shape.empty() ? 1 : shape.back(), rows = ir::numElements(shape) / std::max<int64_t>(1, cols);
  if (chunkRows < 1 || chunkRows > std::max<int64_t>(1, rows))
    return makeError("transfer of {}: {} rows per chunk for {} rows", tensor, chunkRows, rows);
  const std::vector<ArgRef> args = {val(0), val(1), val(2)};
  const std::string_view tag = unpack ? "unpack" : "pack";
  if (stored.storage() == layout::Storage::Buffer) {
    // Element i of the chunk is element j = first_row * cols + i of the tensor: row-major in the
    // staging buffer, through the layout in the tensor.
    const std::string_view t = clType(dtype);
    if (t.empty()) return makeError("transfer of {}: dtype {} has no kernel type", tensor, ir::dtypeName(dtype));
    FBL_ASSIGN(std::string offsets,
               emitLayoutOffsets(shape, "j", {{unpack ? "o0" : "o_out", stored, std::nullopt}}));
    const int64_t total = ir::numElements(shape), chunk = chunkRows * cols;
    const std::string index = fmt::format("  const uint j = (uint)first_row[0] * {}u + i;\n  if (j >= {}u) return;\n{}",
                                          cols, total, offsets);
    LaunchSpec l = launch("elementwise",
                          {{"PARAMS", fmt::format("__global const {0}* in0, __global {0}* out, __global const long* first_row", t)},
                           {"N", std::to_string(chunk)}, {"INDEX", index}, {"BODY", ""},
                           {"STORE", unpack ? "out[i] = in0[o0]" : "out[o_out] = in0[i]"}},
                          tag, args, grid1(chunk, target), {target.workgroup});
    return l;
  }
  if (dtype != ir::DType::F32 || shape.empty())
    return makeError("transfer of {}: images hold float tensors of rank 1 or more", tensor);
  // The transfer template works on matrices: batch dims fold into rows.
  FBL_ASSIGN(layout::Layout image, stored.reshape({rows, cols}));
  auto kernel = emitRTileTransfer("{{NAME}}", image, unpack, chunkRows, target.tuning.convertWorkgroup);
  if (!kernel.ok()) return makeError("transfer of {}: {}", tensor, kernel.error().message);
  LaunchSpec l{kernel->source, "", std::string(tag), args, {}, {}, {}};
  for (size_t x : kernel->global) l.global.push_back(static_cast<int64_t>(x));
  for (size_t x : kernel->local) l.local.push_back(static_cast<int64_t>(x));
  return l;
}

}  // namespace fbl::codegen
