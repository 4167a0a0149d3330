// fbl.Attention and fbl.AttentionGrad (compiler/ops/attention.h) as the flash kernel pair:
//   1. the tilings: square tiles register-blocked like a GEMM, as large as local memory allows
//      with the head dims in chunks where needed (attentionTiling, attentionGradTiling); where
//      the device would idle, backward GQA heads get work-groups of their own, and every
//      kernel's streamed range splits among several work-groups (streamSplits);
//   2. one access function per operand, offX(b, h, i, d) -> buffer offset: the operand's layout
//      (a read-through view, an R-Tile buffer, row-major) composed with the identity, or for a
//      mask with its broadcast from [B, H, Sq, Sk];
//   3. forward: flash_attention.cl (with splits, then _combine); backward: _rowterm, then _dq
//      (when dq is wanted; with splits, then _dq_sum), _dkdv and (split GQA heads or splits)
//      _dkdv_sum of flash_attention_grad.cl; partials, row terms and an unwanted dk or dv go to
//      scratch.
#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/index_code.h"
#include "compiler/codegen/operand_layout.h"
#include "compiler/codegen/templates.h"
#include "compiler/ops/attention.h"
#include "compiler/support/int_math.h"

namespace fbl::codegen {

namespace {

using ops::AttentionDims;

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

namespace {

constexpr int64_t kMaxStreamSplits = 16;

// The block tiling both kernels share, from the profile's numbers (t.tuning.attention): the
// largest tile (a power of two up to max_tile, 32 in every profile: two 32-row tiles already give
// each work-item a 2 x 4 block of scores to reuse its local reads over) whose local floats
// (`localFloats(tile, chunks)`) fit the local budget (local_bytes). Whole rows are preferred down to 8-row tiles; below that the head dims pass in
// chunks of at least 16 dims (so that staging stays coalesced), which is what phones need at
// head_dim 256. On the H200, chunks that kept Gemma's head_dim 256 at 32-row tiles lost to 8-row
// tiles with whole rows (docs/kernels.md): a chunk adds a staging round and two barriers, and
// 32-row blocks left one work-group per SM. `accumulatorDims`: the head dims a row accumulates
// (o: dv; dk and dv: d + dv), at most max_accumulators of which a work-item holds.
// `minWholeTile`: the smallest tile taken with whole rows before chunks are tried.
template <typename LocalFloats>
AttentionTiling blockTiling(const AttentionDims& d, const Target& t, LocalFloats localFloats, int64_t accumulatorDims,
                            int64_t minWholeTile = 8) {
  const AttentionTuning& at = t.tuning.attention;
  const int64_t budget = at.localBytes / 4;
  auto canHalve = [&](int64_t chunks) {
    const int64_t next = 2 * chunks;
    return d.headDim % next == 0 && d.valueDim % next == 0 && d.headDim / next >= 16 && d.valueDim / next >= 16;
  };
  AttentionTiling a;
  for (a.tile = at.maxTile; a.tile > minWholeTile && localFloats(a.tile, 1) > budget;) a.tile /= 2;
  if (localFloats(a.tile, 1) > budget) {
    for (a.tile = at.maxTile;; a.tile /= 2) {
      for (a.chunks = 1; localFloats(a.tile, a.chunks) > budget && canHalve(a.chunks);) a.chunks *= 2;
      if (localFloats(a.tile, a.chunks) <= budget || a.tile == 1) break;
    }
  }
  a.scoreCols = std::min<int64_t>(8, a.tile);
  // The widest power of two up to 16 that divides both chunk widths: work-items ox, ox + EX, ...
  const int64_t chunkDim = d.headDim / a.chunks, chunkValueDim = d.valueDim / a.chunks;
  a.accumulatorDims = 1;
  while (a.accumulatorDims < 16 && chunkDim % (2 * a.accumulatorDims) == 0 &&
         chunkValueDim % (2 * a.accumulatorDims) == 0)
    a.accumulatorDims *= 2;
  // Work-groups of work_items (GPUs 128, CPUs 64), more (up to max_work_items) where a work-item
  // would otherwise hold over max_accumulators (they must stay in registers), fewer where the
  // tile cannot give every work-item whole rows in both stages.
  a.workItems = at.workItems;
  while (a.tile * accumulatorDims / a.workItems > at.maxAccumulators && a.workItems < at.maxWorkItems) a.workItems *= 2;
  a.accumulatorDims = std::min(a.accumulatorDims, a.workItems);
  auto fits = [&] {
    const int64_t sy = a.workItems / a.scoreCols, oy = a.workItems / a.accumulatorDims;
    return sy > 0 && oy > 0 && a.tile % sy == 0 && a.tile % oy == 0;
  };
  while (a.workItems > 1 && !fits()) {
    a.workItems /= 2;
    a.scoreCols = std::min(a.scoreCols, a.workItems);
    a.accumulatorDims = std::min(a.accumulatorDims, a.workItems);
  }
  return a;
}

// How many work-groups share each block's streamed range of `streamTiles` tiles, given `groups`
// blocks (all of the launch's work-groups at one split): the smallest power of two that gives the
// device the profile's attention.min_groups_per_unit per compute unit, while every split keeps
// at least two tiles of the range (the causal mask hides about half of them). Without splits a
// block's tiles run one after another on one SM: Gemma2's 8-row forward blocks at 512 tokens are
// 512 work-groups for 132 SMs, and at 8 groups per unit its attention took 22.1 instead of 37.8 ms
// of a step on the H200 (docs/measurements/tuning-h200/attention-splits/).
int64_t streamSplits(const Target& t, int64_t groups, int64_t streamTiles) {
  const int64_t perUnit = t.tuning.attention.minGroupsPerUnit;
  if (perUnit <= 0 || t.computeUnits <= 0) return 1;
  int64_t splits = 1;
  while (groups * splits < perUnit * t.computeUnits && streamTiles >= 2 * (2 * splits) && splits < kMaxStreamSplits)
    splits *= 2;
  return splits;
}


}  // namespace

AttentionTiling attentionTiling(const AttentionDims& d, const Target& t) {
  // Local floats: the query and key tiles over one chunk, the value tile over one chunk, P, and
  // each score work-item's row maxima and sums.
  auto localFloats = [&](int64_t tile, int64_t chunks) {
    return 2 * tile * (d.headDim / chunks + 1) + tile * (d.valueDim / chunks + 1) + tile * (tile + 1) +
           2 * tile * std::min<int64_t>(8, tile);
  };
  AttentionTiling a = blockTiling(d, t, localFloats, d.valueDim, t.tuning.attention.minWholeTile);
  a.splits = streamSplits(t, ceilDiv(d.qLen, a.tile) * d.batch * d.heads, ceilDiv(d.kvLen, a.tile));
  return a;
}

namespace {

// Local floats of a backward kernel (_dkdv, the larger, sets the budget): the block's and the
// streamed tiles (q, dO, k, v) over one chunk, P and dS, the streamed rows' lse (max and
// log-sum) and row terms.
int64_t gradLocalFloats(const AttentionDims& d, int64_t tile, int64_t chunks) {
  return 2 * tile * (d.headDim / chunks + 1 + d.valueDim / chunks + 1) + 2 * tile * (tile + 1) + 3 * tile;
}

}  // namespace

AttentionTiling attentionDqTiling(const AttentionDims& d, const Target& t) {
  // The _dq kernel's own tiling, where the profile asks whole rows of it at larger tiles than of
  // the others (kernels.attention.dq_min_whole_tile): on the H200 Gemma2's dq (head_dim 256)
  // took 0.45 ms a layer in 32-row tiles of 4 chunks against 0.64 in 8-row whole tiles, while
  // its dk/dv and forward lost with chunks (docs/kernels.md).
  auto localFloats = [&](int64_t tile, int64_t chunks) { return gradLocalFloats(d, tile, chunks); };
  AttentionTiling a = blockTiling(d, t, localFloats, d.headDim + d.valueDim, t.tuning.attention.dqMinWholeTile);
  a.splits = streamSplits(t, ceilDiv(d.qLen, a.tile) * d.batch * d.heads, ceilDiv(d.kvLen, a.tile));
  return a;
}

AttentionTiling attentionGradTiling(const AttentionDims& d, const Target& t) {
  auto localFloats = [&](int64_t tile, int64_t chunks) { return gradLocalFloats(d, tile, chunks); };
  AttentionTiling a = blockTiling(d, t, localFloats, d.headDim + d.valueDim, t.tuning.attention.minWholeTile);
  // A GQA group's heads share their key block's work-group unless that leaves the device short
  // of work-groups (fewer than two per compute unit); then each head gets its own and a last
  // kernel sums the partials. Where that is still short, each block's heads x query tiles split.
  const int64_t keyBlocks = ceilDiv(d.kvLen, a.tile);
  a.splitGroups = d.group() > 1 && keyBlocks * d.batch * d.kvHeads < 2 * t.computeUnits;
  const int64_t blockHeads = a.splitGroups ? 1 : d.group();
  a.splits = streamSplits(t, keyBlocks * d.batch * d.heads / blockHeads, blockHeads * ceilDiv(d.qLen, a.tile));
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

std::map<std::string, std::string> commonHoles(const AttentionDims& d, bool hasMask, const AttentionTiling& a) {
  return {{"TILE", str(a.tile)},
          {"WG", str(a.workItems)},
          {"SX", str(a.scoreCols)},
          {"EX", str(a.accumulatorDims)},
          {"NCH", str(a.chunks)},
          {"SPLITS", str(a.splits)},
          {"BH", str(d.batch * d.heads)},
          {"H", str(d.heads)},
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

}  // namespace

Result<NodeCode> emitAttention(const ir::Graph& g, const ir::Node& n, const Target& t, const NodeLayouts* layouts) {
  const bool backward = n.op == "fbl.AttentionGrad";
  const size_t q = backward ? 1 : 0;  // slot of q
  auto dims = ops::attentionDims(n, g.values[n.inputs[q]].shape, g.values[n.inputs[q + 1]].shape,
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
    const AttentionTiling a = attentionTiling(d, t);
    const std::string in = "__global const float* q, __global const float* k, __global const float* v, " + maskParam;
    std::vector<ArgRef> args{arg["Q"], arg["K"], arg["V"]};
    if (hasMask) args.push_back(arg["Mask"]);
    const std::map<std::string, std::string> vars{
        {"COMMON", common(commonHoles(d, hasMask, a), access)},
        {"PARAMS", in + (a.splits > 1 ? "__global float* oPart, __global float* mPart, __global float* sumPart"
                                      : "__global float* o, __global float* lse")}};
    // With splits, each split's o, row max and row sum go to scratch, and _combine writes o, lse.
    if (a.splits > 1) {
      code.scratch.push_back({ir::DType::F32, {a.splits, bh, d.qLen, d.valueDim}});
      code.scratch.push_back({ir::DType::F32, {a.splits, bh, d.qLen}});
      code.scratch.push_back({ir::DType::F32, {a.splits, bh, d.qLen}});
      args.insert(args.end(), {scratch(0), scratch(1), scratch(2)});
    } else {
      args.insert(args.end(), {arg["O"], arg["Lse"]});
    }
    code.launches.push_back(launch("flash_attention", vars, "attention", std::move(args),
                                   {ceilDiv(d.qLen, a.tile) * a.splits * a.workItems, bh}, {a.workItems, 1}));
    if (a.splits > 1)
      code.launches.push_back(launch("flash_attention", vars, "attention",
                                     {scratch(0), scratch(1), scratch(2), arg["O"], arg["Lse"]},
                                     grid1(bh * d.qLen * d.valueDim, t), {t.workgroup}, "_combine"));
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
  const AttentionTiling a = attentionGradTiling(d, t);
  const int64_t rowTermGroup = reduceGroupSize(d.valueDim, t);
  const std::string in = "__global const float* dout, __global const float* q, __global const float* k, "
                         "__global const float* v, __global const float* lse, " + maskParam + "__global const float* dr, ";
  const std::map<std::string, std::string> vars{
      {"COMMON", common(commonHoles(d, hasMask, a), access)},
      {"BATCH", str(d.batch)},
      {"RT_WG", str(rowTermGroup)},
      {"SPLIT_GROUP", a.splitGroups ? "1" : "0"},
      {"ROWTERM_PARAMS", "__global const float* dout, __global const float* o, __global float* dr"},
      {"DQ_PARAMS", in + "__global float* dq"},
      {"DKDV_PARAMS", in + "__global float* dkOut, __global float* dvOut"}};
  const AttentionTiling aq = attentionDqTiling(d, t);
  std::map<std::string, std::string> dqVars = vars;
  dqVars["COMMON"] = common(commonHoles(d, hasMask, aq), access);
  std::vector<ArgRef> common{arg["DO"], arg["Q"], arg["K"], arg["V"], arg["Lse"]};
  if (hasMask) common.push_back(arg["Mask"]);
  common.push_back(scratch(0));
  const int64_t wg = a.workItems;
  code.launches.push_back(launch("flash_attention_grad", vars, "attention", {arg["DO"], arg["O"], scratch(0)},
                                 rowGrid(bh * d.qLen, rowTermGroup, t), {rowTermGroup > 1 ? rowTermGroup : t.workgroup},
                                 "_rowterm"));
  if (wantsDq) {
    // With splits, each split's partial dq goes to scratch and _dq_sum adds them.
    const ArgRef dqPart = scratch(static_cast<int32_t>(code.scratch.size()));
    if (aq.splits > 1) code.scratch.push_back({ir::DType::F32, {aq.splits, bh, d.qLen, d.headDim}});
    std::vector<ArgRef> args = common;
    args.push_back(aq.splits > 1 ? dqPart : arg["DQ"]);
    code.launches.push_back(launch("flash_attention_grad", dqVars, "attention", std::move(args),
                                   {ceilDiv(d.qLen, aq.tile) * aq.splits * aq.workItems, bh}, {aq.workItems, 1}, "_dq"));
    if (aq.splits > 1)
      code.launches.push_back(launch("flash_attention_grad", dqVars, "attention", {dqPart, arg["DQ"]},
                                     grid1(bh * d.qLen * d.headDim, t), {t.workgroup}, "_dq_sum"));
  }
  const int64_t blockRows = a.splitGroups ? bh : d.batch * d.kvHeads;
  const std::vector<int64_t> keyBlocks{ceilDiv(d.kvLen, a.tile) * a.splits * wg, blockRows};
  std::vector<ArgRef> args = common;
  if (!a.splitGroups && a.splits == 1) {
    args.insert(args.end(), {arg["DK"], arg["DV"]});
    code.launches.push_back(launch("flash_attention_grad", vars, "attention", std::move(args), keyBlocks, {wg, 1}, "_dkdv"));
    return code;
  }
  // Partials per split and (split GQA heads) per query head, then their sums per key/value head.
  const auto dkPart = static_cast<int32_t>(code.scratch.size());
  code.scratch.push_back({ir::DType::F32, {a.splits * blockRows, d.kvLen, d.headDim}});
  code.scratch.push_back({ir::DType::F32, {a.splits * blockRows, d.kvLen, d.valueDim}});
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
