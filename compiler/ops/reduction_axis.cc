// The reduction axis of an op's input: the one op trait the layout passes, the fusion planner
// and base-weight encoding all ask of a consumer.
#include "compiler/ops/reduction_axis.h"

namespace fbl::ops {

namespace {

int64_t norm(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

const ir::Shape& shapeOf(const ir::Graph& g, ir::ValueId v) { return g.values[v].shape; }

std::optional<int64_t> singleReduceAxis(const ir::Graph& g, const ir::Node& n, size_t rank) {
  std::vector<int64_t> axes = n.attrInts("axes");
  if (axes.empty() && n.inputs.size() > 1 && n.inputs[1] != ir::kNoValue && g.values[n.inputs[1]].data)
    axes = g.values[n.inputs[1]].data->toInt64s();
  if (axes.size() != 1) return std::nullopt;
  return norm(axes[0], rank);
}

// fbl.ReduceSumTo sums over the dims its target shape broadcasts; one of the last two of them.
std::optional<int64_t> reduceSumToAxis(const ir::Node& n, const ir::Shape& in) {
  std::vector<int64_t> to = n.attrInts("shape");
  std::optional<int64_t> axis;
  for (size_t k = 0; k < in.size(); ++k) {
    size_t fromEnd = in.size() - k;
    int64_t t = fromEnd <= to.size() ? to[to.size() - fromEnd] : 1;
    if (t == 1 && in[k] > 1 && k + 2 >= in.size()) {
      if (axis) return std::nullopt;
      axis = static_cast<int64_t>(k);
    }
  }
  return axis;
}

}  // namespace

std::optional<int64_t> reductionAxis(const ir::Graph& g, const ir::Node& n, int slot) {
  if (slot >= static_cast<int>(n.inputs.size()) || n.inputs[slot] == ir::kNoValue) return std::nullopt;
  const ir::Shape& s = shapeOf(g, n.inputs[slot]);
  const size_t r = s.size();
  if (r == 0) return std::nullopt;
  const std::string& op = n.op;
  if (op == "MatMul") {
    if (slot == 0) return static_cast<int64_t>(r - 1);
    if (slot == 1 && r >= 2) return static_cast<int64_t>(r - 2);
    return std::nullopt;
  }
  if (op == "Gemm") {
    if (slot == 0) return n.attrInt("transA", 0) ? 0 : 1;
    if (slot == 1) return n.attrInt("transB", 0) ? 1 : 0;
    return std::nullopt;
  }
  if (slot == 0 && (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin"))
    return singleReduceAxis(g, n, r);
  if (slot == 0 && op == "fbl.ReduceSumTo") return reduceSumToAxis(n, s);
  if (slot == 0 && (op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization"))
    return norm(n.attrInt("axis", -1), r);
  if ((slot == 0 || slot == 1) && (op == "fbl.SoftmaxGrad" || op == "fbl.LayerNormGrad"))
    return norm(n.attrInt("axis", -1), r);
  if (slot == 0 && op == "SoftmaxCrossEntropyLoss" && r >= 2) return 1;
  if (slot == 1 && op == "fbl.SoftmaxCrossEntropyLossGrad" && r >= 2) return 1;
  return std::nullopt;
}

}  // namespace fbl::ops
