// tile-index-elimination: the algorithm is in tile_index_elimination.h (steps 1-3).
#include "compiler/passes/tile_index_elimination.h"

#include <unordered_map>

#include <fmt/format.h>

#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/layout_assignment_printer.h"

namespace fbl::passes {

Result<layout::IndexMap> transposedView(const layout::IndexMap& view) {
  ir::Shape o = view.domain();
  if (o.size() < 2) return makeError("a transposed read needs rank >= 2");
  ir::Shape ot = o;
  std::swap(ot[ot.size() - 1], ot[ot.size() - 2]);
  std::vector<layout::Expr> vars = layout::IndexMap::vars(ot), outs = vars;
  std::swap(outs[outs.size() - 1], outs[outs.size() - 2]);
  FBL_ASSIGN(layout::IndexMap m, layout::compose(view, layout::IndexMap(ot, outs, o)));
  return m.simplified();
}

namespace {

bool isProduct(const ir::Graph& g, const ReadThrough& r) {
  const std::string& op = g.nodes[r.consumer].op;
  return op == "MatMul" || op == "Gemm";
}

}  // namespace

const TileReadChecker::Verdict& TileReadChecker::check(const ReadThrough& r, layout::TileConfig t) {
  const bool product = r.tileReader && isProduct(g_, r);
  std::string key = fmt::format("{}#{}#{}", r.chainText, t.str(), product);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  Verdict v;
  ++checks_;
  v.result = layout::checkTilePropagation(r.view, t);
  v.ok = v.result.ok;
  if (!v.ok && product) {
    if (auto tv = transposedView(r.view); tv.ok()) {
      ++checks_;
      layout::TileCheckResult tr = layout::checkTilePropagation(*tv, t);
      if (tr.ok) {
        v.ok = v.transposed = true;
        v.result = std::move(tr);
      }
    }
  }
  return memo_.emplace(key, std::move(v)).first->second;
}

void decideRead(ReadThrough& r, const LayoutAssignment& a, TileReadChecker& checker) {
  const RTileEntry* e = a.rtileOf(r.source);
  if (e == nullptr) {
    r.decision = ReadThrough::Decision::kIndexMap;
    r.reason = "element index map over a linear source";
    return;
  }
  const TileReadChecker::Verdict& v = checker.check(r, e->tile());
  if (v.ok) {
    r.decision = ReadThrough::Decision::kTileMap;
    r.tile = e->tile();
    r.tileMap = v.result.tileMap;
    r.transposedRead = v.transposed;
    r.reason = v.transposed ? "tile map, read transposed (3 checks pass on the transpose)" : "tile map (3 checks pass)";
  } else if (r.tileReader) {
    r.decision = ReadThrough::Decision::kExplicit;
    r.reason = fmt::format("{} with tile {}: {}", layout::tileCheckName(v.result.failed), e->tile().str(),
                           v.result.reason);
  } else {
    r.decision = ReadThrough::Decision::kIndexMap;
    r.reason = fmt::format("element index map ({} fails at tile granularity)", layout::tileCheckName(v.result.failed));
  }
}

Result<bool> TileIndexElimination::run(ir::Graph& g) {
  TileReadChecker checker(g);
  // Reads grouped by their R-Tile source.
  std::vector<std::vector<int>> bySource(a_.rtiles.size());
  for (size_t i = 0; i < a_.reads.size(); ++i) {
    const ReadThrough& r = a_.reads[i];
    if (r.decision != ReadThrough::Decision::kUndecided) continue;
    const RTileEntry* e = a_.rtileOf(r.source);
    if (e != nullptr) bySource[a_.values[r.source].rtile].push_back(static_cast<int>(i));
  }
  // Step 2: reconfigure sources whose tile readers fail.
  for (size_t s = 0; s < a_.rtiles.size(); ++s) {
    if (bySource[s].empty()) continue;
    RTileEntry& e = a_.rtiles[s];
    auto passing = [&](layout::TileConfig t) {
      int tile = 0, all = 0;
      for (int i : bySource[s]) {
        const auto& v = checker.check(a_.reads[i], t);
        all += v.ok;
        tile += v.ok && a_.reads[i].tileReader;
      }
      return std::pair{tile, all};
    };
    int readers = 0;
    for (int i : bySource[s]) readers += a_.reads[i].tileReader;
    auto best = passing(e.tile());
    if (best.first == readers) continue;
    layout::TileConfig pick = e.tile();
    for (const layout::TileConfig& t : survivingTiles(e.choice, e.uses, profile_)) {
      auto p = passing(t);
      if (p > best) {
        best = p;
        pick = t;
      }
    }
    if (pick == e.tile()) continue;
    std::string from = e.tile().str();
    std::vector<layout::CandidateVerdict> verdicts = std::move(e.choice.verdicts);
    e.choice = choiceForTile(e.choice.tensor, e.choice.layout.extent, e.uses, pick.tileH, pick.tileW, profile_);
    e.choice.verdicts = std::move(verdicts);
    e.note = fmt::format("reconfigured from {} to {}: {} of {} tile-by-tile reads pass", from, pick.str(),
                         best.first, readers);
  }
  // Step 3: decide every read.
  bool any = false;
  for (ReadThrough& r : a_.reads) {
    if (r.decision != ReadThrough::Decision::kUndecided) continue;
    any = true;
    decideRead(r, a_, checker);
  }
  checks_ = checker.checksRun();
  return any;
}

std::string TileIndexElimination::dump(const ir::Graph& g) const { return formatTransforms(g, a_, true); }

}  // namespace fbl::passes
