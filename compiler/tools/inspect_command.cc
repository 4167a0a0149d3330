#include "compiler/tools/inspect_command.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "compiler/analysis/model_stats.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/autodiff/training_summary.h"
#include "compiler/onnx/importer.h"
#include "compiler/ops/op_schema.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/passes/layout_assignment_printer.h"
#include "compiler/passes/layout_pipeline.h"
#include "compiler/passes/load_model.h"
#include "compiler/profile/profile.h"
#include "compiler/strategy/strategy.h"

namespace fbl::tools {

namespace {

// Table-1 classes and the transformations the layout pipeline eliminates (docs/layout-pipeline.md),
// under --profile (default: the source tree's Adreno 830 profile); classes only without one.
struct LayoutView {
  std::string text;
  nlohmann::json json;
};

LayoutView layoutView(ir::Graph& g, const InspectArgs& args,
                      const passes::LayoutPipelineOptions& opts) {
  std::string path =
      args.profile.empty() ? std::string(FBL_SOURCE_DIR "/profiles/adreno-830.json") : args.profile;
  LayoutView v;
  auto p = profile::loadProfile(path);
  auto res = p.ok() ? passes::runLayoutPipeline(g, *p, opts)
                    : Result<passes::LayoutPipelineResult>(p.error());
  if (res.ok()) {
    v.text = passes::formatClassification(g, res->assignment) + passes::formatTransforms(g, res->assignment, false);
    v.json = {{"classes", passes::classificationToJson(g, res->assignment)},
              {"transforms", passes::transformsToJson(g, res->assignment)},
              {"profile", p->name}};
    return v;
  }
  passes::LayoutAssignment a;
  passes::ClassifyOperators classify(a);
  if (classify.run(g).ok()) {
    v.text = passes::formatClassification(g, a) + "transforms: " + res.error().message + "\n";
    v.json = {{"classes", passes::classificationToJson(g, a)}, {"transforms_error", res.error().message}};
  }
  return v;
}

}  // namespace

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
  auto graph = passes::simplifyModel(*raw);
  if (!graph.ok()) {
    fmt::print(stderr, "error: {}\n", graph.error().message);
    return 1;
  }
  analysis::ModelStats stats = analysis::computeModelStats(*raw, *graph, args.trainable);
  std::optional<autodiff::TrainingSummary> training;
  LayoutView layout;
  if (args.training) {
    autodiff::TrainingOptions topts;
    topts.trainableGlobs = args.trainable;
    auto tg = autodiff::buildTrainingGraph(*graph, topts);
    if (!tg.ok()) {
      fmt::print(stderr, "error: {}\n", tg.error().message);
      return 1;
    }
    training = autodiff::summarizeTrainingGraph(*tg);
    passes::LayoutPipelineOptions popts;
    auto strategy = strategy::parseStrategy(args.strategy);
    if (!strategy.ok()) {
      fmt::print(stderr, "error: {}\n", strategy.error().message);
      return 2;
    }
    popts.strategy = *strategy;
    popts.passes.dumpAfter.insert(args.dumpAfter.begin(), args.dumpAfter.end());
    popts.passes.disabled.insert(args.disabledPasses.begin(), args.disabledPasses.end());
    if (args.verifyPasses) popts.passes.verify = true;
    layout = layoutView(tg->graph, args, popts);
  }
  if (args.json) {
    nlohmann::json j = analysis::modelStatsToJson(stats);
    if (training) j["training"] = autodiff::trainingSummaryToJson(*training);
    if (training) j["layout"] = layout.json;
    fmt::print("{}\n", j.dump(1));
  } else {
    fmt::print("{}", analysis::formatModelStats(stats));
    if (training) fmt::print("\n{}", autodiff::formatTrainingSummary(*training, 20));
    if (training) fmt::print("\n{}", layout.text);
  }
  return stats.tensorsWithoutStaticShape == 0 ? 0 : 1;
}

}  // namespace fbl::tools
