// The text and JSON forms of a LayoutAssignment (layout_assignment.h): the dumps of the layout
// passes, `fblc inspect`, `fblc explain` and the compile report's `transforms`.
#include "compiler/passes/layout_assignment_printer.h"

#include <array>
#include <map>

#include <fmt/format.h>

namespace fbl::passes {

using ir::NodeId;
using ir::ValueId;

namespace {

constexpr OpClass kClasses[] = {OpClass::kFtiC, OpClass::kFtdC, OpClass::kFtiD, OpClass::kFtdD};
const char* phaseName(ir::Phase p) {
  return p == ir::Phase::Forward ? "forward" : p == ir::Phase::Backward ? "backward" : "optimizer";
}
const char* classMeaning(OpClass c) {
  switch (c) {
    case OpClass::kFtiC: return "no forward tensor, consistent access";
    case OpClass::kFtdC: return "forward tensor, consistent access";
    case OpClass::kFtiD: return "no forward tensor, divergent access";
    case OpClass::kFtdD: return "forward tensor, divergent access";
    default: return "";
  }
}

struct ClassCounts {
  std::map<OpClass, std::array<int64_t, 3>> byPhase;
  std::map<OpClass, std::map<std::string, int64_t>> byOp;
};

ClassCounts countClasses(const ir::Graph& g, const LayoutAssignment& a) {
  ClassCounts c;
  for (OpClass k : kClasses) c.byPhase[k] = {0, 0, 0};
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    OpClass k = a.nodeClass[i];
    if (k == OpClass::kNone) continue;
    ++c.byPhase[k][static_cast<int>(g.nodes[i].phase)];
    ++c.byOp[k][g.nodes[i].op];
  }
  return c;
}

// TileSpec::str names only rows-along-x; the default order is named here.
std::string tileText(const RTileEntry& e) {
  const layout::TileSpec s = e.spec();
  return s.rowsAlongX ? s.str() : s.str() + " " + layout::interOrderName(e.choice.layout.inter);
}

}  // namespace

std::string formatClassification(const ir::Graph& g, const LayoutAssignment& a) {
  ClassCounts c = countClasses(g, a);
  std::string s = fmt::format("{:<47} {:>8} {:>8} {:>9} {:>7}\n", "layout classes (paper Table 1)", "forward",
                              "backward", "optimizer", "total");
  for (OpClass k : kClasses) {
    const auto& p = c.byPhase[k];
    s += fmt::format("  {}  {:<38} {:>8} {:>8} {:>9} {:>7}\n", opClassName(k), classMeaning(k), p[0], p[1], p[2],
                     p[0] + p[1] + p[2]);
  }
  for (OpClass k : kClasses) {
    std::string ops;
    for (const auto& [op, n] : c.byOp[k]) ops += fmt::format(" {} {}", op, n);
    s += fmt::format("  {}:{}\n", opClassName(k), ops.empty() ? " (none)" : ops);
  }
  return s;
}

std::string formatTransforms(const ir::Graph& g, const LayoutAssignment& a, bool perNode) {
  TransformSummary t = a.summary();
  std::string s = fmt::format(
      "transforms (FTI-D nodes, strategy {}): {} total, {} eliminated ({:.1f}%; {} as tile maps), {} explicit; {} "
      "conversions\n",
      strategyName(a.strategy), t.total, t.eliminated, 100.0 * t.eliminatedShare(), t.tileMapped, t.explicitCount,
      t.conversions);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const TransformStatus& ts = a.transforms[i];
    if (!ts.isTransform || a.nodeClass[i] == OpClass::kNone || (ts.eliminated && !perNode)) continue;
    s += fmt::format("  {:<10} {:<9} {:<14} {}: {}\n", ts.eliminated ? "eliminated" : "explicit",
                     phaseName(g.nodes[i].phase), g.nodes[i].op, g.nodes[i].name, ts.reason);
  }
  return s;
}

std::string formatAssignment(const ir::Graph& g, const LayoutAssignment& a) {
  std::string s = fmt::format("layout assignment: strategy {}, profile {}\n", strategyName(a.strategy), a.profile);
  for (const auto& n : a.notes) s += "  note: " + n + "\n";
  s += formatClassification(g, a);
  s += fmt::format("R-Tiles ({}):\n", a.rtiles.size());
  for (size_t v = 0; v < a.values.size(); ++v) {
    const RTileEntry* e = a.rtileOf(static_cast<ValueId>(v));
    if (!e) continue;
    s += fmt::format("  {} {}: {} [{}]  {}\n", g.values[v].name, ir::shapeToString(g.values[v].shape), tileText(*e),
                     e->note, a.values[v].why);
  }
  s += fmt::format("reads through transformations ({}):\n", a.reads.size());
  for (const ReadThrough& r : a.reads) {
    s += fmt::format("  {}#{} <- {}: {}: {}{}: {}\n", g.nodes[r.consumer].name, r.slot, g.values[r.source].name,
                     r.chainText, readDecisionName(r.decision), r.transposedRead ? " (transposed)" : "", r.reason);
    if (r.decision == ReadThrough::Decision::kTileMap) s += "      tile map " + r.tileMap.str() + "\n";
    else if (r.decision == ReadThrough::Decision::kIndexMap) s += "      index map " + r.view.str() + "\n";
    if (r.sign) s += "      sign " + r.sign->str() + "\n";
  }
  s += fmt::format("FTD-D chains ({}):\n", a.chains.size());
  for (size_t i = 0; i < a.chains.size(); ++i) {
    const FtdChain& c = a.chains[i];
    std::string ops;
    for (NodeId n : c.ops) ops += " " + g.nodes[n].name;
    s += fmt::format("  #{}:{} -> {} (cost {:.4g} -> {:.4g})\n", i, ops, c.chosen ? c.chosen->str() : "own choices",
                     c.costBefore, c.costAfter);
  }
  s += fmt::format("conversions ({}):\n", a.conversions.size());
  for (const Conversion& c : a.conversions)
    s += fmt::format("  {} {}: {}\n", c.consumer == ir::kNoNode ? "-" : g.nodes[c.consumer].name,
                     c.slot >= 0 ? "#" + std::to_string(c.slot) : "out", c.reason);
  s += formatTransforms(g, a, true);
  return s;
}

nlohmann::json classificationToJson(const ir::Graph& g, const LayoutAssignment& a) {
  ClassCounts c = countClasses(g, a);
  nlohmann::json j = nlohmann::json::object();
  for (OpClass k : kClasses) {
    const auto& p = c.byPhase[k];
    j[opClassName(k)] = {{"forward", p[0]}, {"backward", p[1]}, {"optimizer", p[2]}, {"total", p[0] + p[1] + p[2]},
                         {"ops", c.byOp[k]}};
  }
  return j;
}

nlohmann::json transformsToJson(const ir::Graph& g, const LayoutAssignment& a) {
  TransformSummary t = a.summary();
  nlohmann::json ex = nlohmann::json::array(), conv = nlohmann::json::array();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const TransformStatus& ts = a.transforms[i];
    if (ts.isTransform && a.nodeClass[i] != OpClass::kNone && !ts.eliminated)
      ex.push_back({{"node", g.nodes[i].name}, {"op", g.nodes[i].op}, {"phase", phaseName(g.nodes[i].phase)},
                    {"reason", ts.reason}});
  }
  for (const Conversion& c : a.conversions)
    conv.push_back({{"node", c.consumer == ir::kNoNode ? "" : g.nodes[c.consumer].name},
                    {"input", c.slot},
                    {"value", g.values[c.from].name},
                    {"reason", c.reason}});
  return {{"strategy", strategyName(a.strategy)},
          {"total", t.total},
          {"eliminated", t.eliminated},
          {"explicit", t.explicitCount},
          {"tile_mapped", t.tileMapped},
          {"eliminated_share", t.eliminatedShare()},
          {"explicit_nodes", ex},
          {"conversions", conv}};
}

nlohmann::json assignmentToJson(const ir::Graph& g, const LayoutAssignment& a) {
  nlohmann::json values = nlohmann::json::array(), reads = nlohmann::json::array(),
                 chains = nlohmann::json::array(), nodes = nlohmann::json::array();
  for (size_t v = 0; v < a.values.size(); ++v) {
    const RTileEntry* e = a.rtileOf(static_cast<ValueId>(v));
    if (!e) continue;
    values.push_back({{"value", g.values[v].name},
                      {"tile_h", e->tile().tileH},
                      {"tile_w", e->tile().tileW},
                      {"tile", tileText(*e)},
                      {"anchor", a.values[v].anchor},
                      {"note", e->note},
                      {"why", a.values[v].why}});
  }
  for (const ReadThrough& r : a.reads) {
    nlohmann::json j = {{"consumer", g.nodes[r.consumer].name}, {"input", r.slot},
                        {"source", g.values[r.source].name},   {"chain", r.chainText},
                        {"decision", readDecisionName(r.decision)}, {"reason", r.reason},
                        {"transposed", r.transposedRead}, {"view", r.view.str()}};
    if (r.decision == ReadThrough::Decision::kTileMap) j["tile_map"] = r.tileMap.str();
    if (r.sign) j["sign"] = r.sign->str();
    reads.push_back(j);
  }
  for (const FtdChain& c : a.chains) {
    nlohmann::json ops = nlohmann::json::array();
    for (NodeId n : c.ops) ops.push_back(g.nodes[n].name);
    chains.push_back({{"ops", ops}, {"chosen", c.chosen ? c.chosen->str() : ""}, {"cost_before", c.costBefore},
                      {"cost_after", c.costAfter}});
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (a.nodeClass[i] != OpClass::kNone) {
      nlohmann::json n = {{"node", g.nodes[i].name}, {"class", opClassName(a.nodeClass[i])}};
      if (a.transforms[i].isTransform) {
        n["eliminated"] = a.transforms[i].eliminated;
        n["reason"] = a.transforms[i].reason;
      }
      nodes.push_back(n);
    }
  return {{"strategy", strategyName(a.strategy)},
          {"profile", a.profile},
          {"classes", classificationToJson(g, a)},
          {"transforms", transformsToJson(g, a)},
          {"rtiles", values},
          {"reads", reads},
          {"chains", chains},
          {"nodes", nodes},
          {"notes", a.notes}};
}

}  // namespace fbl::passes
