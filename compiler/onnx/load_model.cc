// loadModel: the pipeline every later stage assumes.
//   1. importModel (shape overrides applied; a symbolic input dimension with no override is an
//      error naming the input).
//   2. fold-and-infer: static shapes and dtypes everywhere; constant-only chains folded.
//   3. drop-noops: Identity, same-dtype Cast/CastLike, identity Dropout (needs step 2's dtypes).
//   4. dead-code: drops what folding and step 3 left unused, and compacts.
#include "compiler/onnx/load_model.h"

#include "compiler/onnx/importer.h"
#include "compiler/passes/dead_code.h"
#include "compiler/passes/drop_noops.h"
#include "compiler/passes/fold_and_infer.h"

namespace fbl::onnx {

Result<ir::Graph> loadModel(const std::string& path, const LoadOptions& opts) {
  ImportOptions importOpts;
  importOpts.shapeOverrides = opts.shapeOverrides;
  FBL_ASSIGN(ir::Graph g, importModel(path, importOpts));
  if (!opts.simplify) return g;
  return simplifyModel(std::move(g));
}

Result<ir::Graph> simplifyModel(ir::Graph g) {
  const std::string& path = g.sourcePath;
  passes::FoldAndInfer fold;
  FBL_TRY(fold.run(g));
  passes::DropNoops noops;
  FBL_TRY(noops.run(g));
  passes::DeadCode dce;
  FBL_TRY(dce.run(g));
  int64_t unknown = passes::countValuesWithoutStaticShape(g);
  if (unknown != 0)
    return makeError("{}: internal error: {} tensors have no static shape after loading", path,
                     unknown);
  return g;
}

}  // namespace fbl::onnx
