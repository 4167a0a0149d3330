// Operand layouts: how a kernel reads an input or writes an output that is not simply the
// row-major buffer of the node's own value. The plan builder's layout lowering
// (compiler/plan/layout_lowering.h) fills them from the LayoutAssignment:
//
//   - a read through an eliminated chain of movement ops (the paper's tile-index
//     transformation): the kernel argument is the chain's *source* value, and `layout` maps the
//     node's operand index (its logical shape as the node sees it) to an element offset in the
//     source's storage: storage(source).compose(chain view), simplified;
//   - a value stored as an R-Tile (tile-major in the arena buffer): `layout` is that R-Tile;
//   - reuse's transposed MatMul read: `transposed` says the operand is the transpose (last two
//     dims) of `layout`, which the tiled MatMul template reads through its transposed path.
//
// Only kernels that take layouts accept non-trivial ones (supportsOperandLayouts); for every
// other node the lowering materialises a row-major copy first (emitLayoutCopy).
#pragma once

#include <optional>
#include <vector>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/layout/index_expr.h"
#include "compiler/layout/layout.h"

namespace fbl::codegen {

struct OperandLayout {
  ir::ValueId value = ir::kNoValue;  // the value bound to the kernel argument
  layout::Layout layout = layout::Layout::rowMajor({});  // operand index -> offset in value's buffer (Storage::Buffer)
  bool transposed = false;           // operand = transpose of the last two dims of `layout`'s shape
  std::optional<layout::Expr> sign;  // elementwise +-1 factor over the operand index (RoPE's roll)
};

// A float elementwise node computed inside another node's kernel (compiler/plan/fusion.h,
// codegen/fused_elementwise.h). Inputs that are earlier fused results are registers: the slot
// `chained` takes the previous result (a MatMul epilogue's running value), and any input that is
// the output of an earlier op of the same group; the other slots are read as `inputs` says
// (nullopt: the slot's value, row-major), broadcast against the kernel's output.
struct FusedOp {
  ir::NodeId node = ir::kNoNode;
  int chained = -1;
  std::vector<std::optional<OperandLayout>> inputs;  // by input slot
  // An epilogue's Add of the product's low-rank term (NodeLayouts::lowRank): the kernel already
  // added the other operand into its accumulator, so the step passes its chained value through.
  bool addsLowRank = false;
};

// A narrow-K product P = L2 R2 (LoRA's t B and dt A, K = the rank) whose value, times `scales`
// (Mul steps by one-element constants), the host product's first epilogue step adds: the host
// kernel accumulates it itself after its own K walk (compiler/plan/fusion.h, "low rank"), so P
// needs no launch and its M x N output is never stored.
struct LowRankTerm {
  ir::NodeId product = ir::kNoNode;
  std::vector<ir::NodeId> scales;  // P's Mul steps, in order
  std::vector<std::optional<OperandLayout>> inputs;  // P's operand layouts (fusion copies them after storage)
};

struct NodeLayouts {
  std::vector<std::optional<OperandLayout>> inputs;     // by input slot; nullopt: plain row-major
  std::vector<std::optional<layout::Layout>> outputs;   // by output; nullopt: plain row-major
  // MatMul only: fused elementwise steps in order, and the value the kernel then writes (through
  // outputs[0]) instead of its own output; kNoValue: its own output.
  std::vector<FusedOp> epilogue;
  ir::ValueId epilogueOutput = ir::kNoValue;
  std::optional<LowRankTerm> lowRank;  // MatMul only: added before the epilogue
  // Elementwise and Reduce* only: producers computed in registers before the node itself (a
  // reduction: per reduced element, the producers of input 0), in order.
  std::vector<FusedOp> inlined;
  bool trivial() const;  // every entry nullopt, nothing fused
};

// The ops whose emitters honour NodeLayouts: the elementwise family (incl. Expand, Where, Cast),
// the optimizer updates (fbl.AdamW, fbl.SGD: trainables and state updated in their layout),
// Gather (its data, e.g. a tied embedding, and its indices through layouts), fbl.Attention and
// fbl.AttentionGrad (every operand and output, buffers only) and
// float MatMul / Gemm (the tiled template, Gemm's alpha and bias in its store; integer products
// keep the row-major naive kernel). `sign` is honoured by elementwise ops only; an epilogue by the tiled
// MatMul only; inlined producers by float elementwise ops and reductions only.
bool supportsOperandLayouts(const ir::Graph& g, const ir::Node& n);

// Image storage (plan/layout_lowering.h, step 4). An OpenCL image is written a whole texel at a
// time: only kernels that store 4 consecutive columns per texel write image outputs (the tiled
// MatMul and its split-K sum). A read fetches whole texels only where the operand's 4
// consecutive columns share one texel, directly or read transposed (the tiled MatMul's operands);
// a gather reads any image of float data, one element's lane at a time.
bool writesImageTexels(const ir::Graph& g, const ir::Node& n);
bool readsImageTexels(const ir::Graph& g, const ir::Node& n, int slot, const layout::Layout& read);
// Encoded buffers (a frozen weight stored narrower, layout::Encoding): the tiled and narrow
// products dequantize either operand, a gather its table; no other kernel reads one.
bool readsEncoded(const ir::Graph& g, const ir::Node& n, int slot);

// emitNode with layouts; an error naming the node if it does not support them
// (supportsOperandLayouts) and `layouts` is not trivial.
Result<NodeCode> emitNode(const ir::Graph& g, const ir::Node& n, const Target& target,
                          const NodeLayouts& layouts);

// One kernel copying `src` (any layout, sign honoured) into a buffer written through `dst`
// (usually row-major) of the same logical shape. Args: src.value, then scratch(0) (the
// destination, ScratchSpec{dtype, dst.shape()}).
Result<NodeCode> emitLayoutCopy(const ir::Graph& g, const OperandLayout& src, ir::DType dtype,
                                const layout::Layout& dst, const Target& target);

// The runtime's transfer of a tensor stored as `stored` (plan Tensor::pack / unpack), `chunkRows`
// rows at a time (the tensor a matrix of its last dimension's columns, the others folded into
// rows, as planfile::transferRows counts them): pack copies a chunk's row-major bytes from a staging buffer into
// the layout, unpack copies them back out. Args: val(0) is the staging buffer, val(1) the tensor
// (pack) or the other way round (unpack), val(2) an i64 holding the chunk's first row, which the
// runtime writes before each launch; the plan builder binds them. Images are written whole texels
// at a time (rtile_transfer.cl).
Result<LaunchSpec> emitTransfer(const std::string& tensor, const layout::Layout& stored, ir::DType dtype,
                                bool unpack, int64_t chunkRows, const Target& target);

}  // namespace fbl::codegen
