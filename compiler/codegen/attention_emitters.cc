// fbl.Attention and fbl.AttentionGrad (compiler/autodiff/attention.h) as the flash kernel pair:
//   1. the tilings: forward, TD work-items per row so that each holds at most 16 (GPU) or 32
//      head dims, ROWS rows a work-group (about 128 work-items on GPUs), COLS-row tiles as large
//      as local memory allows (attentionTiling); backward, square tiles register-blocked like a
//      GEMM, GQA heads split over work-groups where the device would idle (attentionGradTiling);
//   2. one access function per operand, offX(b, h, i, d) -> buffer offset: the operand's layout
//      (a read-through view, an R-Tile buffer, row-major) composed with the identity, or for a
//      mask with its broadcast from [B, H, Sq, Sk];
//   3. forward: one launch of flash_attention.cl; backward: _rowterm, then _dq (when dq is
//      wanted), _dkdv and (split GQA heads) _dkdv_sum of flash_attention_grad.cl; an unwanted dk
//      or dv goes to scratch.
#include <fmt/format.h>

#include "compiler/autodiff/attention.h"
#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/operand_layout.h"
#include "compiler/codegen/templates.h"

namespace fbl::codegen {

namespace {

using autodiff::AttentionDims;

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

AttentionTiling attentionTiling(int64_t headDim, int64_t valueDim, const Target& t) {
  const bool gpu = t.deviceClass == DeviceClass::kGpu;
  AttentionTiling a;
  // GPUs: at most 16 dims a work-item, so a 128-work-item group covers 32 rows at head_dim 64
  // and a 512-token head still has 16 query blocks (parallelism over SMs, few registers).
  const int64_t maxDims = gpu ? 16 : 32;
  while ((headDim / a.td > maxDims || valueDim / a.td > maxDims) && headDim % (2 * a.td) == 0 &&
         valueDim % (2 * a.td) == 0)
    a.td *= 2;
  a.rows = std::max<int64_t>(8, (gpu ? 128 : 32) / a.td);
  // Local floats: key and value tiles of COLS padded rows, the padded partial-sum planes. The
  // budget is 5/6 of the profile's local memory (the H200: 40 KB of 48), else 16 KB, which
  // phones (32 KB: Adreno, Mali) and Oclgrind run; CPUs 32 KB.
  const int64_t known = t.matmul.localMemoryBytes;
  const int64_t budget = (known > 0 ? known * 5 / 6 : gpu ? 16 * 1024 : 32 * 1024) / 4;
  auto floats = [&] { return a.cols * (headDim + 1 + valueDim + 1 + a.rows * a.td) + 32; };
  a.cols = gpu ? 64 : 16;
  while (a.cols > 4 && floats() > budget) a.cols /= 2;
  while (a.rows > 1 && floats() > budget) a.rows /= 2;
  return a;
}

AttentionGradTiling attentionGradTiling(const autodiff::AttentionDims& d, const Target& t) {
  const bool gpu = t.deviceClass == DeviceClass::kGpu;
  AttentionGradTiling a;
  // Local floats: the block's and the streamed tiles of padded rows (q, dO, k, v) over one chunk
  // of the head dims, P and dS, the streamed rows' lse and row terms (_dkdv, the larger kernel).
  // The largest tile that fits the profile's local memory (else 16 KB on GPUs, 32 KB on CPUs), at
  // most 32: two 32-row tiles already give each work-item a 2 x 4 block of scores to reuse its
  // local reads over. A tile that does not fit with whole rows takes the head dims in chunks (at
  // least 16 dims each, so that staging stays coalesced): Gemma's head_dim 256 on the H200 gets
  // 32-row tiles in 4 chunks instead of 8-row tiles with whole rows.
  const int64_t known = t.matmul.localMemoryBytes;
  const int64_t budget = (known > 0 ? known : gpu ? 16 * 1024 : 32 * 1024) / 4;
  auto floats = [&](int64_t tile, int64_t chunks) {
    return 2 * tile * (d.headDim / chunks + 1 + d.valueDim / chunks + 1) + 2 * tile * (tile + 1) + 2 * tile;
  };
  auto canHalve = [&](int64_t chunks) {
    const int64_t next = 2 * chunks;
    return d.headDim % next == 0 && d.valueDim % next == 0 && d.headDim / next >= 16 && d.valueDim / next >= 16;
  };
  for (a.tile = 32;; a.tile /= 2) {
    for (a.chunks = 1; floats(a.tile, a.chunks) > budget && canHalve(a.chunks);) a.chunks *= 2;
    if (floats(a.tile, a.chunks) <= budget || a.tile == 1) break;
  }
  a.scoreCols = std::min<int64_t>(8, a.tile);
  // The widest power of two up to 16 that divides both chunk widths: work-items ox, ox + EX, ...
  const int64_t chunkDim = d.headDim / a.chunks, chunkValueDim = d.valueDim / a.chunks;
  a.gradDims = 1;
  while (a.gradDims < 16 && chunkDim % (2 * a.gradDims) == 0 && chunkValueDim % (2 * a.gradDims) == 0)
    a.gradDims *= 2;
  // Work-groups of 128 on GPUs (64 on CPUs), more where a work-item would otherwise hold over 64
  // gradient accumulators (they must stay in registers), fewer where the tile cannot give every
  // work-item whole rows in both stages.
  a.workItems = gpu ? 128 : 64;
  while (a.tile * (d.headDim + d.valueDim) / a.workItems > 64 && a.workItems < 256) a.workItems *= 2;
  a.gradDims = std::min(a.gradDims, a.workItems);
  auto fits = [&] {
    const int64_t sy = a.workItems / a.scoreCols, oy = a.workItems / a.gradDims;
    return sy > 0 && oy > 0 && a.tile % sy == 0 && a.tile % oy == 0;
  };
  while (a.workItems > 1 && !fits()) {
    a.workItems /= 2;
    a.scoreCols = std::min(a.scoreCols, a.workItems);
    a.gradDims = std::min(a.gradDims, a.workItems);
  }
  // A GQA group's heads share their key block's work-group unless that leaves the device short
  // of work-groups (fewer than two per compute unit); then each head gets its own and a last
  // kernel sums the partials.
  const int64_t keyBlocks = (d.kvLen + a.tile - 1) / a.tile;
  a.splitGroups = d.group() > 1 && keyBlocks * d.batch * d.kvHeads < 2 * t.computeUnits;
  return a;
}

namespace {

struct Operand {
  ir::ValueId value = ir::kNoValue;
  layout::Layout layout = layout::Layout::rowMajor({});
};

// The value bound to input `slot` and the layout it is read through.
Result<Operand> inputOperand(const ir::Graph& g, const ir::Node& n, size_t slot, const NodeLayouts* layouts) {
  if (layouts && slot < layouts->inputs.size() && layouts->inputs[slot]) {
    const OperandLayout& ol = *layouts->inputs[slot];
    if (ol.transposed || ol.sign)
      return makeError("{}: input {} cannot be read transposed or signed", ir::describeNode(g, n), slot);
    return Operand{ol.value, ol.layout};
  }
  return Operand{n.inputs[slot], layout::Layout::rowMajor(g.values[n.inputs[slot]].shape)};
}

layout::Layout outputLayout(const ir::Graph& g, const ir::Node& n, size_t o, const NodeLayouts* layouts) {
  if (layouts && o < layouts->outputs.size() && layouts->outputs[o]) return *layouts->outputs[o];
  return layout::Layout::rowMajor(g.values[n.outputs[o]].shape);
}

// inline uint <fn>(uint ib, uint ih, uint ii, uint id): the offset of element (ib, ih, ii, id) of
// the index space `over` in `l`, whose logical shape `over` broadcasts to (right-aligned).
Result<std::string> accessFn(const std::string& fn, const layout::Layout& l, const ir::Shape& over) {
  if (l.storage() != layout::Storage::Buffer)
    return makeError("{} is laid out as {}: the attention kernels read buffers", fn, l.str());
  static const char* names[] = {"ib", "ih", "ii", "id"};
  const ir::Shape& own = l.shape();
  if (own.size() > over.size()) return makeError("{}: layout {} has more dims than {}", fn, l.str(), ir::shapeToString(over));
  const size_t lead = over.size() - own.size();
  std::vector<layout::Expr> outs;
  for (size_t d = 0; d < own.size(); ++d) {
    const int64_t ext = over[lead + d];
    if (own[d] == 1) outs.push_back(layout::Expr::constant(0));
    else if (own[d] == ext) outs.push_back(layout::Expr::var(static_cast<int>(lead + d), ext, names[lead + d]));
    else return makeError("{}: {} does not broadcast to {}", fn, ir::shapeToString(own), ir::shapeToString(over));
  }
  FBL_ASSIGN(layout::Layout seen, l.compose(layout::IndexMap(over, std::move(outs), own)));
  FBL_ASSIGN(std::string off, layout::toOpenCL(seen.map().outputs()[0]));
  std::string params;
  for (size_t d = 0; d < over.size(); ++d) params += fmt::format("{}uint {}", d ? ", " : "", names[d]);
  return fmt::format("inline uint {}({}) {{ return {}; }}\n", fn, params, off);
}

std::map<std::string, std::string> commonHoles(const AttentionDims& d, bool hasMask) {
  return {{"H", str(d.heads)},
          {"HKV", str(d.kvHeads)},
          {"GROUP", str(d.group())},
          {"SQ", str(d.qLen)},
          {"SK", str(d.kvLen)},
          {"D", str(d.headDim)},
          {"DV", str(d.valueDim)},
          {"CAUSAL", d.causal ? "1" : "0"},
          {"WINDOW", str(d.window)},
          {"HAS_SOFTCAP", d.softcap > 0 ? "1" : "0"},
          {"SOFTCAP", floatLiteral(d.softcap > 0 ? d.softcap : 1.0f)},
          {"HAS_MASK", hasMask ? "1" : "0"},
          {"MASK", hasMask ? "mask" : "0"},
          {"SCALE", floatLiteral(d.scale)}};
}

std::string common(std::map<std::string, std::string> holes, const std::string& access) {
  holes["ACCESS"] = access;
  return instantiate(kernelTemplate("flash_attention_common"), holes);
}

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

Result<NodeCode> emitAttention(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts) {
  const bool backward = n.op == "fbl.AttentionGrad";
  const size_t q = backward ? 1 : 0;  // slot of q
  auto dims = autodiff::attentionDims(n, g.values[n.inputs[q]].shape, g.values[n.inputs[q + 1]].shape,
                                      g.values[n.inputs[q + 2]].shape);
  if (!dims.ok()) return makeError("{}: {}", ir::describeNode(g, n), dims.error().message);
  const AttentionDims& d = *dims;
  const size_t maskSlot = backward ? 6 : 3;
  const bool hasMask = n.input(maskSlot) != ir::kNoValue;
  const ir::Shape full{d.batch, d.heads, d.qLen, d.kvLen};
  const int64_t bh = d.batch * d.heads;

  // Inputs by name: slot, access function.
  std::vector<std::pair<std::string, size_t>> ins =
      backward ? std::vector<std::pair<std::string, size_t>>{{"DO", 0}, {"Q", 1}, {"K", 2}, {"V", 3}, {"O", 4}, {"Lse", 5}}
               : std::vector<std::pair<std::string, size_t>>{{"Q", 0}, {"K", 1}, {"V", 2}};
  std::map<std::string, ArgRef> arg;
  std::string access;
  for (const auto& [name, slot] : ins) {
    FBL_ASSIGN(Operand op, inputOperand(g, n, slot, layouts));
    FBL_ASSIGN(std::string fn, accessFn("off" + name, op.layout, g.values[n.inputs[slot]].shape));
    access += fn;
    arg[name] = val(op.value);
  }
  if (hasMask) {
    FBL_ASSIGN(Operand op, inputOperand(g, n, maskSlot, layouts));
    FBL_ASSIGN(std::string fn, accessFn("offMask", op.layout, full));
    access += fn;
    arg["Mask"] = val(op.value);
  }
  NodeCode code;
  const std::string maskParam = hasMask ? "__global const float* mask, " : "";
  if (!backward) {
    for (const auto& [name, o] : std::vector<std::pair<std::string, size_t>>{{"O", 0}, {"Lse", 1}}) {
      if (o >= n.outputs.size() || n.outputs[o] == ir::kNoValue)
        return makeError("{}: the forward kernel writes o and lse; both outputs must exist", ir::describeNode(g, n));
      FBL_ASSIGN(std::string fn, accessFn("off" + name, outputLayout(g, n, o, layouts), g.values[n.outputs[o]].shape));
      access += fn;
      arg[name] = val(n.outputs[o]);
    }
    const AttentionTiling a = attentionTiling(d.headDim, d.valueDim, t);
    auto holes = commonHoles(d, hasMask);
    const std::string params = "__global const float* q, __global const float* k, __global const float* v, " + maskParam +
                               "__global float* o, __global float* lse";
    std::vector<ArgRef> args{arg["Q"], arg["K"], arg["V"]};
    if (hasMask) args.push_back(arg["Mask"]);
    args.insert(args.end(), {arg["O"], arg["Lse"]});
    code.launches.push_back(launch("flash_attention",
                                   {{"COMMON", common(holes, access)},
                                    {"PARAMS", params},
                                    {"ROWS", str(a.rows)},
                                    {"COLS", str(a.cols)},
                                    {"TD", str(a.td)}},
                                   "attention",
                                   std::move(args), {roundUp(d.qLen, a.rows) / a.rows * a.rows * a.td, bh},
                                   {a.rows * a.td, 1}));
    return code;
  }
  // Backward: scratch 0 holds the row terms; unwanted dk/dv go to scratch as well.
  code.scratch.push_back({ir::DType::F32, {bh * d.qLen}});
  const char* gradNames[] = {"DQ", "DK", "DV"};
  for (size_t o = 0; o < 3; ++o) {
    const bool wanted = o < n.outputs.size() && n.outputs[o] != ir::kNoValue;
    const ir::Shape& shape = g.values[n.inputs[o + 1]].shape;
    if (!wanted && o == 0) continue;
    if (!wanted) {
      code.scratch.push_back({ir::DType::F32, shape});
      arg[gradNames[o]] = scratch(static_cast<int32_t>(code.scratch.size() - 1));
      FBL_ASSIGN(std::string fn, accessFn(std::string("off") + gradNames[o], layout::Layout::rowMajor(shape), shape));
      access += fn;
      continue;
    }
    FBL_ASSIGN(std::string fn, accessFn(std::string("off") + gradNames[o], outputLayout(g, n, o, layouts), shape));
    access += fn;
    arg[gradNames[o]] = val(n.outputs[o]);
  }
  const bool wantsDq = !n.outputs.empty() && n.outputs[0] != ir::kNoValue;
  if (!wantsDq) access += "inline uint offDQ(uint ib, uint ih, uint ii, uint id) { return 0u; }\n";
  const AttentionGradTiling a = attentionGradTiling(d, t);
  auto holes = commonHoles(d, hasMask);
  const std::string in = "__global const float* dout, __global const float* q, __global const float* k, "
                         "__global const float* v, __global const float* lse, " + maskParam + "__global const float* dr, ";
  const std::map<std::string, std::string> vars{
      {"COMMON", common(holes, access)},
      {"BATCH", str(d.batch)},
      {"TILE", str(a.tile)},
      {"WG", str(a.workItems)},
      {"SX", str(a.scoreCols)},
      {"EX", str(a.gradDims)},
      {"NCH", str(a.chunks)},
      {"SPLIT_GROUP", a.splitGroups ? "1" : "0"},
      {"ROWTERM_PARAMS", "__global const float* dout, __global const float* o, __global float* dr"},
      {"DQ_PARAMS", in + "__global float* dq"},
      {"DKDV_PARAMS", in + "__global float* dkOut, __global float* dvOut"}};
  std::vector<ArgRef> common{arg["DO"], arg["Q"], arg["K"], arg["V"], arg["Lse"]};
  if (hasMask) common.push_back(arg["Mask"]);
  common.push_back(scratch(0));
  const int64_t wg = a.workItems;
  code.launches.push_back(launch("flash_attention_grad", vars, "attention", {arg["DO"], arg["O"], scratch(0)},
                                 grid1(bh * d.qLen, t), {t.workgroup}, "_rowterm"));
  if (wantsDq) {
    std::vector<ArgRef> args = common;
    args.push_back(arg["DQ"]);
    code.launches.push_back(launch("flash_attention_grad", vars, "attention", std::move(args),
                                   {roundUp(d.qLen, a.tile) / a.tile * wg, bh}, {wg, 1}, "_dq"));
  }
  const std::vector<int64_t> keyBlocks{roundUp(d.kvLen, a.tile) / a.tile * wg,
                                       a.splitGroups ? bh : d.batch * d.kvHeads};
  std::vector<ArgRef> args = common;
  if (!a.splitGroups) {
    args.insert(args.end(), {arg["DK"], arg["DV"]});
    code.launches.push_back(launch("flash_attention_grad", vars, "attention", std::move(args), keyBlocks, {wg, 1}, "_dkdv"));
    return code;
  }
  // Per-head partials, then their sums per key/value head.
  const auto dkPart = static_cast<int32_t>(code.scratch.size());
  code.scratch.push_back({ir::DType::F32, {bh, d.kvLen, d.headDim}});
  code.scratch.push_back({ir::DType::F32, {bh, d.kvLen, d.valueDim}});
  args.insert(args.end(), {scratch(dkPart), scratch(dkPart + 1)});
  code.launches.push_back(launch("flash_attention_grad", vars, "attention", std::move(args), keyBlocks, {wg, 1}, "_dkdv"));
  code.launches.push_back(launch("flash_attention_grad", vars, "attention",
                                 {scratch(dkPart), scratch(dkPart + 1), arg["DK"], arg["DV"]},
                                 grid1(d.batch * d.kvHeads * d.kvLen * (d.headDim + d.valueDim), t), {t.workgroup},
                                 "_dkdv_sum"));
  return code;
}

bool isAttentionOp(std::string_view op) { return op == "fbl.Attention" || op == "fbl.AttentionGrad"; }

Result<NodeCode> emitAttentionNode(const ir::Graph& g, const ir::Node& n, const Target& t) {
  return emitAttention(g, n, t, nullptr);
}

}  // namespace fbl::codegen
