// Loading a model for the compiler: ONNX import, then the clean-up every later stage assumes
// (Identity and no-op casts dropped, everything that depends only on constants and static
// shapes folded, a static shape and dtype inferred for every tensor, dead nodes removed).
#pragma once

#include <map>
#include <string>

#include "compiler/ir/graph.h"
#include "compiler/passes/dead_code.h"
#include "compiler/passes/decompose_ops.h"
#include "compiler/passes/drop_noops.h"
#include "compiler/passes/fold_and_infer.h"
#include "compiler/passes/pass_manager.h"
#include "compiler/support/result.h"

namespace fbl::passes {

struct LoadOptions {
  // Overrides of graph-input shapes by name (--shape NAME=1x512).
  std::map<std::string, ir::Shape> shapeOverrides;
  // Run folding and shape inference (false: the raw import, as `inspect` shows "before").
  bool simplify = true;
};

// Steps 2-4 of loadModel as passes, for a PassManager that runs more than them (fblc compile's
// pipeline). The passes outlive the manager.
struct LoadPasses {
  // fold-and-infer and decompose-ops are required (every later pass needs static shapes, and
  // Tile and Clip have no kernels); drop-noops and dead-code may be disabled.
  void addTo(PassManager& pm);

  FoldAndInfer fold;
  DecomposeOps decompose;
  DropNoops noops;
  DeadCode dce;
};

Result<ir::Graph> loadModel(const std::string& path, const LoadOptions& opts = {});
// Steps 2-4 of loadModel on a graph already imported (so a caller that also needs the raw
// import, like `fblc inspect`, parses the file once).
Result<ir::Graph> simplifyModel(ir::Graph imported, const PassOptions& opts = {});
// Step 5: an internal error naming the model when a live tensor has no static shape.
Status checkStaticShapes(const ir::Graph& g);

}  // namespace fbl::passes
