// assign-rtile: the algorithm is in assign_rtile.h (steps 1-3).
#include "compiler/passes/assign_rtile.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/ops/op_traits.h"
#include "compiler/ops/reduction_axis.h"
#include "compiler/passes/layout_assignment_printer.h"

namespace fbl::passes {

namespace {

using ir::NodeId;
using ir::ValueId;

const ir::Shape& shapeOf(const ir::Graph& g, ValueId v) { return g.values[v].shape; }

std::string problemKey(const layout::TensorExtent& e, const std::vector<layout::ReductionUse>& uses) {
  std::string k = fmt::format("{}x{}x{}", e.batch, e.rows, e.cols);
  for (const auto& u : uses) k += fmt::format("|{}:{:.6g}", static_cast<int>(u.dir), u.weight);
  return k;
}

}  // namespace

double reductionWeight(const ir::Graph& g, const ir::Node& n, int slot) {
  if (ops::isProduct(n.op) && n.outputs[0] != ir::kNoValue) {
    const ir::Shape& a = shapeOf(g, n.inputs[0]);
    int64_t k = a.empty() ? 1 : (n.op == "Gemm" && n.attrInt("transA", 0) ? a.front() : a.back());
    return 2.0 * static_cast<double>(ir::numElements(shapeOf(g, n.outputs[0]))) * static_cast<double>(k);
  }
  return static_cast<double>(ir::numElements(shapeOf(g, n.inputs[slot])));
}

int landingDim(const layout::IndexMap& view, int64_t axis) {
  int dim = -1;
  for (size_t k = 0; k < view.outputs().size(); ++k) {
    if (!layout::usesVar(view.outputs()[k], static_cast<int>(axis))) continue;
    if (dim >= 0) return -1;
    dim = static_cast<int>(k);
  }
  return dim;
}

layout::RTileChoice choiceForTile(const std::string& tensor, const layout::TensorExtent& e,
                                  const std::vector<layout::ReductionUse>& uses, int64_t tileH, int64_t tileW,
                                  const profile::HardwareProfile& p) {
  layout::RTileChoice c;
  c.tensor = tensor;
  c.layout.extent = e;
  c.layout.tile = layout::tileGeometry(tileH, tileW, p);
  c.layout.inter = layout::chooseInterOrder(c.layout.tile, e, uses);
  c.paddingRatio = layout::paddingRatio(tileH, tileW, e);
  c.cost = layout::scoreRTile(c.layout, uses, p);
  return c;
}

std::vector<layout::TileConfig> survivingTiles(const layout::RTileChoice& c,
                                               const std::vector<layout::ReductionUse>& uses,
                                               const profile::HardwareProfile& p) {
  std::vector<std::pair<double, layout::TileConfig>> scored;
  for (const auto& v : c.verdicts) {
    if (v.failed != layout::Constraint::kNone) continue;
    layout::RTileLayout l{c.layout.extent, layout::tileGeometry(v.tileH, v.tileW, p), {}};
    l.inter = layout::chooseInterOrder(l.tile, l.extent, uses);
    scored.push_back({layout::scoreRTile(l, uses, p).score, {v.tileH, v.tileW}});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<layout::TileConfig> out;
  for (auto& s : scored) out.push_back(s.second);
  return out;
}

std::vector<TileUses> tileUses(const ir::Graph& g, const LayoutAssignment& a) {
  // Readers of every value: direct (consumer, slot) pairs and reads through views.
  struct Reader {
    NodeId node;
    int slot;
    const ReadThrough* read;
  };
  std::vector<std::vector<Reader>> readers(g.values.size());
  std::vector<TileUses> out(g.values.size());
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const ir::Node& n = g.nodes[id];
    // A folded node's reads are its chain's: the chain's last consumer reads for it.
    if (n.dead || a.nodeClass[id] == OpClass::kNone || a.transforms[id].folded) continue;
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      ValueId v = n.inputs[s];
      if (v == ir::kNoValue || !isDataInput(n, static_cast<int>(s))) continue;
      const ReadThrough* r = a.readAt(id, static_cast<int>(s));
      ValueId src = r ? r->source : v;
      readers[src].push_back({id, static_cast<int>(s), r});
      if (a.nodeClass[id] == OpClass::kFtdD && isTileReader(n, static_cast<int>(s)) &&
          out[src].firstTileReader == ir::kNoNode)
        out[src].firstTileReader = id;
    }
  }
  for (ValueId v = 0; v < static_cast<ValueId>(g.values.size()); ++v) {
    if (out[v].firstTileReader == ir::kNoNode) continue;
    const ir::Value& val = g.values[v];
    if (!ir::isFloat(val.dtype) || !val.shapeKnown || val.shape.empty()) {
      out[v].firstTileReader = ir::kNoNode;
      continue;
    }
    const size_t pn = val.shape.size();
    std::vector<layout::ReductionUse>& uses = out[v].uses;
    for (const Reader& rd : readers[v]) {
      const ir::Node& c = g.nodes[rd.node];
      auto axis = ops::reductionAxis(g, c, rd.slot);
      if (!axis) continue;
      int dim = rd.read ? landingDim(rd.read->view, *axis) : static_cast<int>(*axis);
      layout::ReductionDir dir;
      if (dim == static_cast<int>(pn) - 1) dir = layout::ReductionDir::kAlongRow;
      else if (pn >= 2 && dim == static_cast<int>(pn) - 2) dir = layout::ReductionDir::kAlongColumn;
      else continue;
      uses.push_back({dir, reductionWeight(g, c, rd.slot), c.name});
    }
    // Eq. 2 compares tiles for one tensor: normalise weights so equal layers share a problem.
    double maxW = 0;
    for (const auto& u : uses) maxW = std::max(maxW, u.weight);
    for (auto& u : uses) u.weight /= maxW;
  }
  return out;
}

Result<bool> AssignRTile::run(ir::Graph& g) {
  solved_ = 0;
  const std::vector<TileUses> tiled = tileUses(g, a_);
  std::unordered_map<std::string, Result<layout::RTileChoice>> memo;
  bool any = false;
  for (ValueId v = 0; v < static_cast<ValueId>(g.values.size()); ++v) {
    if (tiled[v].firstTileReader == ir::kNoNode) continue;
    const ir::Value& val = g.values[v];
    const std::vector<layout::ReductionUse>& uses = tiled[v].uses;
    ValueLayout& vl = a_.values[v];
    if (uses.empty()) {
      vl.why = "linear: no tile reduction reaches it through its views";
      continue;
    }
    layout::TensorExtent e = layout::matrixView(val.shape);
    std::string key = problemKey(e, uses);
    auto it = memo.find(key);
    if (it == memo.end()) {
      layout::RTileProblem prob{val.name, e, uses};
      it = memo.emplace(key, layout::selectRTile(prob, profile_)).first;
      ++solved_;
    }
    if (!it->second.ok()) {
      // The memoised failure names the value that first posed this problem (k_proj's lora_B
      // for every [512 x 8] dt): pose it again for this one, which costs only on this path.
      vl.why = "linear: " + layout::selectRTile({val.name, e, uses}, profile_).error().message;
      continue;
    }
    RTileEntry entry;
    entry.value = v;
    entry.choice = *it->second;
    entry.choice.tensor = val.name;
    entry.uses = uses;
    entry.note = "Eq. 2 over " + std::to_string(uses.size()) + " reductions";
    a_.rtiles.push_back(std::move(entry));
    vl.kind = ValueLayout::Kind::kRTile;
    vl.rtile = static_cast<int>(a_.rtiles.size()) - 1;
    vl.anchor = true;
    vl.why = "anchor: read tile by tile by " + g.nodes[tiled[v].firstTileReader].name;
    any = true;
  }
  return any;
}

std::string AssignRTile::dump(const ir::Graph& g) const { return formatAssignment(g, a_); }

}  // namespace fbl::passes
