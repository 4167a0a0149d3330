#include "compiler/tools/inspect_command.h"

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "compiler/analysis/model_stats.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/autodiff/training_summary.h"
#include "compiler/onnx/importer.h"
#include "compiler/onnx/load_model.h"
#include "compiler/ops/op_schema.h"

namespace fbl::tools {

int runInspect(const InspectArgs& args) {
  if (args.listOps) {
    for (auto op : ops::supportedOps()) fmt::print("{}\n", op);
    return 0;
  }
  onnx::ImportOptions importOpts;
  importOpts.shapeOverrides = args.shapes;
  auto raw = onnx::importModel(args.model, importOpts);
  if (!raw.ok()) {
    fmt::print(stderr, "error: {}\n", raw.error().message);
    return 1;
  }
  auto graph = onnx::simplifyModel(*raw);
  if (!graph.ok()) {
    fmt::print(stderr, "error: {}\n", graph.error().message);
    return 1;
  }
  analysis::ModelStats stats = analysis::computeModelStats(*raw, *graph, args.trainable);
  std::optional<autodiff::TrainingSummary> training;
  if (args.training) {
    autodiff::TrainingOptions topts;
    topts.trainableGlobs = args.trainable;
    auto tg = autodiff::buildTrainingGraph(*graph, topts);
    if (!tg.ok()) {
      fmt::print(stderr, "error: {}\n", tg.error().message);
      return 1;
    }
    training = autodiff::summarizeTrainingGraph(*tg);
  }
  if (args.json) {
    nlohmann::json j = analysis::modelStatsToJson(stats);
    if (training) j["training"] = autodiff::trainingSummaryToJson(*training);
    fmt::print("{}\n", j.dump(1));
  } else {
    fmt::print("{}", analysis::formatModelStats(stats));
    if (training) fmt::print("\n{}", autodiff::formatTrainingSummary(*training, 20));
  }
  return stats.tensorsWithoutStaticShape == 0 ? 0 : 1;
}

}  // namespace fbl::tools
