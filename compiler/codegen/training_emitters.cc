// Kernels for fbl's backward and optimizer ops (compiler/ops/training_schemas.cc defines them):
//  - (fbl.SigmoidGrad/TanhGrad/ErfGrad/GeluGrad are elementwise ops: kernel_emitter.cc);
//  - fbl.ReduceSumTo: reduce.cl over the broadcast dims; fbl.SliceGrad: zero fill, then a
//    strided copy of dy into the sliced positions;
//  - fbl.SoftmaxGrad, fbl.LayerNormGrad, fbl.SoftmaxCrossEntropyLossGrad, fbl.GatherGrad: their
//    own templates; fbl.AdamW/fbl.SGD: optimizer.cl;
//  - fbl.ConvGradInput/fbl.ConvGradWeight (and Conv with groups): conv_emitters.cc.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/codegen/conv_emitters.h"
#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/operand_layout.h"

namespace fbl::codegen {
namespace {

using ir::Shape;

std::string str(int64_t v) { return std::to_string(v); }

Result<NodeCode> reduceSumTo(const ir::Graph& g, const ir::Node& n, const Target& t) {
  return emitReduceSumTo(g, n, t, nullptr);
}

Result<NodeCode> sliceGrad(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& dy = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  const std::vector<int64_t> axes = n.attrInts("axes"), starts = n.attrInts("starts"), steps = n.attrInts("steps");
  const std::vector<int64_t> os = ir::stridesOf(out.shape);
  std::vector<int64_t> dst = os;
  int64_t base = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t ax = normAxis(axes[i], out.shape.size());
    const int64_t step = i < steps.size() ? steps[i] : 1;
    if (step < 0) return makeError("{}: negative slice steps are not supported", ir::describeNode(g, n));
    dst[ax] = os[ax] * step;
    base += starts[i] * os[ax];
  }
  const int64_t count = ir::numElements(out.shape), inner = ir::numElements(dy.shape);
  NodeCode c;
  c.launches.push_back(launch("fill", {{"T", "float"}, {"N", str(count)}, {"VALUE", "0.0f"}}, "fill",
                              {val(n.outputs[0])}, grid1(count, t), {t.workgroup}));
  c.launches.push_back(launch("strided_copy",
                              {{"T", "float"}, {"N", str(inner)},
                               {"INDEX", emitOffsets(dy.shape, "i", {{"o_src", ir::stridesOf(dy.shape), 0}, {"o_dst", dst, base}})}},
                              "slicegrad", {val(n.inputs[0]), val(n.outputs[0])}, grid1(inner, t), {t.workgroup}));
  return c;
}

Result<NodeCode> softmaxGrad(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const Shape& s = g.values[n.inputs[1]].shape;
  const int64_t axis = normAxis(n.attrInt("axis", -1), s.size());
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t rows = ir::numElements(s) / std::max<int64_t>(1, s[axis]);
  const int64_t wg = reduceGroupSize(s[axis], t);
  NodeCode c;
  c.launches.push_back(launch("softmax_grad",
                              {{"L", str(s[axis])}, {"INNER", str(inner)}, {"WG", str(wg)}, {"ROW_TREE", rowTree()},
                               {"ROWS", str(rows)}},
                              "softmaxgrad", {val(n.inputs[0]), val(n.inputs[1]), val(n.outputs[0])},
                              rowGrid(rows, wg, t), {wg > 1 ? wg : t.workgroup}));
  return c;
}

Result<NodeCode> layerNormGrad(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const Shape& s = g.values[n.inputs[1]].shape;
  const int64_t axis = normAxis(n.attrInt("axis", -1), s.size());
  int64_t L = 1;
  for (size_t d = axis; d < s.size(); ++d) L *= s[d];
  const int64_t rows = ir::numElements(s) / std::max<int64_t>(1, L);
  FBL_TRY(expectWholeNormalizedShape(g, n, L));
  const int64_t wg = reduceGroupSize(L, t);
  auto out = [&](size_t i) { return i < n.outputs.size() ? n.outputs[i] : ir::kNoValue; };
  NodeCode c;
  c.scratch = {{ir::DType::F32, {rows}}, {ir::DType::F32, {rows}}};
  const ArgRef dx = out(0) != ir::kNoValue ? val(out(0)) : scratch(2);
  if (out(0) == ir::kNoValue) c.scratch.push_back({ir::DType::F32, s});
  std::string colParams = "__global const float* dy, __global const float* x, __global const float* row_mean, "
                          "__global const float* row_inv";
  std::vector<ArgRef> colArgs{val(n.inputs[0]), val(n.inputs[1]), scratch(0), scratch(1)};
  std::string colStore;
  if (out(1) != ir::kNoValue) {
    colParams += ", __global float* dscale";
    colArgs.push_back(val(out(1)));
    colStore += "  dscale[j] = ds;\n";
  }
  if (out(2) != ir::kNoValue) {
    colParams += ", __global float* dbias";
    colArgs.push_back(val(out(2)));
    colStore += "  dbias[j] = db;\n";
  }
  const std::map<std::string, std::string> vars{
      {"L", str(L)}, {"ROWS", str(rows)}, {"EPS", floatLiteral(n.attrFloat("epsilon", 1e-5f))},
      {"COL_PARAMS", colParams}, {"COL_STORE", colStore}, {"WG", str(wg)}, {"ROW_TREE", rowTree()}};
  c.launches.push_back(launch("layernorm_grad", vars, "layernormgrad",
                              {val(n.inputs[0]), val(n.inputs[1]), val(n.inputs[2]), dx, scratch(0), scratch(1)},
                              rowGrid(rows, wg, t), {wg > 1 ? wg : t.workgroup}, "_rows"));
  if (out(1) != ir::kNoValue || out(2) != ir::kNoValue)
    c.launches.push_back(launch("layernorm_grad", vars, "layernormgrad", colArgs, grid1(L, t), {t.workgroup}, "_cols"));
  return c;
}

Result<NodeCode> sceLossGrad(const ir::Graph& g, const ir::Node& n, const Target& t) {
  if (n.input(3) != ir::kNoValue) return makeError("{}: class weights are not supported", ir::describeNode(g, n));
  FBL_ASSIGN(SceLossShape sh, sceLossShape(g, n, n.inputs[1], n.inputs[2], t));
  NodeCode c;
  c.launches.push_back(launch("sce_loss", sh.vars, "scelossgrad",
                              {val(n.inputs[0]), val(n.inputs[1]), val(n.inputs[2]), val(n.outputs[0])},
                              {sh.rows * sh.wg}, {sh.wg}, "_grad"));
  return c;
}

Result<NodeCode> gatherGrad(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const Shape& out = g.values[n.outputs[0]].shape;
  const ir::Value& idx = g.values[n.inputs[1]];
  const int64_t axis = normAxis(n.attrInt("axis", 0), out.size());
  int64_t inner = 1;
  for (size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  const int64_t count = ir::numElements(out);
  NodeCode c;
  c.launches.push_back(launch("gather_grad",
                              {{"TI", std::string(clType(idx.dtype))}, {"N", str(count)}, {"INNER", str(inner)},
                               {"D", str(out[axis])}, {"K", str(ir::numElements(idx.shape))}},
                              "gathergrad", {val(n.inputs[0]), val(n.inputs[1]), val(n.outputs[0])},
                              grid1(count, t), {t.workgroup}));
  return c;
}

Result<NodeCode> optimizer(const ir::Graph& g, const ir::Node& n, const Target& t) {
  return emitOptimizer(g, n, t, nullptr);
}

}  // namespace

bool isOptimizerOp(std::string_view op) { return op == "fbl.AdamW" || op == "fbl.SGD"; }

std::vector<int> optimizerUpdatedInputs(std::string_view op) {
  return op == "fbl.AdamW" ? std::vector<int>{0, 2, 3} : std::vector<int>{0, 2};
}

Result<NodeCode> emitOptimizer(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts) {
  const ir::Shape& shape = g.values[n.inputs[0]].shape;
  const int64_t count = ir::numElements(shape);
  const bool adam = n.op == "fbl.AdamW";
  std::map<std::string, std::string> vars{
      {"N", str(count)},
      {"LR", floatLiteral(n.attrFloat("lr", 1e-3f))},
      {"WD", floatLiteral(n.attrFloat("weight_decay", 0.0f))},
      {"BETA1", floatLiteral(n.attrFloat("beta1", 0.9f))},
      {"BETA2", floatLiteral(n.attrFloat("beta2", 0.999f))},
      {"EPS", floatLiteral(n.attrFloat("epsilon", 1e-8f))}};
  // Element offsets: p, g and the state in their own layouts, each output where the input it
  // updates lies (AdamW: p, g, m, v, step -> p, m, v; SGD: p, g[, buf] -> p[, buf]).
  const std::vector<std::pair<const char*, int>> operands =
      adam ? std::vector<std::pair<const char*, int>>{{"o_p", 0}, {"o_g", 1}, {"o_m", 2}, {"o_v", 3}}
           : std::vector<std::pair<const char*, int>>{{"o_p", 0}, {"o_g", 1}, {"o_b", 2}};
  const std::vector<int> updates = optimizerUpdatedInputs(n.op);
  std::vector<LayoutOperand> offsets;
  std::vector<ArgRef> args;
  for (const auto& [var, slot] : operands) {
    if (slot >= static_cast<int>(n.inputs.size()) || n.inputs[slot] == ir::kNoValue) continue;
    const auto* ol = layouts && layouts->inputs[slot] ? &*layouts->inputs[slot] : nullptr;
    if (ol && (ol->transposed || ol->sign)) return makeError("{}: optimizer operands are read as stored", ir::describeNode(g, n));
    offsets.push_back({var, ol ? ol->layout : layout::Layout::rowMajor(shape), std::nullopt});
  }
  // An operand read through a map is bound to the value the map reads (its chain's source).
  for (size_t s = 0; s < n.inputs.size(); ++s) {
    const bool laid = layouts && s < layouts->inputs.size() && layouts->inputs[s];
    args.push_back(val(laid ? layouts->inputs[s]->value : n.inputs[s]));
  }
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    args.push_back(val(n.outputs[o]));
    // An output not stored like the input it updates would need offsets of its own.
    const layout::Layout rowMajor = layout::Layout::rowMajor(shape);
    const bool inLaid = layouts && updates[o] < static_cast<int>(layouts->inputs.size()) && layouts->inputs[updates[o]];
    const bool outLaid = layouts && o < layouts->outputs.size() && layouts->outputs[o];
    const layout::Layout& in = inLaid ? layouts->inputs[updates[o]]->layout : rowMajor;
    const layout::Layout& out = outLaid ? *layouts->outputs[o] : rowMajor;
    if (!(in == out))
      return makeError("{}: output {} is not stored like the input it updates", ir::describeNode(g, n), o);
  }
  // Every operand stored alike, one element a buffer slot (a transposed lora_B with its
  // gradient and state): the update is elementwise, so walk the storage in order, where
  // neighbouring work-items touch neighbouring floats, instead of the logical index.
  const bool alike = std::all_of(offsets.begin(), offsets.end(), [&](const LayoutOperand& o) {
    return o.layout == offsets[0].layout;
  });
  if (alike && !offsets.empty() && offsets[0].layout.storage() == layout::Storage::Buffer &&
      offsets[0].layout.bufferSize() == count && offsets[0].layout.inverse().ok())
    for (LayoutOperand& o : offsets) o.layout = layout::Layout::rowMajor(shape);
  // Both kernels of the template are instantiated; the unused one gets row-major offsets.
  FBL_ASSIGN(std::string index, emitLayoutOffsets(shape, "i", offsets));
  const std::string unused = "  const uint o_p = i, o_g = i, o_m = i, o_v = i, o_b = i;";
  vars["ADAM_INDEX"] = adam ? index : unused;
  vars["SGD_INDEX"] = adam ? unused : index;
  // The training loop's AdamW (compiler/autodiff/optimizer.cc) reads its lr and gradient scale
  // from two scalar tensors after the step, so a schedule changes no kernel.
  const bool loopInputs = adam && n.inputs.size() == 7;
  vars["ADAM_LOOP_PARAMS"] = loopInputs ? ", __global const float* lr_in, __global const float* grad_scale" : "";
  vars["GRAD_SCALE"] = loopInputs ? " * grad_scale[0]" : "";
  if (loopInputs) vars["LR"] = "lr_in[0]";
  if (adam) {
    vars["SGD_PARAMS"] = "__global const float* p, __global const float* g, __global float* p_out";
    vars["SGD_BODY"] = "";
  } else if (n.input(2) != ir::kNoValue) {
    vars["SGD_PARAMS"] = "__global const float* p, __global const float* g, __global const float* buf, "
                         "__global float* p_out, __global float* buf_out";
    vars["SGD_BODY"] = fmt::format("  const float b = {} * buf[o_b] + gi;\n  buf_out[o_b] = b;\n  p_out[o_p] = p[o_p] - {} * b;",
                                   floatLiteral(n.attrFloat("momentum", 0.0f)), vars["LR"]);
  } else {
    vars["SGD_PARAMS"] = "__global const float* p, __global const float* g, __global float* p_out";
    vars["SGD_BODY"] = fmt::format("  p_out[o_p] = p[o_p] - {} * gi;", vars["LR"]);
  }
  NodeCode c;
  c.launches.push_back(launch("optimizer", vars, adam ? "adamw" : "sgd", std::move(args), grid1(count, t),
                              {t.workgroup}, adam ? "_adamw" : "_sgd"));
  return c;
}

std::vector<EmitterEntry> trainingEmitters() {
  // convEmitters()' "Conv" serves only once computeEmitters() no longer lists its group-1 Conv
  // (findSpecialEmitter takes the first entry of a name).
  std::vector<EmitterEntry> all{
      {"fbl.ReduceSumTo", reduceSumTo},
      {"fbl.SliceGrad", sliceGrad},
      {"fbl.SoftmaxGrad", softmaxGrad},
      {"fbl.LayerNormGrad", layerNormGrad},
      {"fbl.SoftmaxCrossEntropyLossGrad", sceLossGrad},
      {"fbl.GatherGrad", gatherGrad},
      {"fbl.AdamW", optimizer},
      {"fbl.SGD", optimizer},
      {"fbl.Attention", emitAttentionNode},
      {"fbl.AttentionGrad", emitAttentionNode}};
  for (const auto& e : convEmitters()) all.push_back(e);
  return all;
}

Result<NodeCode> emitReduceSumTo(const ir::Graph& g, const ir::Node& n, const Target& t,
                                 const std::vector<FusedOp>* inlined) {
  const Shape& in = g.values[n.inputs[0]].shape;
  const Shape& out = g.values[n.outputs[0]].shape;
  const size_t lead = in.size() - out.size();
  const std::vector<int64_t> inStrides = ir::stridesOf(in);
  ReduceSpec r;
  r.tag = "reducesumto";
  for (size_t d = 0; d < in.size(); ++d) {
    const bool reduced = d < lead || (out[d - lead] == 1 && in[d] != 1);
    (reduced ? r.red : r.kept).push_back(in[d]);
    (reduced ? r.redStr : r.keptStr).push_back(inStrides[d]);
  }
  return emitReduceKernel(g, n, t, r, inlined);
}

}  // namespace fbl::codegen
