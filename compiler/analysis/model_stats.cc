#include "compiler/analysis/model_stats.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "compiler/support/glob.h"

namespace fbl::analysis {

namespace {

TensorSummary summarize(const ir::Value& v) {
  return TensorSummary{v.name, v.shape, v.dtype, v.shapeKnown};
}

int64_t bytesOf(const ir::Value& v) {
  return ir::numElements(v.shape) * static_cast<int64_t>(ir::dtypeSize(v.dtype));
}

std::string shapeText(const TensorSummary& t) {
  return t.shapeKnown ? ir::shapeToString(t.shape) : std::string("[?]");
}

// 1234567 -> "1,234,567": sizes are read by people.
std::string grouped(int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return n < 0 ? "-" + out : out;
}

nlohmann::json tensorJson(const TensorSummary& t) {
  return {{"name", t.name},
          {"shape", t.shapeKnown ? nlohmann::json(t.shape) : nlohmann::json(nullptr)},
          {"dtype", std::string(ir::dtypeName(t.dtype))}};
}

}  // namespace

std::map<std::string, int64_t> opHistogram(const ir::Graph& g) {
  std::map<std::string, int64_t> h;
  for (const auto& n : g.nodes)
    if (!n.dead) ++h[n.op];
  return h;
}

ModelStats computeModelStats(const ir::Graph& raw, const ir::Graph& g,
                             const std::vector<std::string>& trainableGlobs) {
  ModelStats s;
  s.path = g.sourcePath;
  s.opset = g.opset;
  s.nodesBefore = static_cast<int64_t>(raw.liveNodeCount());
  s.nodesAfter = static_cast<int64_t>(g.liveNodeCount());
  s.opsBefore = opHistogram(raw);
  s.opsAfter = opHistogram(g);
  for (ir::ValueId v : g.inputs) s.inputs.push_back(summarize(g.values[v]));
  for (ir::ValueId v : g.outputs) s.outputs.push_back(summarize(g.values[v]));
  s.trainablePattern = fmt::format("{}", fmt::join(trainableGlobs, " "));

  // Parameters are counted on the raw import: folding may consume buffers such as RoPE's
  // inv_freq, but they are still part of the model file.
  for (const auto& v : raw.values) {
    if (v.kind != ir::ValueKind::Initializer) continue;
    ++s.paramCount;
    s.paramElements += ir::numElements(v.shape);
    s.paramBytes += bytesOf(v);
    for (const auto& pat : trainableGlobs) {
      if (!globMatch(pat, v.name)) continue;
      s.trainables.push_back(summarize(v));
      s.trainableElements += ir::numElements(v.shape);
      break;
    }
  }

  std::vector<bool> live = g.liveValues();
  for (size_t i = 0; i < g.values.size(); ++i) {
    if (!live[i]) continue;
    const ir::Value& v = g.values[i];
    if (!v.shapeKnown || v.dtype == ir::DType::Undefined) {
      ++s.tensorsWithoutStaticShape;
      continue;
    }
    if (v.kind == ir::ValueKind::Intermediate) s.activationBytes += bytesOf(v);
  }
  return s;
}

std::string formatModelStats(const ModelStats& s) {
  std::string out;
  auto line = [&](const std::string& text) {
    out += text;
    out += '\n';
  };
  auto tensorLine = [&](const TensorSummary& t) {
    line(fmt::format("  {:<40} {} {}", t.name, ir::dtypeName(t.dtype), shapeText(t)));
  };
  line(fmt::format("model       {}", s.path));
  line(fmt::format("opset       {}", s.opset));
  line(fmt::format("nodes       {} imported, {} after folding", grouped(s.nodesBefore),
                   grouped(s.nodesAfter)));
  line("inputs");
  for (const auto& t : s.inputs) tensorLine(t);
  line("outputs");
  for (const auto& t : s.outputs) tensorLine(t);
  line(fmt::format("parameters  {} tensors, {} elements, {} bytes", grouped(s.paramCount),
                   grouped(s.paramElements), grouped(s.paramBytes)));
  line(fmt::format("trainable   {} tensors, {} elements (pattern {})",
                   grouped(static_cast<int64_t>(s.trainables.size())),
                   grouped(s.trainableElements), s.trainablePattern));
  line(fmt::format("activations {} bytes (forward intermediates)", grouped(s.activationBytes)));
  line(fmt::format("unshaped    {} tensors without a static shape", s.tensorsWithoutStaticShape));
  line("ops (imported -> after folding)");
  std::map<std::string, std::pair<int64_t, int64_t>> both;
  for (const auto& [op, c] : s.opsBefore) both[op].first = c;
  for (const auto& [op, c] : s.opsAfter) both[op].second = c;
  for (const auto& [op, c] : both)
    line(fmt::format("  {:<28} {:>6} -> {:>6}", op, c.first, c.second));
  return out;
}

nlohmann::json modelStatsToJson(const ModelStats& s) {
  nlohmann::json j;
  j["model"] = s.path;
  j["opset"] = s.opset;
  j["nodes"] = s.nodesAfter;
  j["nodes_imported"] = s.nodesBefore;
  j["ops"] = s.opsAfter;
  j["ops_imported"] = s.opsBefore;
  j["inputs"] = nlohmann::json::array();
  for (const auto& t : s.inputs) j["inputs"].push_back(tensorJson(t));
  j["outputs"] = nlohmann::json::array();
  for (const auto& t : s.outputs) j["outputs"].push_back(tensorJson(t));
  j["parameters"] = {{"count", s.paramCount}, {"elements", s.paramElements}, {"bytes", s.paramBytes}};
  nlohmann::json names = nlohmann::json::array();
  for (const auto& t : s.trainables) names.push_back(t.name);
  j["trainable"] = {{"pattern", s.trainablePattern},
                    {"count", s.trainables.size()},
                    {"elements", s.trainableElements},
                    {"names", names}};
  j["activation_bytes"] = s.activationBytes;
  j["tensors_without_static_shape"] = s.tensorsWithoutStaticShape;
  return j;
}

}  // namespace fbl::analysis
