// Kernel selection, one rule per op family:
//  1. views (Reshape, Squeeze, Unsqueeze, Flatten, Identity, Dropout) alias their input;
//  2. elementwise ops (and Expand) fill elementwise.cl with a one-line body from a table,
//     broadcast operands read through stride-0 offsets and scalar constants inlined; with
//     operand layouts (operand_layout.h) each offset comes from its layout instead;
//  3. movement ops (Transpose, Slice, Concat, Pad, Split) are strided copies (strided_copy.cl);
//  4. everything else has its own template (matmul, reduce, softmax, layernorm, gather, loss,
//     conv2d, cumsum, gather_nd, scatter_nd) or comes from fbl's training ops
//     (training_emitters.cc).
#include "compiler/codegen/kernel_emitter.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/operand_layout.h"
#include "compiler/codegen/templates.h"
#include "compiler/ops/op_traits.h"

namespace fbl::codegen {

using ir::DType;
using ir::Shape;

std::string_view clType(DType t) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::I64: return "long";
    case DType::I32: return "int";
    case DType::I8: return "char";
    case DType::U8:
    case DType::Bool: return "uchar";
    default: return "";
  }
}

namespace {

// Elementwise bodies over operands a, b, c (already loaded); `T` is the output's C type.
struct EwRule {
  std::string_view op;
  std::string_view expr;
};
const EwRule kEwRules[] = {
    {"Add", "a + b"},
    {"Sub", "a - b"},
    {"Mul", "a * b"},
    {"Div", "a / b"},
    {"Pow", "pow(a, b)"},
    {"Sqrt", "sqrt(a)"},
    {"Reciprocal", "1.0f / a"},
    {"Neg", "-a"},
    {"Abs", "fabs(a)"},
    {"Sign", "sign(a)"},
    {"Ceil", "ceil(a)"},
    {"Floor", "floor(a)"},
    {"Round", "rint(a)"},
    {"Exp", "exp(a)"},
    {"Log", "log(a)"},
    {"Tanh", "tanh(a)"},
    {"Cos", "cos(a)"},
    {"Sin", "sin(a)"},
    {"Erf", "erf(a)"},
    {"Relu", "fmax(a, 0.0f)"},
    {"Sigmoid", "1.0f / (1.0f + exp(-a))"},
    {"Where", "a ? b : c"},
    {"Equal", "a == b"},
    {"Less", "a < b"},
    {"LessOrEqual", "a <= b"},
    {"Greater", "a > b"},
    {"GreaterOrEqual", "a >= b"},
    {"And", "a && b"},
    {"Or", "a || b"},
    {"Xor", "(a != 0) != (b != 0)"},
    {"Not", "!a"},
    {"Max", "max(a, b)"},
    {"Min", "min(a, b)"},
    {"Cast", "a"},
    {"CastLike", "a"},
    {"Expand", "a"},
};

std::string gelu(const ir::Node& n) {
  if (n.attrString("approximate", "none") == "tanh")
    return "0.5f * a * (1.0f + tanh(0.7978845608028654f * (a + 0.044715f * a * a * a)))";
  return "0.5f * a * (1.0f + erf(a * 0.7071067811865476f))";
}

// The autodiff's pointwise gradients fbl.XGrad(dy, s) (compiler/autodiff/grad_rules_nn.cc), with
// a = dy and b = s (the saved output or input): plain elementwise ops, so fusion puts a chain of
// them (Gemma2's logit softcap: Mul, TanhGrad, Div over the [tokens x vocabulary] logits) in one
// kernel.
std::optional<std::string> pointwiseGradExpr(const ir::Node& n) {
  if (n.op == "fbl.SigmoidGrad") return "a * b * (1.0f - b)";
  if (n.op == "fbl.TanhGrad") return "a * (1.0f - b * b)";
  if (n.op == "fbl.ErfGrad") return "a * 1.1283791670955126f * exp(-b * b)";
  if (n.op != "fbl.GeluGrad") return std::nullopt;
  if (n.attrString("approximate", "none") == "tanh")
    return "a * (0.5f * (1.0f + tanh(0.7978845608028654f * (b + 0.044715f * b * b * b))) + "
           "0.5f * b * (1.0f - pown(tanh(0.7978845608028654f * (b + 0.044715f * b * b * b)), 2)) * "
           "0.7978845608028654f * (1.0f + 0.134145f * b * b))";
  return "a * (0.5f * (1.0f + erf(b * 0.7071067811865476f)) + b * 0.3989422804014327f * exp(-0.5f * b * b))";
}

// Float ops keep their float spelling; on integers max/min/abs/division need the integer forms.
std::string adaptExpr(std::string expr, DType t) {
  if (ir::isFloat(t)) return expr;
  auto repl = [&](std::string_view from, std::string_view to) {
    size_t p = expr.find(from);
    if (p != std::string::npos) expr.replace(p, from.size(), to);
  };
  repl("fabs(", "abs(");
  repl("sign(a)", "((a > 0) - (a < 0))");
  return expr;
}

// `layouts` (may be null) binds operands to other values read through layouts, and the output
// to a layout; without any, the offsets are plain broadcast strides.
Result<NodeCode> emitElementwise(const ir::Graph& g, const ir::Node& n, const Target& t, std::string expr,
                                 const NodeLayouts* layouts) {
  const ir::Value& out = g.values[n.outputs[0]];
  // A 16-bit float is only converted to or from (a Cast): the kernel computes in float.
  const bool storedOut = ir::isFloat16(out.dtype);
  for (ir::ValueId v : n.inputs)
    if ((storedOut || (v != ir::kNoValue && ir::isFloat16(g.values[v].dtype))) && n.op != "Cast")
      return makeError("{}: {} values are storage only; only a Cast reads or writes them", ir::describeNode(g, n),
                       ir::dtypeName(storedOut ? out.dtype : g.values[v].dtype));
  const std::string_view outT = storedOut ? "float" : clType(out.dtype);
  std::string params, index, body;
  std::vector<ArgRef> args;
  std::vector<StridedOperand> ops;
  std::vector<LayoutOperand> laid;
  bool anyLayout = false;
  // Max/Min/Sum/Mean may be variadic: fold them left to right.
  const size_t arity = (n.op == "Expand" || n.op == "CastLike") ? 1 : n.inputs.size();
  static const char* names[] = {"a", "b", "c"};
  std::vector<std::string> loads;
  for (size_t k = 0; k < arity; ++k) {
    const ir::Value& v = g.values[n.inputs[k]];
    const std::string_view vt = ir::isFloat16(v.dtype) ? "float" : clType(v.dtype);
    if (vt.empty()) return makeError("{}: dtype {} has no kernel type", ir::describeNode(g, n), ir::dtypeName(v.dtype));
    std::string name = k < 3 ? names[k] : fmt::format("x{}", k);
    const OperandLayout* ol = layouts && k < layouts->inputs.size() && layouts->inputs[k] ? &*layouts->inputs[k] : nullptr;
    const ir::ValueId bound = ol ? ol->value : n.inputs[k];
    if (auto lit = scalarLiteral(g.values[bound]); lit && !(ol && ol->sign)) {
      loads.push_back(fmt::format("  const {} {} = {};\n", vt, name, *lit));
      continue;
    }
    const std::string var = fmt::format("o{}", k);
    params += fmt::format("__global const {}* in{}, ", bufferClType(v.dtype), k);
    args.push_back({false, bound});
    ops.push_back({var, broadcastStrides(v.shape, out.shape), 0});
    if (ol) {
      if (ol->transposed) return makeError("{}: elementwise operands are not read transposed", ir::describeNode(g, n));
      if (ol->layout.shape() != v.shape)
        return makeError("{}: operand {} layout {} does not cover its shape {}", ir::describeNode(g, n), k,
                         ol->layout.str(), ir::shapeToString(v.shape));
      anyLayout = true;
      laid.push_back({var, ol->layout, ol->sign});
    } else {
      laid.push_back({var, layout::Layout::rowMajor(v.shape), std::nullopt});
    }
    const std::string load = loadElement(v.dtype, fmt::format("in{}", k), var);
    loads.push_back(ol && ol->sign ? fmt::format("  const {0} {1} = {2}_pos ? {3} : -{3};\n", vt, name, var, load)
                                   : fmt::format("  const {} {} = {};\n", vt, name, load));
  }
  if ((n.op == "Max" || n.op == "Min" || n.op == "Sum" || n.op == "Mean") && arity > 2) {
    std::string acc = "a";
    for (size_t k = 1; k < arity; ++k) {
      std::string x = k < 3 ? names[k] : fmt::format("x{}", k);
      acc = n.op == "Max" ? fmt::format("max({}, {})", acc, x)
            : n.op == "Min" ? fmt::format("min({}, {})", acc, x)
                            : fmt::format("({} + {})", acc, x);
    }
    expr = n.op == "Mean" ? fmt::format("{} / {}.0f", acc, arity) : acc;
  }
  params += fmt::format("__global {}* out", bufferClType(out.dtype));
  args.push_back({false, n.outputs[0]});
  // The output through its layout unless that is row-major (then it is written at i).
  std::string outAt = "i";
  if (layouts && !layouts->outputs.empty() && layouts->outputs[0] &&
      !(*layouts->outputs[0] == layout::Layout::rowMajor(out.shape))) {
    if (layouts->outputs[0]->shape() != out.shape)
      return makeError("{}: output layout {} does not cover its shape {}", ir::describeNode(g, n),
                       layouts->outputs[0]->str(), ir::shapeToString(out.shape));
    anyLayout = true;
    laid.push_back({"o_out", *layouts->outputs[0], std::nullopt});
    outAt = "o_out";
  }
  for (const std::string& l : loads) body += l;
  const std::string value = out.dtype == DType::Bool ? fmt::format("({}) ? 1 : 0", expr) : expr;
  if (anyLayout) {
    auto idx = emitLayoutOffsets(out.shape, "i", laid);
    if (!idx.ok()) return makeError("{}: {}", ir::describeNode(g, n), idx.error().message);
    index = *idx;
  } else {
    index = emitOffsets(out.shape, "i", ops);
  }
  NodeCode code;
  code.launches.push_back(elementwiseLaunch({params, index, body, fmt::format("({})({})", outT, value), outAt,
                                             std::string(outT), ir::numElements(out.shape), out.dtype},
                                            lowerTag(n.op), std::move(args), t));
  return code;
}

}  // namespace

std::optional<std::string> elementwiseExpr(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "Gelu") return gelu(n);
  if (auto e = pointwiseGradExpr(n)) return e;
  if (n.op == "Sum" || n.op == "Mean") return std::string(n.op == "Sum" ? "a + b" : "(a + b) / 2.0f");
  if (n.op == "Mod") {
    // The reference's rules; a zero integer divisor gives 0 here (the reference refuses it).
    if (ir::isFloat(g.values[n.inputs[0]].dtype)) return std::string("fmod(a, b)");
    if (n.attrInt("fmod", 0) == 1) return std::string("(b == 0 ? 0 : a % b)");
    return std::string("(b == 0 ? 0 : (a % b != 0 && ((a % b < 0) != (b < 0)) ? a % b + b : a % b))");
  }
  for (const EwRule& r : kEwRules)
    if (n.op == r.op) {
      std::string expr(r.expr);
      // x^2 and x^0.5 exactly as the reference computes them, without pow's ulps.
      if (n.op == "Pow") {
        if (auto e = constScalar(g, n.inputs[1])) {
          if (*e == 2.0) expr = "a * a";
          else if (*e == 0.5) expr = "sqrt(a)";
          else if (*e == 1.0) expr = "a";
        }
      }
      return adaptExpr(expr, g.values[n.inputs[0]].dtype);
    }
  return std::nullopt;
}

bool isElementwiseOp(std::string_view op) {
  if (op == "Gelu" || op == "Sum" || op == "Mean" || op == "Mod") return true;
  if (op == "fbl.SigmoidGrad" || op == "fbl.TanhGrad" || op == "fbl.ErfGrad" || op == "fbl.GeluGrad") return true;
  for (const EwRule& r : kEwRules)
    if (op == r.op) return true;
  return false;
}

namespace {

Status checkOutputTypes(const ir::Graph& g, const ir::Node& n) {
  for (const ir::ValueId o : n.outputs)
    if (o != ir::kNoValue && bufferClType(g.values[o].dtype).empty())
      return makeError("{}: output dtype {} has no OpenCL kernel type", ir::describeNode(g, n),
                       ir::dtypeName(g.values[o].dtype));
  return Status::success();
}

}  // namespace

Result<NodeCode> emitElementwiseNode(const ir::Graph& g, const ir::Node& n, const Target& t,
                                     const NodeLayouts* layouts) {
  auto expr = elementwiseExpr(g, n);
  if (!expr) return makeError("{}: '{}' is not an elementwise op", ir::describeNode(g, n), n.op);
  FBL_TRY(checkOutputTypes(g, n));
  return emitElementwise(g, n, t, *expr, layouts);
}

Result<NodeCode> emitNode(const ir::Graph& g, const ir::Node& n, const Target& t) {
  if (ops::isView(n.op)) {
    NodeCode c;
    c.aliasOf = n.inputs[0];
    return c;
  }
  FBL_TRY(checkOutputTypes(g, n));
  if (auto expr = elementwiseExpr(g, n)) return emitElementwise(g, n, t, *expr, nullptr);
  if (auto* f = findSpecialEmitter(n.op)) return f(g, n, t);
  return makeError("{}: no OpenCL kernel for op '{}' (supported: elementwise, movement, MatMul, "
                   "Gemm, reductions, ArgMax, ArgMin, TopK, Softmax, LayerNormalization, Gather*, ScatterND, "
                   "ScatterElements, CumSum, Conv, fbl training ops)",
                   ir::describeNode(g, n), n.op);
}

}  // namespace fbl::codegen
