// LayoutAssignment and the layout-assignment pass: phases 4 and 5 in layout_assignment.h.
#include "compiler/passes/layout_assignment.h"

#include <array>
#include <map>

#include <fmt/format.h>

#include "compiler/ops/reduction_axis.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/passes/layout_assignment_printer.h"

namespace fbl::passes {

using ir::NodeId;
using ir::ValueId;
using strategy::Strategy;
using strategy::strategyName;

const char* readDecisionName(ReadThrough::Decision d) {
  switch (d) {
    case ReadThrough::Decision::kUndecided: return "undecided";
    case ReadThrough::Decision::kTileMap: return "tile-map";
    case ReadThrough::Decision::kIndexMap: return "index-map";
    case ReadThrough::Decision::kExplicit: return "explicit";
  }
  return "?";
}

layout::TileSpec RTileEntry::spec() const {
  const layout::TileGeometry& t = choice.layout.tile;
  layout::TileSpec s = t.intra == layout::IntraMapping::kRowStrips
                           ? layout::TileSpec::rowStrips(t.tileH, t.tileW)
                           : layout::TileSpec::blocks(t.tileH, t.tileW, t.lh, t.lw, t.blockH, t.blockW);
  s.rowsAlongX = choice.layout.inter == layout::InterOrder::kRowsAlongX;
  return s;
}

void LayoutAssignment::reset(const ir::Graph& g) {
  Strategy keep = strategy;
  std::string prof = profile;
  *this = LayoutAssignment{};
  strategy = keep;
  profile = prof;
  nodeClass.assign(g.nodes.size(), OpClass::kNone);
  values.assign(g.values.size(), {});
  transforms.assign(g.nodes.size(), {});
}

static int64_t readKey(NodeId n, int slot) { return (static_cast<int64_t>(n) << 8) | slot; }

void LayoutAssignment::indexReads() {
  readIndex_.clear();
  for (size_t i = 0; i < reads.size(); ++i) readIndex_[readKey(reads[i].consumer, reads[i].slot)] = static_cast<int>(i);
}

const ReadThrough* LayoutAssignment::readAt(NodeId consumer, int slot) const {
  auto it = readIndex_.find(readKey(consumer, slot));
  return it == readIndex_.end() ? nullptr : &reads[it->second];
}

ReadThrough* LayoutAssignment::readAt(NodeId consumer, int slot) {
  auto it = readIndex_.find(readKey(consumer, slot));
  return it == readIndex_.end() ? nullptr : &reads[it->second];
}

const RTileEntry* LayoutAssignment::rtileOf(ValueId v) const {
  if (v < 0 || v >= static_cast<ValueId>(values.size()) || values[v].kind != ValueLayout::Kind::kRTile) return nullptr;
  return &rtiles[values[v].rtile];
}

Result<layout::Layout> LayoutAssignment::layoutOf(const ir::Graph& g, ValueId v) const {
  const ir::Shape& s = g.values[v].shape;
  if (const RTileEntry* e = rtileOf(v)) return layout::Layout::rtile(s, e->spec(), layout::Storage::Image2D);
  return layout::Layout::rowMajor(s);
}

TransformSummary LayoutAssignment::summary() const {
  TransformSummary s;
  for (size_t i = 0; i < transforms.size(); ++i) {
    if (!transforms[i].isTransform || nodeClass[i] == OpClass::kNone) continue;
    ++s.total;
    if (transforms[i].eliminated) {
      ++s.eliminated;
      s.tileMapped += transforms[i].tileMapped;
    } else {
      ++s.explicitCount;
    }
  }
  s.conversions = static_cast<int64_t>(conversions.size());
  return s;
}

bool isTileReader(const ir::Node& n, int slot) { return (n.op == "MatMul" || n.op == "Gemm") && slot < 2; }

bool isDataInput(const ir::Node& n, int slot) {
  static const std::map<std::string_view, int> firstOnly = {
      {"Reshape", 1}, {"Expand", 1}, {"Tile", 1}, {"Unsqueeze", 1}, {"Squeeze", 1}, {"Slice", 1},
      {"Pad", 1}, {"Dropout", 1}, {"Clip", 1}, {"ReduceMean", 1}, {"ReduceSum", 1}, {"ReduceMax", 1},
      {"ReduceMin", 1}, {"fbl.AdamW", 4}, {"Split", 1}};
  auto it = firstOnly.find(n.op);
  return it == firstOnly.end() || slot < it->second;
}

// ---- the layout-assignment pass -------------------------------------------------------------

namespace {

std::string nonIndexMapReason(const ir::Graph& g, const ir::Node& n) {
  if (n.op == "Concat") return fmt::format("Concat of {} tensors: not one index map of a single source", n.inputs.size());
  if (n.op == "Pad" || n.op == "fbl.SliceGrad") return "writes zeros outside the slab: not an index map";
  if (n.op == "Split") return "splits into several outputs: run as one kernel";
  auto op = movementOpOf(g, n);
  return op.ok() ? "not folded" : op.error().message;
}

std::optional<layout::TileConfig> naturalTile(const ir::Graph& g, const LayoutAssignment& a, NodeId id) {
  const ir::Node& n = g.nodes[id];
  if (!isTileReader(n, 0) || n.inputs.size() < 2) return std::nullopt;
  const ReadThrough* lr = a.readAt(id, 0);
  const ReadThrough* rr = a.readAt(id, 1);
  const RTileEntry* l = a.rtileOf(lr ? lr->source : n.inputs[0]);
  const RTileEntry* r = a.rtileOf(rr ? rr->source : n.inputs[1]);
  if (!l || !r) return std::nullopt;
  return layout::TileConfig{lr && lr->transposedRead ? l->tile().tileW : l->tile().tileH,
                            rr && rr->transposedRead ? r->tile().tileH : r->tile().tileW};
}

// The explicit strategy converts a reused forward tensor before each backward reduction that
// walks it along another direction than the forward pass did.
void explicitStrategyConversions(const ir::Graph& g, LayoutAssignment& a) {
  std::vector<std::array<int, 2>> fwdDirs(g.values.size(), {0, 0});
  std::vector<std::tuple<NodeId, int, ValueId, int>> bwd;
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const ir::Node& n = g.nodes[id];
    if (n.dead || a.transforms[id].folded) continue;
    for (int s = 0; s < static_cast<int>(n.inputs.size()); ++s) {
      auto axis = ops::reductionAxis(g, n, s);
      if (!axis) continue;
      const ReadThrough* r = a.readAt(id, s);
      ValueId v = r ? r->source : n.inputs[s];
      int dim = r ? landingDim(r->view, *axis) : static_cast<int>(*axis);
      int rank = static_cast<int>(g.values[v].shape.size());
      int dir = dim == rank - 1 ? 0 : dim == rank - 2 ? 1 : -1;
      if (dir < 0) continue;
      if (n.phase == ir::Phase::Forward) fwdDirs[v][dir] = 1;
      else if (g.values[v].reusedByBackward) bwd.emplace_back(id, s, v, dir);
    }
  }
  for (auto [id, s, v, dir] : bwd)
    if (fwdDirs[v][1 - dir] && !fwdDirs[v][dir])
      a.conversions.push_back({id, s, v, fmt::format("explicit strategy: backward {} walks {} along {}; its forward "
                                                     "layout is converted first",
                                                     g.nodes[id].op, g.values[v].name, dir ? "columns" : "rows")});
}

}  // namespace

std::vector<std::vector<int>> readsThroughNodes(const ir::Graph& g, const LayoutAssignment& a) {
  std::vector<std::vector<int>> out(g.nodes.size());
  for (size_t i = 0; i < a.reads.size(); ++i)
    for (NodeId n : a.reads[i].chain) out[n].push_back(static_cast<int>(i));
  return out;
}

void settleFolded(const ir::Graph& g, const LayoutAssignment& a, const std::vector<int>& reads, TransformStatus& t) {
  t.eliminated = true;
  t.tileMapped = !reads.empty();
  t.reason = reads.empty() ? "no reader" : "";
  for (int i : reads) {
    const ReadThrough& r = a.reads[i];
    t.tileMapped = t.tileMapped && r.decision == ReadThrough::Decision::kTileMap;
    if (r.decision == ReadThrough::Decision::kExplicit) {
      t.eliminated = false;
      t.reason = fmt::format("read by {}: {}", g.nodes[r.consumer].name, r.reason);
      break;
    }
  }
  if (t.eliminated && t.reason.empty()) t.reason = t.tileMapped ? "tile map" : "index map";
}

Status checkAssignment(const ir::Graph& g, const LayoutAssignment& a, bool final) {
  if (a.nodeClass.size() != g.nodes.size() || a.transforms.size() != g.nodes.size() ||
      a.values.size() != g.values.size())
    return makeError("layout check: the assignment covers {} nodes and {} values, the graph has {} and {}",
                     a.nodeClass.size(), a.values.size(), g.nodes.size(), g.values.size());
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const ir::Node& n = g.nodes[id];
    if (n.dead || a.transforms[id].folded) continue;
    for (int s = 0; s < static_cast<int>(n.inputs.size()); ++s) {
      ValueId v = n.inputs[s];
      if (v == ir::kNoValue || !isDataInput(n, s)) continue;
      NodeId p = g.values[v].producer;
      const ReadThrough* r = a.readAt(id, s);
      if (p != ir::kNoNode && a.transforms[p].folded && r == nullptr)
        return makeError("layout check: {} reads {} from a folded transformation without a read map",
                         ir::describeNode(g, n), g.values[v].name);
      if (r == nullptr) continue;
      if (final && r->decision == ReadThrough::Decision::kUndecided)
        return makeError("layout check: {} input {} is undecided", ir::describeNode(g, n), s);
      if (r->decision == ReadThrough::Decision::kTileMap) {
        const RTileEntry* e = a.rtileOf(r->source);
        if (e == nullptr || !(e->tile() == r->tile))
          return makeError("layout check: {} reads {} through a {} tile map but the source is stored as {}",
                           ir::describeNode(g, n), g.values[r->source].name, r->tile.str(),
                           e ? e->tile().str() : std::string("linear"));
      }
    }
  }
  for (ValueId v : g.outputs) {
    NodeId p = g.values[v].producer;
    if (p != ir::kNoNode && a.transforms[p].folded)
      return makeError("layout check: graph output {} is produced by a folded transformation", g.values[v].name);
  }
  return Status::success();
}

Result<bool> LayoutAssignmentPass::run(ir::Graph& g) {
  // Phase 4: assignment.
  a_.conversions.clear();
  for (ReadThrough& r : a_.reads) {
    if (r.decision == ReadThrough::Decision::kUndecided) {
      r.decision = ReadThrough::Decision::kExplicit;
      r.reason = a_.strategy == Strategy::kFBLayout
                     ? std::string("tile-index-elimination disabled: the chain runs as kernels")
                     : fmt::format("strategy {}: movement ops run as kernels", strategyName(a_.strategy));
    }
    if (r.decision == ReadThrough::Decision::kExplicit) a_.conversions.push_back({r.consumer, r.slot, r.source, r.reason});
  }
  for (ValueId v = 0; v < static_cast<ValueId>(g.values.size()); ++v) {
    ValueLayout& vl = a_.values[v];
    if (!vl.anchor || vl.writtenTiled) continue;
    NodeId p = g.values[v].producer;
    if (p == ir::kNoNode) {
      vl.writtenTiled = true;
      vl.why += "; packed at load";
      continue;
    }
    a_.conversions.push_back({p, -1, v, fmt::format("{} writes {} linear; converted into R-Tile {} for its FTD-D readers "
                                                    "(no propagation)",
                                                    g.nodes[p].op, g.values[v].name, a_.rtileOf(v)->tile().str())});
  }
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    if (g.nodes[id].dead || g.nodes[id].outputs.empty()) continue;
    ValueId o = g.nodes[id].outputs[0];
    auto nat = naturalTile(g, a_, id);
    const RTileEntry* oe = a_.rtileOf(o);
    if (nat && oe && a_.values[o].writtenTiled && !(*nat == oe->tile()))
      a_.conversions.push_back({id, -1, o, fmt::format("{} computes {} tiles; {} is stored in {} tiles", g.nodes[id].op,
                                                       nat->str(), g.values[o].name, oe->tile().str())});
  }
  if (a_.strategy == Strategy::kExplicit) explicitStrategyConversions(g, a_);
  // Transformation nodes: explicit when any read through them is.
  const std::vector<std::vector<int>> readsThrough = readsThroughNodes(g, a_);
  std::vector<bool> isOutput(g.values.size(), false);
  for (ValueId v : g.outputs) isOutput[v] = true;
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    TransformStatus& t = a_.transforms[id];
    if (!t.isTransform || g.nodes[id].dead) continue;
    if (!t.folded) {
      t.eliminated = false;
      const ir::Node& n = g.nodes[id];
      t.reason = !n.outputs.empty() && n.outputs[0] != ir::kNoValue && isOutput[n.outputs[0]]
                     ? "graph output: materialised"
                     : nonIndexMapReason(g, n);
      continue;
    }
    settleFolded(g, a_, readsThrough[id], t);
  }
  // Phase 5: every consumer can read what its producer wrote.
  FBL_TRY(checkAssignment(g, a_, /*final=*/true));
  return true;
}

std::string LayoutAssignmentPass::dump(const ir::Graph& g) const { return formatAssignment(g, a_); }

}  // namespace fbl::passes
