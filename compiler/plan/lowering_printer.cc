#include "compiler/plan/lowering_printer.h"

#include <fmt/format.h>

namespace fbl::plan {

using ir::NodeId;
using ir::ValueId;

namespace {

std::string nodeLabel(const ir::Graph& g, NodeId id) {
  return fmt::format("{} ({})", g.nodes[id].name, g.nodes[id].op);
}
std::string valueLabel(const ir::Graph& g, ValueId v) { return v == ir::kNoValue ? "-" : "%" + g.values[v].name; }

std::string operandText(const ir::Graph& g, const codegen::OperandLayout& ol) {
  return fmt::format("{} through {}{}{}", valueLabel(g, ol.value), ol.layout.str(), ol.transposed ? ", transposed" : "",
                     ol.sign ? ", signed" : "");
}

std::string fusedList(const ir::Graph& g, const std::vector<codegen::FusedOp>& ops) {
  std::string s;
  for (const codegen::FusedOp& op : ops) s += (s.empty() ? "" : ", ") + nodeLabel(g, op.node);
  return s;
}

bool live(const ir::Graph& g, const LayoutLowering& l, NodeId id) {
  return !g.nodes[id].dead && static_cast<size_t>(id) < l.nodes.size();
}

}  // namespace

std::string formatLoweredReads(const ir::Graph& g, const LayoutLowering& l) {
  std::string body;
  int64_t skipped = 0, through = 0, transposed = 0, materialised = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    if (!live(g, l, id)) continue;
    const NodeLowering& nl = l.nodes[id];
    if (nl.skip) {
      ++skipped;
      body += fmt::format("{}: skipped (its readers read through it)\n", nodeLabel(g, id));
    }
    for (size_t s = 0; s < nl.layouts.inputs.size(); ++s) {
      const auto& in = nl.layouts.inputs[s];
      if (!in) continue;
      ++through;
      transposed += in->transposed ? 1 : 0;
      body += fmt::format("{}: input {} reads {}\n", nodeLabel(g, id), s, operandText(g, *in));
    }
    for (const auto& [v, ol] : nl.materialise) {
      ++materialised;
      body += fmt::format("{}: materialises {} first, one copy of {}\n", nodeLabel(g, id), valueLabel(g, v),
                          operandText(g, ol));
    }
  }
  return fmt::format("{}: {} movement ops skipped, {} reads through a map ({} transposed), {} chains materialised\n",
                     strategy::strategyName(l.strategy), skipped, through, transposed, materialised) +
         body;
}

std::string formatFusion(const ir::Graph& g, const LayoutLowering& l) {
  std::string body;
  int64_t fused = 0, epilogues = 0, inlining = 0, lowRank = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    if (!live(g, l, id)) continue;
    const NodeLowering& nl = l.nodes[id];
    fused += nl.fused ? 1 : 0;
    if (const auto& t = nl.layouts.lowRank) {
      ++lowRank;
      std::string scales;
      for (NodeId s : t->scales) scales += " * " + nodeLabel(g, s);
      body += fmt::format("{}: adds the low-rank term {}{}\n", nodeLabel(g, id), nodeLabel(g, t->product), scales);
    }
    if (!nl.layouts.epilogue.empty()) {
      ++epilogues;
      // The value it writes instead of its own output is settled by assign-storage.
      const ValueId w = nl.layouts.epilogueOutput;
      body += fmt::format("{}: epilogue {}{}\n", nodeLabel(g, id), fusedList(g, nl.layouts.epilogue),
                          w == ir::kNoValue ? "" : " -> writes " + valueLabel(g, w));
    }
    if (!nl.layouts.inlined.empty()) {
      ++inlining;
      body += fmt::format("{}: computes inlined {}\n", nodeLabel(g, id), fusedList(g, nl.layouts.inlined));
    }
    if (nl.deferred) body += fmt::format("{}: deferred to its epilogue's last node\n", nodeLabel(g, id));
    if (nl.runs != ir::kNoNode) body += fmt::format("{}: emits {}'s kernel here\n", nodeLabel(g, id), nodeLabel(g, nl.runs));
  }
  return fmt::format("{} nodes fused: {} MatMul epilogues, {} kernels computing inlined producers, {} low-rank terms\n",
                     fused, epilogues, inlining, lowRank) +
         body;
}

std::string formatStorage(const ir::Graph& g, const LayoutLowering& l) {
  const LoweringCounts& c = l.counts;
  std::string s = fmt::format(
      "{} values stored in R-Tiles ({} kept row-major), {} in images, {} host values packed, {} movement kernels\n",
      c.rtileValues, c.rtileDemoted, c.imageValues, c.packedValues, c.movementKernels);
  for (const auto& [v, layout] : l.storage) {
    auto note = l.storageNote.find(v);
    s += fmt::format("{}: stored {}{}\n", valueLabel(g, v), layout.str(),
                     note != l.storageNote.end() ? " (" + note->second + ")" : "");
  }
  for (const auto& [v, why] : l.storageWhy) s += fmt::format("{}: row-major, {}\n", valueLabel(g, v), why);
  for (ValueId v = 0; v < static_cast<ValueId>(l.inKernelOnly.size()); ++v)
    if (l.inKernelOnly[v]) s += fmt::format("{}: only inside a fused kernel\n", valueLabel(g, v));
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id)
    if (live(g, l, id) && l.nodes[id].kind != "compute")
      s += fmt::format("{}: runs as a {} kernel\n", nodeLabel(g, id), l.nodes[id].kind);
  return s;
}

}  // namespace fbl::plan
