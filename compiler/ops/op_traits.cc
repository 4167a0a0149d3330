#include "compiler/ops/op_traits.h"

#include <algorithm>

namespace fbl::ops {

namespace {

const std::vector<OpTraits>& table() {
  static const std::vector<OpTraits> t = [] {
    std::vector<OpTraits> rows;
    auto add = [&](OpClass c, std::initializer_list<std::string_view> ops) {
      for (std::string_view op : ops) rows.push_back({op, c, false});
    };
    add(OpClass::kFtiC, {"Add", "Sub", "Neg", "Identity", "Cast", "CastLike", "Equal", "Less", "Greater",
                         "LessOrEqual", "GreaterOrEqual", "And", "Or", "Not", "Abs", "Sign", "Ceil", "Floor",
                         "Round", "fbl.AdamW", "fbl.SGD", "Range", "Shape", "ConstantOfShape"});
    add(OpClass::kFtdC, {"Mul", "Div", "Relu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Dropout",
                         "Gelu", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Pow", "Sin", "Cos", "Where", "Max",
                         "Min", "Clip", "SoftmaxCrossEntropyLoss", "fbl.SigmoidGrad",
                         "fbl.TanhGrad", "fbl.GeluGrad", "fbl.ErfGrad", "fbl.SoftmaxGrad",
                         "fbl.SoftmaxCrossEntropyLossGrad", "fbl.Attention", "fbl.AttentionGrad"});
    add(OpClass::kFtiD, {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Slice", "Concat",
                         "Split", "Pad", "Tile", "fbl.SliceGrad"});
    add(OpClass::kFtdD, {"MatMul", "Gemm", "Conv", "BatchNormalization", "LayerNormalization",
                         "ReduceMean", "ReduceSum", "ReduceMax", "fbl.ReduceSumTo", "Gather",
                         "fbl.GatherGrad", "fbl.LayerNormGrad", "fbl.ConvGradInput", "fbl.ConvGradWeight"});
    add(OpClass::kNone, {"ArgMax", "ArgMin", "AveragePool", "Constant", "CumSum", "GatherElements", "GatherND",
                         "GlobalAveragePool", "GlobalMaxPool", "InstanceNormalization", "MaxPool", "Mod",
                         "ReduceL2", "ReduceSumSquare", "Resize", "ScatterElements", "ScatterND", "TopK",
                         "Trilu"});
    for (std::string_view op : {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout"})
      std::find_if(rows.begin(), rows.end(), [&](const OpTraits& r) { return r.op == op; })->view = true;
    std::sort(rows.begin(), rows.end(), [](const OpTraits& a, const OpTraits& b) { return a.op < b.op; });
    return rows;
  }();
  return t;
}

}  // namespace

const char* opClassName(OpClass c) {
  switch (c) {
    case OpClass::kFtiC: return "FTI-C";
    case OpClass::kFtdC: return "FTD-C";
    case OpClass::kFtiD: return "FTI-D";
    case OpClass::kFtdD: return "FTD-D";
    case OpClass::kNone: return "-";
  }
  return "?";
}

const OpTraits* findTraits(std::string_view op) {
  const std::vector<OpTraits>& t = table();
  auto it = std::lower_bound(t.begin(), t.end(), op, [](const OpTraits& r, std::string_view o) { return r.op < o; });
  return it != t.end() && it->op == op ? &*it : nullptr;
}

OpClass opClass(std::string_view op) {
  const OpTraits* t = findTraits(op);
  return t ? t->layoutClass : OpClass::kNone;
}

bool isView(std::string_view op) {
  const OpTraits* t = findTraits(op);
  return t && t->view;
}

bool isProduct(std::string_view op) { return op == "MatMul" || op == "Gemm"; }

std::vector<OpTraits> allTraits() { return table(); }

}  // namespace fbl::ops
