#include "compiler/autodiff/training_summary.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace fbl::autodiff {

namespace {
constexpr std::array<const char*, 3> kPhaseNames{"forward", "backward", "optimizer"};
}  // namespace

TrainingSummary summarizeTrainingGraph(const TrainingGraph& tg) {
  const ir::Graph& g = tg.graph;
  TrainingSummary s;
  std::vector<uint8_t> counted(g.values.size(), 0);
  for (const auto& n : g.nodes) {
    if (n.dead) continue;
    auto phase = static_cast<size_t>(n.phase);
    ++s.nodes[phase];
    ++s.ops[phase][n.op];
    if (n.phase != ir::Phase::Backward) continue;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      ir::ValueId v = n.inputs[k];
      if (v == ir::kNoValue || !g.values[v].reusedByBackward) continue;
      // One edge per (tensor, node), however many operand slots read it (Mul(y, y)).
      if (std::find(n.inputs.begin(), n.inputs.begin() + k, v) != n.inputs.begin() + k) continue;
      const ir::Value& val = g.values[v];
      int64_t bytes = ir::numElements(val.shape) * static_cast<int64_t>(ir::dtypeSize(val.dtype));
      s.reuseEdges.push_back(ReuseEdge{val.name, val.shape, bytes, n.name, n.op});
      if (!counted[v]) {
        counted[v] = 1;
        ++s.reusedTensors;
        s.reusedBytes += bytes;
      }
    }
  }
  s.trainableCount = static_cast<int64_t>(tg.trainables.size());
  for (const auto& t : tg.trainables) s.trainableElements += ir::numElements(g.values[t.param].shape);
  s.stateTensors = static_cast<int64_t>(tg.state.size());
  return s;
}

std::string formatTrainingSummary(const TrainingSummary& s, size_t maxEdges) {
  std::string out = "training graph:\n";
  for (size_t p = 0; p < 3; ++p) {
    out += fmt::format("  {:<9} {:>6} nodes:", kPhaseNames[p], s.nodes[p]);
    for (const auto& [op, count] : s.ops[p]) out += fmt::format(" {} {}", op, count);
    out += "\n";
  }
  out += fmt::format("  trainables: {} tensors, {} elements; optimizer state: {} tensors\n",
                     s.trainableCount, s.trainableElements, s.stateTensors);
  out += fmt::format("  reuse edges: {} (forward tensors read by backward: {}, {} bytes)\n",
                     s.reuseEdges.size(), s.reusedTensors, s.reusedBytes);
  size_t shown = maxEdges == 0 ? s.reuseEdges.size() : std::min(maxEdges, s.reuseEdges.size());
  for (size_t i = 0; i < shown; ++i) {
    const auto& e = s.reuseEdges[i];
    out += fmt::format("    {} {} -> {} ({})\n", e.value, ir::shapeToString(e.shape), e.consumer,
                       e.consumerOp);
  }
  if (shown < s.reuseEdges.size())
    out += fmt::format("    ... {} more\n", s.reuseEdges.size() - shown);
  return out;
}

nlohmann::json trainingSummaryToJson(const TrainingSummary& s) {
  nlohmann::json j;
  for (size_t p = 0; p < 3; ++p)
    j[kPhaseNames[p]] = {{"nodes", s.nodes[p]}, {"ops", s.ops[p]}};
  j["trainables"] = {{"tensors", s.trainableCount}, {"elements", s.trainableElements}};
  j["state_tensors"] = s.stateTensors;
  j["reused_tensors"] = s.reusedTensors;
  j["reused_bytes"] = s.reusedBytes;
  nlohmann::json edges = nlohmann::json::array();
  for (const auto& e : s.reuseEdges)
    edges.push_back({{"value", e.value}, {"shape", e.shape}, {"bytes", e.bytes},
                     {"consumer", e.consumer}, {"op", e.consumerOp}});
  j["reuse_edges"] = std::move(edges);
  return j;
}

}  // namespace fbl::autodiff
