// What `fblc inspect --training` reports about a joint training graph: node and op counts per
// phase, the trainables, and the reuse edges (forward tensors that backward nodes read again,
// which must stay alive, or be recomputed, until backward reaches them).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compiler/autodiff/training_graph.h"

namespace fbl::autodiff {

struct ReuseEdge {
  std::string value;     // the forward tensor
  ir::Shape shape;
  int64_t bytes = 0;
  std::string consumer;  // the backward node that reads it
  std::string consumerOp;
};

struct TrainingSummary {
  // Indexed by ir::Phase: Forward, Backward, Optimizer.
  std::array<int64_t, 3> nodes{};
  std::array<std::map<std::string, int64_t>, 3> ops;
  int64_t trainableCount = 0;
  int64_t trainableElements = 0;
  int64_t stateTensors = 0;
  std::vector<ReuseEdge> reuseEdges;  // in backward node order
  int64_t reusedTensors = 0;          // distinct forward tensors with a reuse edge
  int64_t reusedBytes = 0;            // their total size
};

TrainingSummary summarizeTrainingGraph(const TrainingGraph& tg);
// Human-readable; lists at most `maxEdges` reuse edges (all when 0).
std::string formatTrainingSummary(const TrainingSummary& s, size_t maxEdges = 0);
nlohmann::json trainingSummaryToJson(const TrainingSummary& s);

}  // namespace fbl::autodiff
