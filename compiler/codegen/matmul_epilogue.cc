// The generated text, for steps y = y * scale; y = base + y:
//
//   inline float epilogue1(float y, uint i, __global const float* restrict e0) {
//     <offsets of every parameter operand from i>
//     { const float a = y; const float b = 0.5f; y = (a * b); }
//     { const float a = e0[e0_o]; const float b = y; y = (a + b); }
//     return y;
//   }
//   inline float4 epilogue4(float4 v, uint i, uint c, <params>) { four lanes, past N left 0 }
//   #define EPILOGUE(v, b, r, c) epilogue4(v, ((b) * M + (r)) * N + (c), (c), e0)
//
// (b * M + r) * N + c is the flat output index in both templates: a batch folded into M has
// b = 0 and M = B * M.
#include "compiler/codegen/matmul_epilogue.h"

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"

namespace fbl::codegen {

Result<EpilogueCode> emitMatmulEpilogue(const ir::Graph& g, const std::vector<EpilogueStep>& steps,
                                        const ir::Shape& outShape) {
  static const char* names[] = {"a", "b", "c"};
  EpilogueCode out;
  std::string params, argNames, body;
  std::vector<LayoutOperand> laid;
  for (const EpilogueStep& st : steps) {
    const ir::Node& n = g.nodes[st.node];
    auto expr = elementwiseExpr(g, n);
    if (!expr || n.inputs.size() > 3 || st.slot < 0 || st.slot >= static_cast<int>(n.inputs.size()))
      return makeError("{}: cannot run inside a MatMul's store", ir::describeNode(g, n));
    if (n.outputs.size() != 1 || g.values[n.outputs[0]].dtype != ir::DType::F32)
      return makeError("{}: a fused step must have one float output", ir::describeNode(g, n));
    std::string block = "    {";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (static_cast<int>(k) == st.slot) {
        block += fmt::format(" const float {} = y;", names[k]);
        continue;
      }
      const OperandLayout* ol = k < st.inputs.size() && st.inputs[k] ? &*st.inputs[k] : nullptr;
      const ir::ValueId bound = ol ? ol->value : n.inputs[k];
      const ir::Value& v = g.values[n.inputs[k]];
      if (v.dtype != ir::DType::F32 || g.values[bound].dtype != ir::DType::F32)
        return makeError("{}: fused operand {} is not float", ir::describeNode(g, n), k);
      if (ol && ol->transposed) return makeError("{}: fused operands are not read transposed", ir::describeNode(g, n));
      if (auto lit = scalarLiteral(g.values[bound]); lit && !(ol && ol->sign)) {
        block += fmt::format(" const float {} = {};", names[k], *lit);
        continue;
      }
      const std::string p = fmt::format("e{}", out.args.size()), off = p + "_o";
      params += fmt::format(", __global const float* restrict {}", p);
      argNames += ", " + p;
      out.args.push_back(val(bound));
      laid.push_back({off, ol ? ol->layout : layout::Layout::rowMajor(v.shape), ol ? ol->sign : std::nullopt});
      const std::string load = fmt::format("{}[{}]", p, off);
      block += ol && ol->sign ? fmt::format(" const float {} = {}_pos ? {} : -{};", names[k], off, load, load)
                              : fmt::format(" const float {} = {};", names[k], load);
    }
    body += block + fmt::format(" y = ({}); }}\n", *expr);
  }
  std::string index;
  if (!laid.empty()) {
    auto idx = emitLayoutOffsets(outShape, "i", laid, "    ");
    if (!idx.ok()) return makeError("{}: {}", ir::describeNode(g, g.nodes[steps.front().node]), idx.error().message);
    index = *idx + "\n";
  }
  std::string& code = out.kernel.code;
  code = fmt::format("inline float epilogue1(float y, uint i{}) {{\n{}{}    return y;\n}}\n", params, index, body);
  code += fmt::format("inline float4 epilogue4(float4 v, uint i, uint c{}) {{\n", params);
  code += fmt::format("  return (float4)(epilogue1(v.x, i{}),\n", argNames);
  const char* lanes = "xyzw";
  for (int l = 1; l < 4; ++l)
    code += fmt::format("                  c + {}u < N ? epilogue1(v.{}, i + {}u{}) : 0.0f{}\n", l, lanes[l], l,
                        argNames, l == 3 ? ");" : ",");
  code += "}\n";
  code += fmt::format("#define EPILOGUE(v, b, r, c) epilogue4(v, ((b) * M + (r)) * N + (c), (c){})\n", argNames);
  out.kernel.params = params;
  return out;
}

}  // namespace fbl::codegen
