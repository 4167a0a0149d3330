// The compile report's storage block: compile_report.h.
#include "compiler/driver/compile_report.h"

#include <set>
#include <string>

#include "compiler/ops/op_traits.h"

namespace fbl::driver {

namespace {

// Does a MatMul or Gemm read `v` as one of its two matrices (not a Gemm's bias), directly or
// through movement ops (W^T, reshapes)? `consumers`: Graph::consumers().
bool readByMatmul(const ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers, ir::ValueId v,
                  int depth = 0) {
  if (depth > 8) return false;
  static const std::set<std::string> movement = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten",
                                                 "Identity", "Expand"};
  for (ir::NodeId id : consumers[v]) {
    const ir::Node& n = g.nodes[id];
    if (ops::isProduct(n.op) && (n.inputs[0] == v || (n.inputs.size() > 1 && n.inputs[1] == v)))
      return true;
    if (movement.count(n.op) && !n.outputs.empty() && readByMatmul(g, consumers, n.outputs[0], depth + 1)) return true;
  }
  return false;
}

}  // namespace

nlohmann::json storageReport(const autodiff::TrainingGraph& tg, const plan::Plan& plan, const plan::BuildStats& stats) {
  const ir::Graph& g = tg.graph;
  std::set<ir::ValueId> trainables;
  for (const auto& t : tg.trainables) trainables.insert(t.param);
  int64_t weights = 0, weightsRTile = 0, images = 0, bufferBytes = 0;
  nlohmann::json tiledTrainables = nlohmann::json::array(), untiledWeights = nlohmann::json::array();
  for (const planfile::Tensor& t : plan.tensors) {
    images += t.image();
    bufferBytes += t.bytes;
  }
  const std::vector<std::vector<ir::NodeId>> consumers = g.consumers();
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v) {
    const ir::Value& val = g.values[v];
    if (val.kind != ir::ValueKind::Initializer) continue;
    auto it = stats.tensorOfValue.find(v);
    if (it == stats.tensorOfValue.end()) continue;
    const planfile::Tensor& t = plan.tensors[it->second];
    const bool rtile = t.layout.rfind("rtile", 0) == 0;
    if (trainables.count(v)) {
      if (rtile) tiledTrainables.push_back(val.name);
      continue;
    }
    if (!readByMatmul(g, consumers, v)) continue;
    ++weights;
    weightsRTile += rtile;
    if (!rtile) untiledWeights.push_back(val.name);
  }
  return {{"matmul_weights", weights},
          {"matmul_weights_rtile", weightsRTile},
          {"matmul_weights_not_rtile", untiledWeights},
          {"trainables", tg.trainables.size()},
          {"trainables_rtile", tiledTrainables},
          {"image_tensors", images},
          {"image_objects", plan.imageSlots.size()},
          {"image_bytes", plan.imageBytes()},
          {"buffer_bytes", bufferBytes},
          {"arena_bytes", plan.arenaBytes},
          {"peak_bytes", plan.arenaBytes + plan.imageBytes()}};
}

nlohmann::json baseWeightsReport(const std::string& option, const std::map<std::string, layout::Encoding>& encodings,
                                 const std::map<std::string, std::string>& skipped, const plan::Plan& plan) {
  int64_t encoded = 0, encodedBytes = 0, decodedBytes = 0;
  nlohmann::json storedF32 = nlohmann::json::object();
  const nlohmann::json why = plan.explain.is_object() ? plan.explain.value("storage_why", nlohmann::json::object())
                                                      : nlohmann::json::object();
  for (const planfile::Tensor& t : plan.tensors) {
    if (t.source.empty() || !encodings.count(t.source)) continue;
    if (!t.encoding.empty()) {
      ++encoded;
      encodedBytes += t.bytes;
      decodedBytes += planfile::logicalBytes(t);
    } else {
      storedF32[t.source] = why.value(t.name, std::string());
    }
  }
  return {{"option", option},
          {"encoded", encoded},
          {"encoded_bytes", encodedBytes},
          {"f32_bytes_of_those", decodedBytes},
          {"decoded_but_stored_f32", storedF32},
          {"left_f32", skipped}};
}

}  // namespace fbl::driver
