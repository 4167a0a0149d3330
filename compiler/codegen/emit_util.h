// Helpers shared by the per-family kernel emitters, and the table of emitters for ops with their
// own template (movement_emitters.cc, compute_emitters.cc, training_emitters.cc,
// index_emitters.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/ops/attention.h"

namespace fbl::codegen {

using EmitFn = Result<NodeCode> (*)(const ir::Graph&, const ir::Node&, const Target&);
using EmitterEntry = std::pair<std::string_view, EmitFn>;
std::vector<EmitterEntry> movementEmitters();
std::vector<EmitterEntry> computeEmitters();
std::vector<EmitterEntry> trainingEmitters();
std::vector<EmitterEntry> indexEmitters();  // index_emitters.cc: CumSum, GatherND, ScatterND
// nullptr when the op has no dedicated emitter.
EmitFn findSpecialEmitter(std::string_view op);

// The value's compile-time contents: a Constant, or an integer initializer (axes, pads).
const ir::Tensor* constData(const ir::Graph& g, ir::ValueId v);
// A one-element Constant's value.
std::optional<double> constScalar(const ir::Graph& g, ir::ValueId v);
// A one-element Constant as an OpenCL literal of its own type.
std::optional<std::string> scalarLiteral(const ir::Value& v);
// Integers of a Constant input (Slice starts, Pad pads, Reduce axes); nullopt if not constant.
std::optional<std::vector<int64_t>> constInts(const ir::Graph& g, ir::ValueId v);

// Global size of a 1-D launch of `count` items, rounded up to the work-group size.
std::vector<int64_t> grid1(int64_t count, const Target& t);
// Global size of a 1-D launch of `count` items, `per` of them a work-item: ceil(count / per)
// rounded up to the work-group size.
std::vector<int64_t> gridItems(int64_t count, int64_t per, const Target& t);
// One elementwise kernel over `count` output elements, written to `out`: `index` computes the
// offsets from the output index `i`, `body` declares the operands and temporaries (each line
// ending in a newline), `value` is the element's value of type `outT` and `outAt` its offset.
// `stored`: the output's dtype when it is a 16-bit float (`value` is then a float).
struct ElementwiseKernel {
  std::string params, index, body, value, outAt, outT;
  int64_t count = 0;
  ir::DType stored = ir::DType::F32;
};
// Its launch: elementwise.cl, one element a work-item, or, where the profile's
// kernels.elementwise_items is above 1, elementwise_items.cl with that many a work-item.
LaunchSpec elementwiseLaunch(const ElementwiseKernel& k, std::string_view tag, std::vector<ArgRef> args,
                             const Target& t);
// A kernel reads a 16-bit float (ir::isFloat16) into a float and rounds a float into one, to
// nearest even. OpenCL 1.2 does both without cl_khr_fp16: vload_half / vstore_half_rte on `half`
// pointers, and bit operations on the `ushort` that holds a bf16.
// The pointee type of a buffer parameter of dtype `t`: "half", "ushort", or clType(t).
std::string_view bufferClType(ir::DType t);
// The float (or `t`) value of element `at` of buffer `ptr`.
std::string loadElement(ir::DType t, std::string_view ptr, std::string_view at);
// A statement (no trailing ';') storing `value` at element `at` of buffer `ptr`.
std::string storeElement(ir::DType t, std::string_view ptr, std::string_view at, std::string_view value);
// "MatMul" -> "matmul", "fbl.SoftmaxGrad" -> "softmaxgrad".
std::string lowerTag(std::string_view op);
// Axis in [0, rank) from a possibly negative attribute.
int64_t normAxis(int64_t axis, size_t rank);
// The (source, entry, tag) of a template instantiation, as a launch without arguments.
LaunchSpec launch(std::string_view tmpl, const std::map<std::string, std::string>& vars,
                  std::string_view tag, std::vector<ArgRef> args, std::vector<int64_t> global,
                  std::vector<int64_t> local, std::string_view entry = "");
// Float MatMul / Gemm (alpha and a bias of rank <= 2 applied in the product's store, before any
// fused step): the tiled rtile_matmul.cl, operands read through `layouts` (nullptr: row-major);
// compute_emitters.cc.
struct NodeLayouts;
bool usesTiledMatmul(const ir::Graph& g, const ir::Node& n);
Result<NodeCode> emitTiledMatmul(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts);
// Reduce{Sum,Mean,Max,Min,Prod,SumSquare} and fbl.ReduceSumTo (reduce.cl); `inlined` (may be
// null): fused producers of input 0, computed per reduced element (compiler/plan/fusion.h).
struct FusedOp;
bool isReduceOp(std::string_view op);
Result<NodeCode> emitReduce(const ir::Graph& g, const ir::Node& n, const Target& t, const std::vector<FusedOp>* inlined);
// The kept and reduced dims of input 0 (sizes and element strides) and the accumulation.
struct ReduceSpec {
  ir::Shape kept, red;
  std::vector<int64_t> keptStr, redStr;
  // combine folds an element x into acc; merge folds another work-item's partial x (reduce.cl).
  std::string init = "0.0f", combine = "acc + x", merge = "acc + x", finish = "acc", accT = "float", tag = "reduce";
};
// Work-items per output of a reduction over `reduced` elements (reduce.cl's WG): a power of two
// with about 8 elements each, at most the profile's kernels.reduce_max_workgroup; 1 below 16
// elements and where that is 1 (CPUs).
int64_t reduceGroupSize(int64_t reduced, const Target& t);
// kernels_cl/row_tree.cl: rowSum/rowMax, the row templates' {{ROW_TREE}} hole.
std::string rowTree();
// The global size of a row kernel: rows x wg work-items in groups of wg, or, with wg = 1, one
// work-item per row in groups of the target's size (local size: wg > 1 ? wg : t.workgroup).
std::vector<int64_t> rowGrid(int64_t rows, int64_t wg, const Target& t);
// LayerNormalization and fbl.LayerNormGrad read scale and bias at the flat normalized index (and
// write dScale/dBias at that extent): one that only broadcasts to the normalized shape is an error.
Status expectWholeNormalizedShape(const ir::Graph& g, const ir::Node& n, int64_t normalized);
Result<NodeCode> emitReduceKernel(const ir::Graph& g, const ir::Node& n, const Target& t, const ReduceSpec& r,
                                  const std::vector<FusedOp>* inlined);
Result<NodeCode> emitReduceSumTo(const ir::Graph& g, const ir::Node& n, const Target& t,
                                 const std::vector<FusedOp>* inlined);  // training_emitters.cc
// The elementwise family (kernel_emitter.cc): kEwRules, Gelu, Sum, Mean; operands and output
// through `layouts` (nullptr: row-major).
bool isElementwiseOp(std::string_view op);
// The one-line body of an elementwise node over its operands a, b, c; nullopt when the op is not
// one (variadic Max/Min/Sum/Mean: the two-operand form).
std::optional<std::string> elementwiseExpr(const ir::Graph& g, const ir::Node& n);
Result<NodeCode> emitElementwiseNode(const ir::Graph& g, const ir::Node& n, const Target& t,
                                     const NodeLayouts* layouts);

// Gather with its data and indices read through `layouts` (gather_layout.cl; the data may be an
// image); compute_emitters.cc.
Result<NodeCode> emitGather(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts);

// fbl.AdamW / fbl.SGD (optimizer.cl): one work-item per parameter element; every operand and
// output through `layouts` (nullptr: row-major), each output written where the input it updates
// lies (training_emitters.cc).
bool isOptimizerOp(std::string_view op);
// The inputs an optimizer op updates, in the order of its outputs: the parameter (input 0), then
// its state (AdamW: p, g, m, v, step -> p, m, v; SGD: p, g[, buf] -> p[, buf]).
std::vector<int> optimizerUpdatedInputs(std::string_view op);
Result<NodeCode> emitOptimizer(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts);

// SoftmaxCrossEntropyLoss (and its gradient) over `scores` [N, C, d...] with `labels`: the rows,
// the work-group per row (a power of two: 256 on GPUs, else at most the target's) and the template
// variables of sce_loss.cl they share (PARAMS and LOGPROB for a loss without log_prob); an
// error for reduction 'none'.
struct SceLossShape {
  int64_t rows = 0, wg = 1;
  std::map<std::string, std::string> vars;
};
Result<SceLossShape> sceLossShape(const ir::Graph& g, const ir::Node& n, ir::ValueId scores, ir::ValueId labels,
                                  const Target& t);

// fbl.Attention / fbl.AttentionGrad as the flash kernel pair (attention_emitters.cc). Every
// operand and output is read or written through `layouts` (nullptr: row-major), buffers only.
// The block tiling of kernels_cl/flash_attention*.cl: TILE x TILE blocks, WG work-items, SX of
// them across a score block's columns and EX across an accumulator's head dims, the head dims
// through local memory in `chunks` parts; splitGroups (backward): each query head of a GQA group
// gets its own dk/dv work-groups, summed afterwards.
struct AttentionTiling {
  int64_t tile = 16, workItems = 64, scoreCols = 8, accumulatorDims = 16, chunks = 1;
  bool splitGroups = false;
  // Work-groups that share one block's streamed range (keys, or dk/dv's heads x queries), each
  // writing partials that a combining kernel sums; 1: one work-group a block.
  int64_t splits = 1;
};
AttentionTiling attentionTiling(const ops::AttentionDims& d, const Target& t);
AttentionTiling attentionGradTiling(const ops::AttentionDims& d, const Target& t);  // _rowterm, _dkdv
AttentionTiling attentionDqTiling(const ops::AttentionDims& d, const Target& t);    // _dq
bool isAttentionOp(std::string_view op);
Result<NodeCode> emitAttention(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts);
Result<NodeCode> emitAttentionNode(const ir::Graph& g, const ir::Node& n, const Target& t);

inline ArgRef val(ir::ValueId v) { return {false, v}; }
inline ArgRef scratch(int32_t i) { return {true, i}; }

}  // namespace fbl::codegen
