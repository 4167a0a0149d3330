#include "compiler/tools/inspect_command.h"

#include <cstdio>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "compiler/analysis/model_stats.h"
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
  onnx::LoadOptions loadOpts;
  loadOpts.shapeOverrides = args.shapes;
  auto graph = onnx::loadModel(args.model, loadOpts);
  if (!graph.ok()) {
    fmt::print(stderr, "error: {}\n", graph.error().message);
    return 1;
  }
  analysis::ModelStats stats = analysis::computeModelStats(*raw, *graph, args.trainable);
  if (args.json) {
    fmt::print("{}\n", analysis::modelStatsToJson(stats).dump(1));
  } else {
    fmt::print("{}", analysis::formatModelStats(stats));
  }
  return stats.tensorsWithoutStaticShape == 0 ? 0 : 1;
}

}  // namespace fbl::tools
