// Generated text. An epilogue (steps y * 0.5, base + y) becomes
//
//   inline float epilogue1(float y, uint i, __global const float* restrict e0) {
//     const uint e0_o = i;                      // offsets of every loaded operand from i
//     const float t0 = (y * 0.5f);
//     const float t1 = (e0[e0_o] + t0);
//     return t1;
//   }
//   inline float4 epilogue4(float4 v, uint i, uint c, ...)  // four lanes; lanes past N stay 0
//   #define EPILOGUE(v, b, r, c) epilogue4(v, ((b) * M + (r)) * N + (c), (c), e0)
//
// ((b) * M + (r)) * N + (c) is the flat output index in both templates (a batch folded into M has
// b = 0 and M = B * M). A group computes its members the same way, then stores the last result.
#include "compiler/codegen/fused_elementwise.h"

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/templates.h"

namespace fbl::codegen {

namespace {

struct FusedBody {
  std::vector<LayoutOperand> loads;  // offsets from the output index
  std::string params, argNames;      // ", __global const float* restrict e0", ", e0"
  std::vector<ArgRef> args;
  std::string body;                  // statements declaring t0, t1, ...
  std::string result;                // the last one
};

struct Load {
  ir::ValueId value;
  layout::Layout layout;
  std::optional<layout::Expr> sign;
  std::string var;
};

// `seed`: the register a chained first op reads ("y"), or empty.
Result<FusedBody> emitFusedOps(const ir::Graph& g, const std::vector<FusedOp>& ops, const std::string& seed,
                               const std::string& indent) {
  static const char* names[] = {"a", "b", "c"};
  FusedBody out;
  std::vector<Load> loads;
  std::vector<std::pair<ir::ValueId, std::string>> registers;  // member outputs computed so far
  std::string prev = seed;
  for (size_t j = 0; j < ops.size(); ++j) {
    const FusedOp& op = ops[j];
    const ir::Node& n = g.nodes[op.node];
    auto expr = elementwiseExpr(g, n);
    if (!expr || n.inputs.size() > 3 || n.op == "Expand")
      return makeError("{}: '{}' cannot be computed inside another kernel", ir::describeNode(g, n), n.op);
    if (n.outputs.size() != 1 || g.values[n.outputs[0]].dtype != ir::DType::F32)
      return makeError("{}: a fused op must have one float output", ir::describeNode(g, n));
    if (op.chained >= static_cast<int>(n.inputs.size()) || (op.chained >= 0 && prev.empty()))
      return makeError("{}: chained slot {} has no running value", ir::describeNode(g, n), op.chained);
    if (op.addsLowRank) {  // the other operand is already in the accumulator
      if (op.chained < 0 || n.op != "Add")
        return makeError("{}: only a chained Add can take a low-rank term", ir::describeNode(g, n));
      const std::string t = fmt::format("t{}", j);
      out.body += fmt::format("{}const float {} = {};  // + the low-rank term, added before\n", indent, t, prev);
      registers.emplace_back(n.outputs[0], t);
      prev = t;
      continue;
    }
    std::string operands;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      std::string x;
      const ir::ValueId in = n.inputs[k];
      if (static_cast<int>(k) == op.chained) {
        x = prev;
      } else {
        for (const auto& [v, reg] : registers)
          if (v == in) x = reg;
      }
      if (x.empty()) {
        const OperandLayout* ol = k < op.inputs.size() && op.inputs[k] ? &*op.inputs[k] : nullptr;
        const ir::ValueId bound = ol ? ol->value : in;
        if (g.values[in].dtype != ir::DType::F32 || g.values[bound].dtype != ir::DType::F32)
          return makeError("{}: fused operand {} is not float", ir::describeNode(g, n), k);
        if (ol && ol->transposed) return makeError("{}: fused operands are not read transposed", ir::describeNode(g, n));
        auto lit = scalarLiteral(g.values[bound]);
        if (lit && !(ol && ol->sign)) {
          x = *lit;
        } else {
          Load want{bound, ol ? ol->layout : layout::Layout::rowMajor(g.values[in].shape), ol ? ol->sign : std::nullopt, ""};
          for (const Load& l : loads)
            if (l.value == want.value && l.layout == want.layout && l.sign.has_value() == want.sign.has_value() &&
                (!l.sign || l.sign->str() == want.sign->str()))
              want.var = l.var;
          if (want.var.empty()) {
            want.var = fmt::format("e{}", loads.size());
            out.params += fmt::format(", __global const float* restrict {}", want.var);
            out.argNames += ", " + want.var;
            out.args.push_back(val(bound));
            out.loads.push_back({want.var + "_o", want.layout, want.sign});
            loads.push_back(want);
          }
          const std::string at = fmt::format("{}[{}_o]", want.var, want.var);
          x = want.sign ? fmt::format("({0}_o_pos ? {1} : -{1})", want.var, at) : at;
        }
      }
      operands += fmt::format("const float {} = {}; ", names[k], x);
    }
    const std::string t = fmt::format("t{}", j);
    out.body += fmt::format("{}float {};\n{}{{ {}{} = ({}); }}\n", indent, t, indent, operands, t, *expr);
    registers.emplace_back(n.outputs[0], t);
    prev = t;
  }
  out.result = prev;
  return out;
}

}  // namespace

Result<EpilogueCode> emitMatmulEpilogue(const ir::Graph& g, const std::vector<FusedOp>& steps,
                                        const ir::Shape& outShape) {
  for (const FusedOp& st : steps)
    if (st.chained < 0) return makeError("{}: an epilogue step needs its chained slot", ir::describeNode(g, g.nodes[st.node]));
  FBL_ASSIGN(FusedBody f, emitFusedOps(g, steps, "y", "  "));
  std::string index;
  if (!f.loads.empty()) {
    auto idx = emitLayoutOffsets(outShape, "i", f.loads, "  ");
    if (!idx.ok()) return makeError("{}: {}", ir::describeNode(g, g.nodes[steps.front().node]), idx.error().message);
    index = *idx + "\n";
  }
  EpilogueCode out;
  out.args = std::move(f.args);
  std::string& code = out.kernel.code;
  code = fmt::format("inline float epilogue1(float y, uint i{}) {{\n{}{}  return {};\n}}\n", f.params, index, f.body,
                     f.result);
  code += fmt::format("inline float4 epilogue4(float4 v, uint i, uint c{}) {{\n", f.params);
  code += fmt::format("  return (float4)(epilogue1(v.x, i{}),\n", f.argNames);
  const char* lanes = "xyzw";
  for (int l = 1; l < 4; ++l)
    code += fmt::format("                  c + {}u < N ? epilogue1(v.{}, i + {}u{}) : 0.0f{}\n", l, lanes[l], l,
                        f.argNames, l == 3 ? ");" : ",");
  code += "}\n";
  code += fmt::format("#define EPILOGUE(v, b, r, c) epilogue4(v, ((b) * M + (r)) * N + (c), (c){})\n", f.argNames);
  out.kernel.params = std::move(f.params);
  return out;
}

Result<FusedValue> emitFusedValue(const ir::Graph& g, const std::vector<FusedOp>& ops, const ir::Shape& shape,
                                  const std::string& linear, const std::string& indent) {
  for (const FusedOp& op : ops)
    if (g.values[g.nodes[op.node].outputs[0]].shape != shape)
      return makeError("{}: a fused producer must have the shape its consumer reads, {}",
                       ir::describeNode(g, g.nodes[op.node]), ir::shapeToString(shape));
  FBL_ASSIGN(FusedBody f, emitFusedOps(g, ops, "", indent));
  FusedValue out;
  if (!f.loads.empty()) {
    auto idx = emitLayoutOffsets(shape, linear, f.loads, indent);
    if (!idx.ok()) return makeError("{}: {}", ir::describeNode(g, g.nodes[ops.front().node]), idx.error().message);
    out.index = *idx;
  }
  out.params = std::move(f.params);
  out.body = std::move(f.body);
  out.result = std::move(f.result);
  out.args = std::move(f.args);
  return out;
}

Result<NodeCode> emitElementwiseGroup(const ir::Graph& g, const ir::Node& root, const Target& t,
                                      const NodeLayouts& layouts) {
  std::vector<FusedOp> ops = layouts.inlined;
  ops.push_back({static_cast<ir::NodeId>(&root - g.nodes.data()), -1, layouts.inputs});
  const ir::Value& out = g.values[root.outputs[0]];
  for (const FusedOp& op : ops)
    if (g.values[g.nodes[op.node].outputs[0]].shape != out.shape)
      return makeError("{}: fused producer {} has another shape than its consumer", ir::describeNode(g, root),
                       g.nodes[op.node].name);
  FBL_ASSIGN(FusedBody f, emitFusedOps(g, ops, "", "  "));
  std::vector<LayoutOperand> laid = f.loads;
  std::string outAt = "i";
  if (!layouts.outputs.empty() && layouts.outputs[0] && !(*layouts.outputs[0] == layout::Layout::rowMajor(out.shape))) {
    laid.push_back({"o_out", *layouts.outputs[0], std::nullopt});
    outAt = "o_out";
  }
  auto index = emitLayoutOffsets(out.shape, "i", laid);
  if (!index.ok()) return makeError("{}: {}", ir::describeNode(g, root), index.error().message);
  const std::string params = f.params.empty() ? "__global float* out" : f.params.substr(2) + ", __global float* out";
  std::vector<ArgRef> args = std::move(f.args);
  args.push_back(val(root.outputs[0]));
  NodeCode code;
  code.launches.push_back(elementwiseLaunch({params, *index, f.body, f.result, outAt, "float", ir::numElements(out.shape)},
                                            lowerTag(root.op), std::move(args), t));
  return code;
}

}  // namespace fbl::codegen
