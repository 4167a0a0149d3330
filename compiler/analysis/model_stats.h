// What `fblc inspect` reports about a model: op histograms, inputs and outputs, parameter and
// activation sizes, and the candidate trainables.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compiler/ir/graph.h"

namespace fbl::analysis {

struct TensorSummary {
  std::string name;
  ir::Shape shape;
  ir::DType dtype = ir::DType::Undefined;
  bool shapeKnown = false;
};

struct ModelStats {
  std::string path;
  int64_t opset = 0;
  int64_t nodesBefore = 0;  // as imported
  int64_t nodesAfter = 0;   // after folding and clean-up
  std::map<std::string, int64_t> opsBefore, opsAfter;
  std::vector<TensorSummary> inputs, outputs;
  int64_t paramCount = 0;     // initializers
  int64_t paramElements = 0;
  int64_t paramBytes = 0;
  std::string trainablePattern;
  std::vector<TensorSummary> trainables;
  int64_t trainableElements = 0;
  int64_t activationBytes = 0;  // every intermediate tensor of the (forward) graph, summed
  int64_t tensorsWithoutStaticShape = 0;
};

std::map<std::string, int64_t> opHistogram(const ir::Graph& g);

// `raw` is the graph as imported, `simplified` the one after loadModel's clean-up.
ModelStats computeModelStats(const ir::Graph& raw, const ir::Graph& simplified,
                             const std::vector<std::string>& trainableGlobs);

std::string formatModelStats(const ModelStats& s);
nlohmann::json modelStatsToJson(const ModelStats& s);

}  // namespace fbl::analysis
