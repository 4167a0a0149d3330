// global-layout-selection: the algorithm is in global_layout_selection.h (phases A and B).
#include "compiler/passes/global_layout_selection.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/ops/op_traits.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/layout_assignment_printer.h"
#include "compiler/passes/tile_index_elimination.h"

namespace fbl::passes {

namespace {

using ir::NodeId;
using ir::ValueId;

bool flexible(OpClass c) { return c == OpClass::kFtiC || c == OpClass::kFtdC; }

int64_t bytesOf(const layout::TensorExtent& e) { return int64_t{layout::kElementBytes} * e.batch * e.rows * e.cols; }

// The value a consumer input really reads: the source of its chain, or the input itself.
ValueId sourceOf(const LayoutAssignment& a, const ir::Node& n, NodeId id, int slot) {
  const ReadThrough* r = a.readAt(id, slot);
  return r ? r->source : n.inputs[slot];
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

}  // namespace

double tensorCost(const layout::RTileChoice& c, const std::vector<layout::ReductionUse>& uses,
                  const profile::HardwareProfile& p) {
  const double bytes = static_cast<double>(bytesOf(c.layout.extent));
  if (!layout::canScoreRTiles(p) || uses.empty())
    return bytes / std::max(1e-9, layout::memEfficiency(c.layout.tile, c.layout.extent, p));
  layout::RTileCost cost = layout::scoreRTile(c.layout, uses, p);
  double sumW = 0, t = 0;
  for (const auto& u : uses) sumW += u.weight;
  for (const auto& u : cost.uses)
    t += (u.use.weight / sumW) * bytes / std::max(1e-9, u.throughput * u.memEfficiency);
  return t;
}

double conversionCost(int64_t bytes, const profile::HardwareProfile& p) {
  return kConversionPasses * static_cast<double>(bytes) / layout::streamThroughput(p);
}

void GlobalLayoutSelection::propagate(const ir::Graph& g) {
  // Step 1.
  for (ValueId v = 0; v < static_cast<ValueId>(g.values.size()); ++v) {
    ValueLayout& vl = a_.values[v];
    if (!vl.anchor) continue;
    vl.writtenTiled = true;
    NodeId p = g.values[v].producer;
    vl.why += p == ir::kNoNode ? "; packed at load" : "; written tiled by " + g.nodes[p].name;
  }
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const ir::Node& n = g.nodes[id];
    if (n.dead || a_.transforms[id].folded || n.outputs.empty() || n.outputs[0] == ir::kNoValue) continue;
    ValueId o = n.outputs[0];
    const ir::Value& ov = g.values[o];
    if (a_.values[o].kind != ValueLayout::Kind::kLinear || !ir::isFloat(ov.dtype) || ov.shape.size() < 2) continue;
    if (ops::isProduct(n.op) && n.inputs.size() >= 2) {
      // Step 2.
      const RTileEntry* l = a_.rtileOf(sourceOf(a_, n, id, 0));
      const RTileEntry* r = a_.rtileOf(sourceOf(a_, n, id, 1));
      if (!l || !r) continue;
      const ReadThrough* lr = a_.readAt(id, 0);
      const ReadThrough* rr = a_.readAt(id, 1);
      int64_t h = lr && lr->transposedRead ? l->tile().tileW : l->tile().tileH;
      int64_t w = rr && rr->transposedRead ? r->tile().tileH : r->tile().tileW;
      layout::TensorExtent e = layout::matrixView(ov.shape);
      if (w % layout::kTexelLanes != 0 || layout::paddingRatio(h, w, e) > layout::RTileOptions{}.maxPaddingRatio) continue;
      RTileEntry entry;
      entry.value = o;
      entry.choice = choiceForTile(ov.name, e, {}, h, w, profile_);
      entry.note = "natural output tile of " + n.name;
      a_.rtiles.push_back(std::move(entry));
      a_.values[o] = {ValueLayout::Kind::kRTile, static_cast<int>(a_.rtiles.size()) - 1, false, true,
                      "natural output tile of " + n.name};
    } else if (flexible(a_.nodeClass[id])) {
      // Step 3 (output 0 only: other outputs alias optimizer state that keeps its own layout).
      for (size_t s = 0; s < n.inputs.size(); ++s) {
        ValueId x = n.inputs[s];
        if (x == ir::kNoValue || a_.readAt(id, static_cast<int>(s)) || !isDataInput(n, static_cast<int>(s))) continue;
        if (a_.values[x].kind != ValueLayout::Kind::kRTile || g.values[x].shape != ov.shape) continue;
        a_.values[o] = {ValueLayout::Kind::kRTile, a_.values[x].rtile, false, true,
                        "propagated from " + g.values[x].name + " through " + n.op};
        break;
      }
    }
  }
}

void GlobalLayoutSelection::searchChains(const ir::Graph& g) {
  const size_t nn = g.nodes.size();
  std::vector<std::array<int, 3>> uses(g.values.size(), {0, 0, 0});
  for (const ir::Node& n : g.nodes)
    if (!n.dead)
      for (ValueId v : n.inputs)
        if (v != ir::kNoValue) ++uses[v][static_cast<int>(n.phase)];
  // Step 4.
  UnionFind uf(nn);
  struct Link {
    NodeId from, to;
    int slot;
  };
  std::vector<Link> links;
  for (NodeId b = 0; b < static_cast<NodeId>(nn); ++b) {
    const ir::Node& n = g.nodes[b];
    if (n.dead || !ops::isProduct(n.op)) continue;
    const int phase = static_cast<int>(n.phase);
    for (int slot = 0; slot < 2 && slot < static_cast<int>(n.inputs.size()); ++slot) {
      ValueId x = sourceOf(a_, n, b, slot);
      for (int hop = 0; hop <= kMaxLinkHops && x != ir::kNoValue; ++hop) {
        NodeId p = g.values[x].producer;
        if (p == ir::kNoNode || uses[x][phase] != 1) break;
        const ir::Node& pn = g.nodes[p];
        if (ops::isProduct(pn.op)) {
          links.push_back({p, b, slot});
          uf.join(p, b);
          break;
        }
        if (!flexible(a_.nodeClass[p])) break;
        ValueId next = ir::kNoValue;
        int activations = 0;
        for (size_t s = 0; s < pn.inputs.size(); ++s) {
          ValueId in = pn.inputs[s];
          if (in == ir::kNoValue || !isDataInput(pn, static_cast<int>(s)) || g.values[in].data) continue;
          ++activations;
          next = sourceOf(a_, pn, p, static_cast<int>(s));
        }
        if (activations != 1) break;
        x = next;
      }
    }
  }
  std::map<int, std::vector<NodeId>> comps;
  for (const Link& l : links) {
    comps[uf.find(l.from)];
  }
  for (NodeId id = 0; id < static_cast<NodeId>(nn); ++id)
    if (!g.nodes[id].dead && ops::isProduct(g.nodes[id].op)) {
      auto it = comps.find(uf.find(id));
      if (it != comps.end()) it->second.push_back(id);
    }
  TileReadChecker checker(g);
  std::vector<std::vector<int>> readsOf(g.values.size());
  for (size_t i = 0; i < a_.reads.size(); ++i) readsOf[a_.reads[i].source].push_back(static_cast<int>(i));
  std::map<int, std::vector<Link>> linksOf;
  std::unordered_map<std::string, double> costMemo;  // identical layers share their costs
  for (const Link& l : links) linksOf[uf.find(l.from)].push_back(l);

  for (auto& comp : comps) {
    // A named copy: C++17 lambdas (evaluate, below) cannot capture a structured binding.
    const int root = comp.first;
    const auto& ops = comp.second;
    // Step 5.
    FtdChain chain;
    chain.ops = ops;
    for (NodeId id : ops)
      for (int s = 0; s < 2 && s < static_cast<int>(g.nodes[id].inputs.size()); ++s) {
        ValueId t = sourceOf(a_, g.nodes[id], id, s);
        if (a_.values[t].anchor && std::find(chain.tensors.begin(), chain.tensors.end(), t) == chain.tensors.end())
          chain.tensors.push_back(t);
      }
    if (chain.tensors.size() < 2) continue;
    std::sort(chain.tensors.begin(), chain.tensors.end(), [&](ValueId x, ValueId y) {
      return bytesOf(a_.rtileOf(x)->choice.layout.extent) > bytesOf(a_.rtileOf(y)->choice.layout.extent);
    });
    std::map<ValueId, std::vector<layout::TileConfig>> survivors;
    std::vector<layout::TileConfig> candidates;
    for (ValueId t : chain.tensors) {
      const RTileEntry& e = *a_.rtileOf(t);
      survivors[t] = survivingTiles(e.choice, e.uses, profile_);
      for (const auto& c : std::vector<layout::TileConfig>{e.tile()})
        if (std::find(candidates.begin(), candidates.end(), c) == candidates.end()) candidates.push_back(c);
    }
    for (ValueId t : chain.tensors)
      for (const auto& c : survivors[t])
        if (candidates.size() < kMaxChainCandidates && std::find(candidates.begin(), candidates.end(), c) == candidates.end())
          candidates.push_back(c);
    auto valid = [&](ValueId t, layout::TileConfig c) {
      const auto& sv = survivors[t];
      if (std::find(sv.begin(), sv.end(), c) == sv.end()) return false;
      for (int i : readsOf[t])
        if (a_.reads[i].tileReader && !checker.check(a_.reads[i], c).ok) return false;
      return true;
    };
    auto evaluate = [&](std::optional<layout::TileConfig> T, std::map<ValueId, layout::TileConfig>& tiles) {
      double cost = 0;
      for (ValueId t : chain.tensors) {
        const RTileEntry& e = *a_.rtileOf(t);
        layout::TileConfig c = T && valid(t, *T) ? *T : e.tile();
        tiles[t] = c;
        const layout::TensorExtent& x = e.choice.layout.extent;
        std::string key = fmt::format("{}x{}x{}#{}", x.batch, x.rows, x.cols, c.str());
        for (const auto& u : e.uses) key += fmt::format("|{}:{:.6g}", static_cast<int>(u.dir), u.weight);
        auto it = costMemo.find(key);
        if (it == costMemo.end())
          it = costMemo
                   .emplace(key, tensorCost(choiceForTile(e.choice.tensor, x, e.uses, c.tileH, c.tileW, profile_),
                                            e.uses, profile_))
                   .first;
        cost += it->second;
      }
      auto tileAt = [&](NodeId id, int s) -> std::optional<layout::TileConfig> {
        ValueId t = sourceOf(a_, g.nodes[id], id, s);
        if (tiles.count(t)) return tiles[t];
        if (const RTileEntry* e = a_.rtileOf(t)) return e->tile();
        return std::nullopt;
      };
      for (const Link& l : linksOf[root]) {
        auto lhs = tileAt(l.from, 0), rhs = tileAt(l.from, 1), into = tileAt(l.to, l.slot);
        if (!lhs || !rhs || !into) continue;
        if (lhs->tileH != into->tileH || rhs->tileW != into->tileW)
          cost += conversionCost(bytesOf(layout::matrixView(g.values[sourceOf(a_, g.nodes[l.to], l.to, l.slot)].shape)),
                                 profile_);
      }
      return cost;
    };
    std::map<ValueId, layout::TileConfig> own, best;
    chain.costBefore = evaluate(std::nullopt, own);
    chain.costAfter = chain.costBefore;
    for (const auto& c : candidates) {
      std::map<ValueId, layout::TileConfig> tiles;
      double cost = evaluate(c, tiles);
      chain.log.push_back(fmt::format("{}: cost {:.4g}", c.str(), cost));
      if (cost < chain.costAfter * (1 - 1e-9)) {
        chain.costAfter = cost;
        chain.chosen = c;
        best = tiles;
      }
    }
    const int chainIndex = static_cast<int>(a_.chains.size());
    if (chain.chosen) {
      for (auto& [t, c] : best) {
        RTileEntry& e = a_.rtiles[a_.values[t].rtile];
        if (c == e.tile()) continue;
        auto verdicts = std::move(e.choice.verdicts);
        e.choice = choiceForTile(e.choice.tensor, e.choice.layout.extent, e.uses, c.tileH, c.tileW, profile_);
        e.choice.verdicts = std::move(verdicts);
        e.note = fmt::format("greedy chain #{}: {}", chainIndex, c.str());
        for (int i : readsOf[t])
          if (a_.reads[i].decision != ReadThrough::Decision::kUndecided && !a_.reads[i].structural) {
            a_.reads[i].decision = ReadThrough::Decision::kUndecided;
            decideRead(a_.reads[i], a_, checker);
          }
      }
    }
    a_.chains.push_back(std::move(chain));
  }
}

Result<bool> GlobalLayoutSelection::run(ir::Graph& g) {
  propagate(g);
  // Reads whose source was linear when decided and now carries a propagated R-Tile: a tile map
  // where the checks pass; an element index map stays one otherwise (the source is no anchor,
  // so no tile-by-tile reader depends on it).
  TileReadChecker checker(g);
  for (ReadThrough& r : a_.reads) {
    if (r.decision != ReadThrough::Decision::kIndexMap || r.structural || a_.values[r.source].anchor ||
        a_.rtileOf(r.source) == nullptr)
      continue;
    ReadThrough again = r;
    decideRead(again, a_, checker);
    if (again.decision == ReadThrough::Decision::kTileMap) r = std::move(again);
    else r.reason = "element index map over a propagated R-Tile (" + again.reason + ")";
  }
  searchChains(g);
  return true;
}

std::string GlobalLayoutSelection::dump(const ir::Graph& g) const { return formatAssignment(g, a_); }

}  // namespace fbl::passes
