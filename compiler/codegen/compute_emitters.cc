// Ops with a template of their own. Each emitter reads the node's static shapes and attributes
// and fills the holes of one kernels_cl/ template:
//  - MatMul and Gemm (float only): the tiled rtile_matmul.cl (rtile_kernels.h), each operand
//    read through its layout (row-major unless the plan's layout lowering says otherwise),
//    tiling and split-K from the Target, Gemm's alpha and bias (rank <= 2) in the store
//    (gemmTerm);
//  - Reduce*: reduce.cl, kept dims indexed by the output, reduced dims by the loop counter;
//  - Softmax/LogSoftmax: softmax.cl along one axis; LayerNormalization: layernorm.cl;
//  - Gather/GatherElements: gather.cl, an index outside the table writes 0 (indexGuard);
//    SoftmaxCrossEntropyLoss: sce_loss.cl (rows, then sum).
// Conv and its gradients live in conv_emitters.cc.
#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/matmul_staging.h"
#include "compiler/codegen/fused_elementwise.h"
#include "compiler/codegen/operand_layout.h"
#include "compiler/codegen/rtile_kernels.h"
#include "compiler/codegen/templates.h"

namespace fbl::codegen {
namespace {

using ir::Shape;

std::string str(int64_t v) { return std::to_string(v); }

// One kernel for every product, the tiled template. No integer one: the reference executor has
// none to check it against, and the naive matmul.cl that took them read their bits as floats.
Result<NodeCode> matmul(const ir::Graph& g, const ir::Node& n, const Target& t) {
  if (!usesTiledMatmul(g, n))
    return makeError("{}: {} has an OpenCL kernel for float operands only", ir::describeNode(g, n), n.op);
  return emitTiledMatmul(g, n, t, nullptr);
}

Result<NodeCode> reduce(const ir::Graph& g, const ir::Node& n, const Target& t) {
  return emitReduce(g, n, t, nullptr);
}

}  // namespace

bool isReduceOp(std::string_view op) {
  return op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd" ||
         op == "ReduceSumSquare" || op == "fbl.ReduceSumTo";
}

Result<NodeCode> emitReduceKernel(const ir::Graph& g, const ir::Node& n, const Target& t, const ReduceSpec& r,
                                  const std::vector<FusedOp>* inlined) {
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  const std::string T(clType(out.dtype));
  std::string params = fmt::format("__global const {0}* src, __global {0}* dst", T), fused,
              load = "src[o_src + o_red]";
  std::vector<ArgRef> args{val(n.inputs[0]), val(n.outputs[0])};
  if (inlined && !inlined->empty()) {
    // The element at flat input index o_src + o_red, computed by the fused producers.
    if (out.dtype != ir::DType::F32 || in.dtype != ir::DType::F32)
      return makeError("{}: only float reductions compute fused producers", ir::describeNode(g, n));
    FBL_ASSIGN(FusedValue f, emitFusedValue(g, *inlined, in.shape, "fi", "    "));
    params = (f.params.empty() ? "" : f.params.substr(2) + ", ") + fmt::format("__global {}* dst", T);
    // Its own scope: the fused index code peels coordinates under the same names as RINDEX's.
    fused = "    float fused_x;\n    {\n    const uint fi = o_src + o_red;\n" + f.index + f.body +
            fmt::format("    fused_x = {};\n    }}", f.result);
    load = "fused_x";
    args = std::move(f.args);
    args.push_back(val(n.outputs[0]));
  }
  const int64_t count = ir::numElements(out.shape);
  const int64_t wg = reduceGroupSize(ir::numElements(r.red), t);
  NodeCode c;
  c.launches.push_back(launch(
      "reduce",
      {{"T", T}, {"ACC_T", r.accT}, {"WG", str(wg)}, {"N", str(count)}, {"R", str(ir::numElements(r.red))},
       {"MERGE", r.merge},
       {"INDEX", emitOffsets(r.kept, "i", {{"o_src", r.keptStr, 0}})},
       {"RINDEX", emitOffsets(r.red, "j", {{"o_red", r.redStr, 0}}, "    ")},
       {"INIT", r.init}, {"COMBINE", r.combine}, {"FINISH", r.finish},
       {"PARAMS", params}, {"FUSED", fused}, {"LOAD", load}},
      r.tag, std::move(args), rowGrid(count, wg, t), {wg > 1 ? wg : t.workgroup}));
  return c;
}

std::vector<int64_t> rowGrid(int64_t rows, int64_t wg, const Target& t) {
  return wg > 1 ? std::vector<int64_t>{rows * wg} : grid1(rows, t);
}

std::string rowTree() { return instantiate(kernelTemplate("row_tree"), {}); }

Status expectWholeNormalizedShape(const ir::Graph& g, const ir::Node& n, const int64_t normalized) {
  const std::vector<size_t> slots = n.op == "fbl.LayerNormGrad" ? std::vector<size_t>{2} : std::vector<size_t>{1, 2};
  for (size_t i : slots) {
    const ir::ValueId v = n.input(i);
    if (v != ir::kNoValue && ir::numElements(g.values[v].shape) != normalized)
      return makeError("{}: '{}' of shape {} broadcasts to the normalized shape; the kernel needs all {} elements",
                       ir::describeNode(g, n), g.values[v].name, ir::shapeToString(g.values[v].shape), normalized);
  }
  return {};
}

int64_t reduceGroupSize(int64_t reduced, const Target& t) {
  // A tree of at least 8 elements a lane, as wide as the profile allows (CPUs: no tree,
  // profile::defaultTuning says why).
  if (reduced < 16 || t.tuning.reduceMaxWorkgroup <= 1) return 1;
  int64_t wg = 1;
  while (wg * 2 <= reduced / 8 && wg * 2 <= t.tuning.reduceMaxWorkgroup) wg *= 2;
  return wg;
}

Result<NodeCode> emitReduce(const ir::Graph& g, const ir::Node& n, const Target& t, const std::vector<FusedOp>* inlined) {
  if (n.op == "fbl.ReduceSumTo") return emitReduceSumTo(g, n, t, inlined);
  const ir::Value& in = g.values[n.inputs[0]];
  const ir::Value& out = g.values[n.outputs[0]];
  const size_t rank = in.shape.size();
  std::vector<int64_t> axes = n.attrInts("axes");
  if (n.input(1) != ir::kNoValue) {
    auto a = constInts(g, n.inputs[1]);
    if (!a) return makeError("{}: reduction axes must be compile-time constants", ir::describeNode(g, n));
    axes = *a;
  }
  std::vector<bool> reduced(rank, axes.empty() && n.attrInt("noop_with_empty_axes", 0) == 0);
  for (int64_t a : axes) reduced[normAxis(a, rank)] = true;
  const std::vector<int64_t> inStrides = ir::stridesOf(in.shape);
  ReduceSpec r;
  for (size_t d = 0; d < rank; ++d) {
    (reduced[d] ? r.red : r.kept).push_back(in.shape[d]);
    (reduced[d] ? r.redStr : r.keptStr).push_back(inStrides[d]);
  }
  const int64_t R = ir::numElements(r.red);
  if (n.op == "ReduceMean") r.finish = fmt::format("acc / {}.0f", R);
  if (n.op == "ReduceMax") r.init = "-INFINITY", r.combine = r.merge = "fmax(acc, x)";
  if (n.op == "ReduceMin") r.init = "INFINITY", r.combine = r.merge = "fmin(acc, x)";
  if (n.op == "ReduceSumSquare") r.combine = "acc + x * x";
  if (n.op == "ReduceProd") r.init = "1.0f", r.combine = r.merge = "acc * x";
  if (!ir::isFloat(out.dtype) && n.op != "ReduceSum")
    return makeError("{}: integer {} is not supported", ir::describeNode(g, n), n.op);
  if (!ir::isFloat(out.dtype)) r.accT = std::string(clType(out.dtype)), r.init = "0";
  return emitReduceKernel(g, n, t, r, inlined);
}

namespace {

Result<NodeCode> softmax(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const Shape& s = g.values[n.inputs[0]].shape;
  const int64_t axis = normAxis(n.attrInt("axis", -1), s.size());
  const int64_t L = s[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t rows = ir::numElements(s) / std::max<int64_t>(1, L);
  const int64_t wg = reduceGroupSize(L, t);
  NodeCode c;
  c.launches.push_back(launch("softmax",
                              {{"L", str(L)}, {"INNER", str(inner)}, {"WG", str(wg)}, {"ROW_TREE", rowTree()},
                               {"ROWS", str(rows)}, {"LOG", n.op == "LogSoftmax" ? "1" : "0"}},
                              lowerTag(n.op), {val(n.inputs[0]), val(n.outputs[0])}, rowGrid(rows, wg, t),
                              {wg > 1 ? wg : t.workgroup}));
  return c;
}

Result<NodeCode> layerNorm(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const Shape& s = g.values[n.inputs[0]].shape;
  const int64_t axis = normAxis(n.attrInt("axis", -1), s.size());
  int64_t L = 1;
  for (size_t d = axis; d < s.size(); ++d) L *= s[d];
  const int64_t rows = ir::numElements(s) / std::max<int64_t>(1, L);
  FBL_TRY(expectWholeNormalizedShape(g, n, L));
  std::string params = "__global const float* x, __global const float* scale, ";
  std::vector<ArgRef> args{val(n.inputs[0]), val(n.inputs[1])};
  std::string bias;
  if (n.input(2) != ir::kNoValue) {
    params += "__global const float* bias, ";
    args.push_back(val(n.inputs[2]));
    bias = " + bias[j]";
  }
  params += "__global float* y";
  args.push_back(val(n.outputs[0]));
  std::string stats;
  const ir::ValueId meanOut = n.outputs.size() > 1 ? n.outputs[1] : ir::kNoValue;
  const ir::ValueId invOut = n.outputs.size() > 2 ? n.outputs[2] : ir::kNoValue;
  if (meanOut != ir::kNoValue) {
    params += ", __global float* mean_out";
    args.push_back(val(meanOut));
    stats += "    mean_out[r] = mean;\n";
  }
  if (invOut != ir::kNoValue) {
    params += ", __global float* inv_out";
    args.push_back(val(invOut));
    stats += "    inv_out[r] = inv;\n";
  }
  const int64_t wg = reduceGroupSize(L, t);
  NodeCode c;
  c.launches.push_back(launch("layernorm",
                              {{"PARAMS", params}, {"L", str(L)}, {"WG", str(wg)}, {"ROW_TREE", rowTree()},
                               {"ROWS", str(rows)},
                               {"EPS", floatLiteral(n.attrFloat("epsilon", 1e-5f))},
                               {"BIAS", bias}, {"STATS", stats}},
                              "layernorm", std::move(args), rowGrid(rows, wg, t), {wg > 1 ? wg : t.workgroup}));
  return c;
}

// Reads index `at` into t_, wraps a negative one (ONNX: -n counts from the end) and, for an index
// still outside [0, n), writes 0 to out[`outAt`] and returns: no index can make a gather read outside
// its table, even one the runtime's input checks never saw (a computed index, a bypassed check).
std::string indexGuard(const std::string& at, int64_t n, const std::string& outAt, std::string_view type) {
  return fmt::format("  long t_ = {};\n  if (t_ < 0) t_ += {};\n  if (t_ < 0 || t_ >= {}) {{ out[{}] = ({})0; return; }}\n",
                     at, n, n, outAt, type);
}

Result<NodeCode> gather(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& data = g.values[n.inputs[0]];
  const ir::Value& idx = g.values[n.inputs[1]];
  const ir::Value& out = g.values[n.outputs[0]];
  const size_t rank = data.shape.size();
  const int64_t axis = normAxis(n.attrInt("axis", 0), rank);
  const std::vector<int64_t> ds = ir::stridesOf(data.shape), is = ir::stridesOf(idx.shape);
  std::vector<int64_t> srcStr, idxStr;
  std::string index;
  if (n.op == "Gather") {
    // Output dims: data[:axis], indices' dims, data[axis+1:].
    for (int64_t d = 0; d < axis; ++d) srcStr.push_back(ds[d]), idxStr.push_back(0);
    for (size_t d = 0; d < idx.shape.size(); ++d) srcStr.push_back(0), idxStr.push_back(is[d]);
    for (size_t d = axis + 1; d < rank; ++d) srcStr.push_back(ds[d]), idxStr.push_back(0);
    index = emitOffsets(out.shape, "i", {{"o_base", srcStr, 0}, {"o_idx", idxStr, 0}});
  } else {  // GatherElements: output shape = indices' shape.
    for (size_t d = 0; d < rank; ++d) srcStr.push_back(static_cast<int64_t>(d) == axis ? 0 : ds[d]);
    index = emitOffsets(out.shape, "i", {{"o_base", srcStr, 0}, {"o_idx", is, 0}});
  }
  index += indexGuard("idx[o_idx]", data.shape[axis], "i", clType(data.dtype));
  index += fmt::format("  const uint o_src = o_base + (uint)t_ * {}u;", ds[axis]);
  const int64_t count = ir::numElements(out.shape);
  NodeCode c;
  c.launches.push_back(launch("gather",
                              {{"T", std::string(clType(data.dtype))}, {"TI", std::string(clType(idx.dtype))},
                               {"N", str(count)}, {"INDEX", index}},
                              lowerTag(n.op), {val(n.inputs[0]), val(n.inputs[1]), val(n.outputs[0])},
                              grid1(count, t), {t.workgroup}));
  return c;
}

}  // namespace

// Gather along `axis` with the data and index tensors each read through its layout, and the
// output written through its own: every
// work-item peels its output index into coordinates, reads the index tensor at its coordinates
// (through an offset function printed from the layout's map), and fetches the data element at
// (out[:axis], index, out[axis+q:]) the same way; for an image, the element's lane of its texel.
Result<NodeCode> emitGather(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts) {
  const ir::Value& data = g.values[n.inputs[0]];
  const ir::Value& idx = g.values[n.inputs[1]];
  const ir::Value& out = g.values[n.outputs[0]];
  const size_t rank = data.shape.size(), q = idx.shape.size();
  const int64_t axis = normAxis(n.attrInt("axis", 0), rank);
  auto layoutOf = [&](int slot) -> Result<layout::Layout> {
    const ir::Value& v = g.values[n.inputs[slot]];
    if (!layouts || !layouts->inputs[slot]) return layout::Layout::rowMajor(v.shape);
    const OperandLayout& ol = *layouts->inputs[slot];
    if (ol.transposed || ol.sign) return makeError("{}: gather operands are read as stored", ir::describeNode(g, n));
    return ol.layout;
  };
  const layout::Layout outL = layouts && !layouts->outputs.empty() && layouts->outputs[0]
                                  ? *layouts->outputs[0] : layout::Layout::rowMajor(g.values[n.outputs[0]].shape);
  if (outL.storage() != layout::Storage::Buffer)
    return makeError("{}: a gather writes its output to a buffer", ir::describeNode(g, n));
  FBL_ASSIGN(layout::Layout dataL, layoutOf(0));
  FBL_ASSIGN(layout::Layout idxL, layoutOf(1));
  if (idxL.storage() != layout::Storage::Buffer)
    return makeError("{}: the indices must be a buffer", ir::describeNode(g, n));
  const bool image = dataL.storage() == layout::Storage::Image2D;
  std::string helpers;
  auto offsetFn = [&](const std::string& fn, const layout::Layout& l) -> Status {
    std::string params;
    for (size_t d = 0; d < l.shape().size(); ++d) params += fmt::format("{}uint i{}", d ? ", " : "", d);
    if (l.shape().empty()) params = "void";
    const auto& o = l.map().outputs();
    if (l.storage() == layout::Storage::Buffer) {
      FBL_ASSIGN(std::string off, layout::toOpenCL(o[0]));
      helpers += fmt::format("inline uint {}({}) {{ return {}; }}\n", fn, params, off);
      return Status::success();
    }
    FBL_ASSIGN(std::string x, layout::toOpenCL(o[0]));
    FBL_ASSIGN(std::string y, layout::toOpenCL(o[1]));
    FBL_ASSIGN(std::string lane, layout::toOpenCL(o[2]));
    helpers += fmt::format("inline int2 {0}_xy({1}) {{ return (int2)((int)({2}), (int)({3})); }}\n"
                           "inline uint {0}_lane({1}) {{ return {4}; }}\n", fn, params, x, y, lane);
    return Status::success();
  };
  FBL_TRY(offsetFn("gather_data", dataL));
  FBL_TRY(offsetFn("gather_idx", idxL));
  FBL_TRY(offsetFn("gather_out", outL));
  // Output coordinates c0..c{r-1}, row-major over the output shape.
  std::string index;
  const ir::Shape& os = out.shape;
  int64_t stride = 1;
  std::vector<std::string> coord(os.size());
  for (size_t d = os.size(); d-- > 0;) {
    coord[d] = fmt::format("c{}", d);
    index += fmt::format("  const uint c{} = (i / {}u) % {}u;\n", d, stride, std::max<int64_t>(os[d], 1));
    stride *= os[d];
  }
  auto call = [](const std::string& fn, const std::vector<std::string>& args) {
    std::string s = fn + "(";
    for (size_t k = 0; k < args.size(); ++k) s += (k ? ", " : "") + args[k];
    return s + ")";
  };
  const std::vector<std::string> idxCoords(coord.begin() + axis, coord.begin() + axis + static_cast<int64_t>(q));
  index += indexGuard("idx[" + call("gather_idx", idxCoords) + "]", data.shape[axis], call("gather_out", coord),
                      clType(data.dtype));
  std::vector<std::string> dataCoords(coord.begin(), coord.begin() + axis);
  dataCoords.push_back("(uint)t_");
  for (size_t d = axis + 1; d < rank; ++d) dataCoords.push_back(coord[d + q - 1]);
  std::string body;
  const std::string outAt = call("gather_out", coord);
  if (image) {
    body = fmt::format("  const float4 texel_ = read_imagef(data, kGatherSmp, {});\n"
                       "  const uint lane_ = {};\n"
                       "  out[{}] = lane_ == 0u ? texel_.x : lane_ == 1u ? texel_.y : lane_ == 2u ? texel_.z : texel_.w;",
                       call("gather_data_xy", dataCoords), call("gather_data_lane", dataCoords), outAt);
    helpers = "__constant sampler_t kGatherSmp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;\n" + helpers;
  } else if (!dataL.encoding().plain()) {
    // An embedding table stored narrower (compiler/quant/base_weights.h): dequantized here.
    helpers += encodedElementFunction("gather_deq", dataL.encoding());
    body = fmt::format("  out[{}] = gather_deq(data, {});", outAt, call("gather_data", dataCoords));
  } else {
    body = fmt::format("  out[{}] = data[{}];", outAt, call("gather_data", dataCoords));
  }
  const std::string ty(clType(data.dtype));
  if (image && data.dtype != ir::DType::F32) return makeError("{}: images hold float data", ir::describeNode(g, n));
  const int64_t count = ir::numElements(out.shape);
  NodeCode c;
  c.launches.push_back(launch("gather_layout",
                              {{"DATA", image ? "__read_only image2d_t data"
                                       : dataL.encoding().plain() ? fmt::format("__global const {}* data", ty)
                                                                  : std::string("__global const uchar* data")},
                               {"T", ty}, {"TI", std::string(clType(idx.dtype))}, {"N", str(count)},
                               {"HELPERS", helpers}, {"INDEX", index}, {"BODY", body}},
                              "gather", {val(layouts && layouts->inputs[0] ? layouts->inputs[0]->value : n.inputs[0]),
                                         val(layouts && layouts->inputs[1] ? layouts->inputs[1]->value : n.inputs[1]),
                                         val(n.outputs[0])},
                              grid1(count, t), {t.workgroup}));
  return c;
}

namespace {

Result<NodeCode> sceLoss(const ir::Graph& g, const ir::Node& n, const Target& t) {
  if (n.input(2) != ir::kNoValue)
    return makeError("{}: class weights are not supported", ir::describeNode(g, n));
  FBL_ASSIGN(SceLossShape sh, sceLossShape(g, n, n.inputs[0], n.inputs[1], t));
  std::vector<ArgRef> rowArgs{val(n.inputs[0]), val(n.inputs[1])};
  std::map<std::string, std::string> vars = sh.vars;
  if (n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue) {
    vars["PARAMS"] = fmt::format("__global const float* x, __global const {}* labels, __global float* logp, "
                                 "__global float* row_loss, __global float* row_w", sh.vars.at("TL"));
    rowArgs.push_back(val(n.outputs[1]));
    vars["LOGPROB"] = "  for (uint c = lid; c < NCLASS; c += WG) logp[base + c * INNER] = x[base + c * INNER] - lse;";
  }
  rowArgs.push_back(scratch(0));
  rowArgs.push_back(scratch(1));
  NodeCode c;
  c.scratch = {{ir::DType::F32, {sh.rows}}, {ir::DType::F32, {sh.rows}}};
  c.launches.push_back(launch("sce_loss", vars, "sceloss", rowArgs, {sh.rows * sh.wg}, {sh.wg}, "_rows"));
  c.launches.push_back(launch("sce_loss", vars, "sceloss", {scratch(0), scratch(1), val(n.outputs[0])},
                              {1}, {1}, "_sum"));
  return c;
}

}  // namespace

bool usesTiledMatmul(const ir::Graph& g, const ir::Node& n) {
  if (n.op != "MatMul" && n.op != "Gemm") return false;
  for (ir::ValueId v : {n.inputs[0], n.inputs[1], n.outputs[0]})
    if (g.values[v].dtype != ir::DType::F32) return false;
  if (n.op == "MatMul") return true;
  // Gemm: alpha and a float bias of rank <= 2 run in the product's store (gemmTerm).
  const bool bias = n.input(2) != ir::kNoValue && n.attrFloat("beta", 1.0f) != 0.0f;
  return !bias || (g.values[n.inputs[2]].dtype == ir::DType::F32 && g.values[n.inputs[2]].shape.size() <= 2);
}

namespace {

// Gemm's alpha * (A B) + beta * C (C broadcast to [M, N], read through its operand layout) as
// GEMM_TERM(v, b, r, c) on the float4 of outputs (r, c..c+3), with its kernel parameter and
// argument; nullopt for alpha 1 and no bias.
Result<std::optional<EpilogueCode>> gemmTerm(const ir::Graph& g, const ir::Node& n, const NodeLayouts* layouts,
                                             int64_t cols) {
  const double alpha = n.attrFloat("alpha", 1.0f), beta = n.attrFloat("beta", 1.0f);
  const bool bias = n.input(2) != ir::kNoValue && beta != 0.0;
  if (!bias && alpha == 1.0) return std::optional<EpilogueCode>();
  EpilogueCode e;
  std::string term = alpha == 1.0 ? "(v)" : fmt::format("(v) * {}", floatLiteral(alpha));
  if (bias) {
    const ir::Value& c = g.values[n.inputs[2]];
    const OperandLayout* ol = layouts && layouts->inputs.size() > 2 && layouts->inputs[2] ? &*layouts->inputs[2] : nullptr;
    const layout::Layout l = ol ? ol->layout : layout::Layout::rowMajor(c.shape);
    if ((ol && (ol->transposed || ol->sign)) || l.storage() != layout::Storage::Buffer)
      return makeError("{}: the bias is read as stored, from a buffer", ir::describeNode(g, n));
    std::string params;
    for (size_t d = 0; d < c.shape.size(); ++d) params += fmt::format("{}uint i{}", d ? ", " : "", d);
    FBL_ASSIGN(std::string off, layout::toOpenCL(l.map().outputs()[0]));
    // C's own index of output (r, c): right-aligned, broadcast where C has extent 1.
    std::vector<std::string> at;
    if (c.shape.size() == 2) at.push_back(c.shape[0] == 1 ? "0u" : "r");
    if (!c.shape.empty()) at.push_back(c.shape.back() == 1 ? "0u" : "c");
    std::string call = "gemm_c_off(";
    for (size_t k = 0; k < at.size(); ++k) call += (k ? ", " : "") + at[k];
    call += ")";
    e.kernel.code = fmt::format("inline uint gemm_c_off({}) {{ return {}; }}\n", params.empty() ? "void" : params, off);
    e.kernel.code += "inline float gemm_c_at(__global const float* p, uint r, uint c) { return p[" + call + "]; }\n";
    e.kernel.code += fmt::format(
        "inline float4 gemm_bias(__global const float* p, uint r, uint c) {{\n"
        "  return (float4)(gemm_c_at(p, r, c), c + 1u < {0}u ? gemm_c_at(p, r, c + 1u) : 0.0f,\n"
        "                  c + 2u < {0}u ? gemm_c_at(p, r, c + 2u) : 0.0f, c + 3u < {0}u ? gemm_c_at(p, r, c + 3u) : 0.0f);\n}}\n",
        cols);
    term += fmt::format(" + {} * gemm_bias(gemm_c, r, c)", floatLiteral(beta));
    e.kernel.params = ", __global const float* restrict gemm_c";
    e.args.push_back(val(ol ? ol->value : n.inputs[2]));
  }
  e.kernel.code += "#define GEMM_TERM(v, b, r, c) (" + term + ")\n";
  return std::optional<EpilogueCode>(std::move(e));
}

}  // namespace

namespace {

// Operand `s` of product `n` as the tiled templates read it, and the value bound to it.
struct BoundOperand {
  MatmulOperand operand;
  ir::ValueId value;
};

Result<BoundOperand> tiledOperand(const ir::Graph& g, const ir::Node& n, int s,
                                  const std::vector<std::optional<OperandLayout>>* inputs) {
  const ir::Shape& shape = g.values[n.inputs[s]].shape;
  const OperandLayout* ol = inputs && s < static_cast<int>(inputs->size()) && (*inputs)[s] ? &*(*inputs)[s] : nullptr;
  layout::Layout stored = ol ? ol->layout : layout::Layout::rowMajor(shape);
  bool transposed = ol && ol->transposed;
  if (n.op == "Gemm" && n.attrInt(s == 0 ? "transA" : "transB", 0) != 0) transposed = !transposed;
  // A read through a map that swaps the last two dims (x W^T with W's Transpose folded) would
  // fetch each texel's 4 columns a whole row apart: read the layout the other way round,
  // through the template's transposed path, where texels are contiguous again (for an image:
  // where a texel's lanes are 4 consecutive columns again).
  if (shape.size() >= 2 && !texelsContiguous(stored)) {
    auto flipped = stored.transposeLastTwo();
    if (flipped.ok() && texelsContiguous(*flipped)) {
      stored = std::move(*flipped);
      transposed = !transposed;
    }
  }
  if (shape.size() == 1) {
    if (transposed) return makeError("{}: a 1-D operand cannot be read transposed", ir::describeNode(g, n));
    FBL_ASSIGN(stored, stored.reshape(s == 0 ? ir::Shape{1, shape[0]} : ir::Shape{shape[0], 1}));
  }
  if (stored.storage() == layout::Storage::Image2D && !texelsContiguous(stored))
    return makeError("{}: operand {} is an image read across its texels ({})", ir::describeNode(g, n), s, stored.str());
  return BoundOperand{{stored, transposed}, ol ? ol->value : n.inputs[s]};
}

// The product's low-rank term (LowRankTerm): its operands, rank and scale.
Result<std::optional<LowRankOperands>> lowRankOperands(const ir::Graph& g, const NodeLayouts* layouts,
                                                       ir::ValueId bound[2]) {
  if (!layouts || !layouts->lowRank) return std::optional<LowRankOperands>();
  const LowRankTerm& term = *layouts->lowRank;
  const ir::Node& p = g.nodes[term.product];
  FBL_ASSIGN(BoundOperand l, tiledOperand(g, p, 0, &term.inputs));
  FBL_ASSIGN(BoundOperand r, tiledOperand(g, p, 1, &term.inputs));
  bound[0] = l.value;
  bound[1] = r.value;
  LowRankOperands out{std::move(l.operand), std::move(r.operand), 0, "1.0f"};
  const ir::Shape& ls = out.lhs.stored.shape();
  out.k = ls[ls.size() - (out.lhs.transposed ? 2 : 1)];
  std::string scale;
  for (ir::NodeId id : term.scales) {
    const ir::Node& mul = g.nodes[id];
    std::optional<std::string> lit;
    for (ir::ValueId v : mul.inputs)
      if (ir::numElements(g.values[v].shape) == 1) lit = scalarLiteral(g.values[v]);
    if (!lit) return makeError("{}: a low-rank term's scale must be a one-element constant", ir::describeNode(g, mul));
    scale += (scale.empty() ? "" : " * ") + *lit;
  }
  if (!scale.empty()) out.scale = scale;
  return std::optional(std::move(out));
}

}  // namespace

// The operands as the template reads them: 1-D operands become a one-row lhs / one-column rhs
// (and the output gets those unit dims back), Gemm's transA/transB and the lowering's transposed
// reads combine (a transposed read of a transposed operand is a plain read).
Result<NodeCode> emitTiledMatmul(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts) {
  const bool gemmOp = n.op == "Gemm";
  std::vector<MatmulOperand> ops;
  ir::ValueId bound[2];
  for (int s = 0; s < 2; ++s) {
    FBL_ASSIGN(BoundOperand b, tiledOperand(g, n, s, layouts ? &layouts->inputs : nullptr));
    ops.push_back(std::move(b.operand));
    bound[s] = b.value;
  }
  ir::ValueId termBound[2] = {ir::kNoValue, ir::kNoValue};
  FBL_ASSIGN(std::optional<LowRankOperands> lowRank, lowRankOperands(g, layouts, termBound));
  const LowRankOperands* term = lowRank ? &*lowRank : nullptr;
  auto rows = [](const MatmulOperand& o) { return o.stored.shape()[o.stored.shape().size() - (o.transposed ? 1 : 2)]; };
  auto cols = [](const MatmulOperand& o) { return o.stored.shape()[o.stored.shape().size() - (o.transposed ? 2 : 1)]; };
  const int64_t M = rows(ops[0]), K = cols(ops[0]), N = cols(ops[1]);
  if (rows(ops[1]) != K) return makeError("{}: inner dimensions {} and {} differ", ir::describeNode(g, n), K, rows(ops[1]));
  // Output as [batch..., M, N] (a 1-D operand's unit dim restored). With an epilogue the kernel
  // writes the last fused step's value (same shape) instead.
  const bool fused = layouts && !layouts->epilogue.empty();
  const ir::ValueId outValue = fused && layouts->epilogueOutput != ir::kNoValue ? layouts->epilogueOutput : n.outputs[0];
  const ir::Value& out = g.values[n.outputs[0]];
  if (g.values[outValue].shape != out.shape)
    return makeError("{}: fused output {} has shape {}, the product {}", ir::describeNode(g, n), g.values[outValue].name,
                     ir::shapeToString(g.values[outValue].shape), ir::shapeToString(out.shape));
  std::optional<EpilogueCode> epi;
  if (fused) {
    FBL_ASSIGN(epi, emitMatmulEpilogue(g, layouts->epilogue, out.shape));
  }
  if (gemmOp) {
    // alpha and the bias come first, then any fused step: EPILOGUE(GEMM_TERM(v)).
    FBL_ASSIGN(std::optional<EpilogueCode> term, gemmTerm(g, n, layouts, N));
    if (term) {
      if (epi) {
        std::string fusedCode = epi->kernel.code;
        const size_t at = fusedCode.find("#define EPILOGUE(");
        FBL_ASSERT(at != std::string::npos);
        fusedCode.replace(at, 17, "#define FUSED_EPILOGUE(");
        term->kernel.code += fusedCode + "#define EPILOGUE(v, b, r, c) FUSED_EPILOGUE(GEMM_TERM(v, b, r, c), b, r, c)\n";
        term->kernel.params += epi->kernel.params;
        term->args.insert(term->args.end(), epi->args.begin(), epi->args.end());
      } else {
        term->kernel.code += "#define EPILOGUE(v, b, r, c) GEMM_TERM(v, b, r, c)\n";
      }
      epi = std::move(term);
    }
  }
  ir::Shape full;
  for (int s = 0; s < 2; ++s) {
    const ir::Shape& st = ops[s].stored.shape();
    const ir::Shape b(st.begin(), st.end() - 2);
    const size_t rank = std::max(full.size(), b.size());
    ir::Shape merged(rank, 1);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t x = d + full.size() >= rank ? full[d + full.size() - rank] : 1;
      const int64_t y = d + b.size() >= rank ? b[d + b.size() - rank] : 1;
      merged[d] = x == 1 ? y : x;
    }
    full = merged;
  }
  full.push_back(M);
  full.push_back(N);
  layout::Layout outL = layouts && !layouts->outputs.empty() && layouts->outputs[0] ? *layouts->outputs[0]
                                                                                  : layout::Layout::rowMajor(out.shape);
  if (outL.shape() != full) {
    FBL_ASSIGN(outL, outL.reshape(full));
  }
  const bool fold = matmulFoldsBatch(ops[0], ops[1], outL, term);
  const int64_t batch = ir::numElements(ir::Shape(full.begin(), full.end() - 2));
  const int64_t mEff = fold ? batch * M : M, bEff = fold ? 1 : batch;
  MatmulCostModel model = t.matmul;
  if (model.computeUnits <= 0) model.computeUnits = t.computeUnits;
  auto toLaunch = [](const RTileKernel& k, std::vector<ArgRef> args) {
    LaunchSpec l{k.source, "", "matmul", std::move(args), {}, {}, {}};
    for (size_t x : k.global) l.global.push_back(static_cast<int64_t>(x));
    for (size_t x : k.local) l.local.push_back(static_cast<int64_t>(x));
    return l;
  };
  NodeCode code;
  // The kernel's arguments after lhs, rhs and out (or partial): the low-rank term's, then the
  // epilogue's (not in a split product, whose sum runs the epilogue).
  auto withExtras = [&](std::vector<ArgRef> args, bool epilogue) {
    if (term) args.insert(args.end(), {val(termBound[0]), val(termBound[1])});
    if (epi && epilogue) args.insert(args.end(), epi->args.begin(), epi->args.end());
    return args;
  };
  if (isNarrowProduct(model, mEff, N)) {
    // Copies of what the product needs: the launch may be re-tiled once the plan builder has
    // batched it.
    auto emit = [M, K, N, ops, outL, epi, lowRank, options = model.narrow, localBytes = model.localMemoryBytes,
                 name = ir::describeNode(g, n)](int64_t products) -> Result<RTileKernel> {
      auto narrow = emitRTileMatmulNarrow("{{NAME}}", M, K, N, ops[0], ops[1], outL, options, localBytes,
                                          epi ? &epi->kernel : nullptr, lowRank ? &*lowRank : nullptr, products);
      if (!narrow.ok()) return makeError("{}: {}", name, narrow.error().message);
      return narrow;
    };
    FBL_ASSIGN(RTileKernel narrow, emit(1));
    LaunchSpec launch = toLaunch(narrow, withExtras({val(bound[0]), val(bound[1]), val(outValue)}, true));
    if (narrow.chunkArrivals > 0) {
      // K in chunks: the tiles' partial sums, and their counts of groups done (kept zero).
      code.scratch.push_back({ir::DType::F32, {narrow.chunkPartialFloats}});
      code.scratch.push_back({ir::DType::I32, {narrow.chunkArrivals}, true});
      launch.args.insert(launch.args.end(), {scratch(0), scratch(1)});
      code.launches.push_back(std::move(launch));  // not batched: its scratch is its own
      return code;
    }
    launch.productParams = narrow.productParams;
    launch.tiledForBatch = [emit = std::move(emit), toLaunch,
                            args = launch.args](int64_t products) -> Result<LaunchSpec> {
      FBL_ASSIGN(RTileKernel batched, emit(products));
      LaunchSpec l = toLaunch(batched, args);
      l.productParams = batched.productParams;
      return l;
    };
    code.launches.push_back(std::move(launch));
    return code;
  }
  const MatmulSchedule schedule = chooseMatmulSchedule(model, t.tuning.matmulTile, mEff, N, K, bEff);
  // One product launch (and its split-K sum) per part of the schedule: its columns of the output.
  auto emitPart = [&](const MatmulTiling& tiling, ColumnRange cols) -> Status {
    const bool split = tiling.splitK > 1;
    std::array<MatmulOperand, 2> staged = {ops[0], ops[1]};
    chooseStaging(M, K, N, staged[0], staged[1], tiling, t.wave, t.textureL1s);
    auto kernel = emitRTileMatmul("{{NAME}}", M, K, N, staged[0], staged[1], outL, tiling,
                                  epi && !split ? &epi->kernel : nullptr, cols, term);
    if (!kernel.ok()) return makeError("{}: {}", ir::describeNode(g, n), kernel.error().message);
    if (!split) {
      code.launches.push_back(toLaunch(*kernel, withExtras({val(bound[0]), val(bound[1]), val(outValue)}, true)));
      return {};
    }
    const auto partial = static_cast<int32_t>(code.scratch.size());
    code.scratch.push_back({ir::DType::F32, {bEff * tiling.splitK * mEff * (cols.end - cols.begin)}});
    code.launches.push_back(toLaunch(*kernel, withExtras({val(bound[0]), val(bound[1]), scratch(partial)}, false)));
    layout::Layout sumOut = outL;
    if (fold) {
      FBL_ASSIGN(sumOut, outL.reshape({mEff, N}));
    }
    auto sum = emitRTileSplitKSum("{{NAME}}", mEff, N, tiling.splitK, sumOut, epi ? &epi->kernel : nullptr,
                                  t.tuning.splitKSumWorkgroup, cols);
    if (!sum.ok()) return makeError("{}: {}", ir::describeNode(g, n), sum.error().message);
    LaunchSpec l = toLaunch(*sum, {scratch(partial), val(outValue)});
    if (epi) l.args.insert(l.args.end(), epi->args.begin(), epi->args.end());
    l.tag = "splitk";
    code.launches.push_back(std::move(l));
    return {};
  };
  FBL_TRY(emitPart(schedule.main, {0, schedule.mainCols}));
  if (schedule.mainCols < N) FBL_TRY(emitPart(schedule.tail, {schedule.mainCols, N}));
  return code;
}

std::vector<EmitterEntry> computeEmitters() {
  return {{"MatMul", matmul},
          {"Gemm", matmul},
          {"ReduceMean", reduce},
          {"ReduceSum", reduce},
          {"ReduceMax", reduce},
          {"ReduceMin", reduce},
          {"ReduceProd", reduce},
          {"ReduceSumSquare", reduce},
          {"Softmax", softmax},
          {"LogSoftmax", softmax},
          {"LayerNormalization", layerNorm},
          {"Gather", gather},
          {"GatherElements", gather},
          {"SoftmaxCrossEntropyLoss", sceLoss}};
}

}  // namespace fbl::codegen
