#include "compiler/analysis/flops.h"

#include "compiler/ops/attention.h"

#include <algorithm>
#include <string_view>

namespace fbl::analysis {

namespace {

int64_t elements(const ir::Graph& g, ir::ValueId v) {
  if (v == ir::kNoValue || !g.values[v].shapeKnown) return 0;
  return ir::numElements(g.values[v].shape);
}

const ir::Shape* shapeOf(const ir::Graph& g, ir::ValueId v) {
  return v == ir::kNoValue || !g.values[v].shapeKnown ? nullptr : &g.values[v].shape;
}

// Ops that only move or reinterpret data.
constexpr std::string_view kMovement[] = {
    "Cast",   "CastLike", "Concat",    "Constant",       "ConstantOfShape", "Dropout", "Expand",
    "Gather", "GatherElements", "GatherND", "Identity", "Pad",     "Range",   "Reshape",
    "Shape",  "Slice",    "Split",     "Squeeze",        "Transpose",       "Trilu",   "Unsqueeze",
    "ScatterND", "ScatterElements", "Flatten", "fbl.SliceGrad"};

// Per-element counts of the composite ops, over their first input (or, for the optimizer, the
// parameter). Softmax: max, subtract, exp, sum, divide. LayerNorm: mean, centre, square, sum,
// rsqrt-scale, scale, shift, plus one for the variance divide. Its gradient recomputes the
// statistics and forms two more reductions. Cross-entropy: a log-softmax and a pick. AdamW:
// two moment updates (3 each), bias corrections, sqrt, divide, decay and step.
struct PerElement {
  std::string_view op;
  int64_t flops;
};
constexpr PerElement kPerElement[] = {
    {"Softmax", 5},       {"LogSoftmax", 6},      {"fbl.SoftmaxGrad", 3},
    {"LayerNormalization", 8}, {"fbl.LayerNormGrad", 12},
    {"SoftmaxCrossEntropyLoss", 7}, {"fbl.SoftmaxCrossEntropyLossGrad", 6},
    {"fbl.AdamW", 14},    {"fbl.SGD", 4},
    {"ReduceSum", 1},     {"ReduceMean", 1},      {"ReduceMax", 1},
    {"fbl.ReduceSumTo", 1}, {"CumSum", 1},        {"fbl.GatherGrad", 1}};

// 2 * |out| * |W| / W[0]: W is the filter-shaped tensor.
int64_t convFlops(const ir::Graph& g, ir::ValueId out, ir::ValueId w) {
  const ir::Shape* ws = shapeOf(g, w);
  if (!ws || ws->empty() || (*ws)[0] == 0) return 0;
  return 2 * elements(g, out) * (ir::numElements(*ws) / (*ws)[0]);
}

// The flash pair counts only the (query, key) pairs the index masks leave visible, as its
// kernels skip the rest: forward q.k, the softmax (5) and p v; backward q.k again, dO.v, the
// softmax gradient (6), dv, dq and dk.
int64_t attentionFlops(const ir::Graph& g, const ir::Node& n) {
  const size_t q = n.op == "fbl.AttentionGrad" ? 1 : 0;
  const ir::Shape *qs = shapeOf(g, n.input(q)), *ks = shapeOf(g, n.input(q + 1)), *vs = shapeOf(g, n.input(q + 2));
  if (!qs || !ks || !vs) return 0;
  auto d = ops::attentionDims(n, *qs, *ks, *vs);
  if (!d.ok()) return 0;
  int64_t pairs = 0;
  for (int64_t i = 0; i < d->qLen; ++i) {
    const int64_t lo = d->window > 0 ? std::max<int64_t>(0, i - d->window + 1) : 0;
    const int64_t hi = d->causal ? std::min(d->kvLen, i + 1) : d->kvLen;
    pairs += std::max<int64_t>(0, hi - lo);
  }
  pairs *= d->batch * d->heads;
  if (q == 0) return pairs * (2 * d->headDim + 2 * d->valueDim + 5);
  return pairs * (6 * d->headDim + 4 * d->valueDim + 6);
}

}  // namespace

int64_t nodeFlops(const ir::Graph& g, const ir::Node& n) {
  const ir::ValueId out = n.outputs.empty() ? ir::kNoValue : n.outputs[0];
  if (n.op == "MatMul" || n.op == "Gemm") {
    const ir::Shape* a = shapeOf(g, n.input(0));
    if (!a || a->empty()) return 0;
    int64_t k = a->back();
    if (n.op == "Gemm" && n.attrInt("transA", 0) && a->size() == 2) k = a->front();
    int64_t f = 2 * elements(g, out) * k;
    if (n.op == "Gemm" && n.input(2) != ir::kNoValue) f += elements(g, out);
    return f;
  }
  if (n.op == "fbl.Attention" || n.op == "fbl.AttentionGrad") return attentionFlops(g, n);
  if (n.op == "Conv") return convFlops(g, out, n.input(1));
  if (n.op == "fbl.ConvGradInput") return convFlops(g, n.input(0), n.input(1));
  if (n.op == "fbl.ConvGradWeight") return convFlops(g, n.input(0), out);
  for (std::string_view m : kMovement)
    if (n.op == m) return 0;
  for (const PerElement& p : kPerElement)
    if (n.op == p.op) return p.flops * elements(g, n.input(0));
  int64_t f = 0;
  for (ir::ValueId o : n.outputs) f += elements(g, o);
  return f;
}

}  // namespace fbl::analysis
