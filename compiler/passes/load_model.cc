// loadModel: the pipeline every later stage assumes.
//   1. importModel (shape overrides applied; a symbolic input dimension with no override is an
//      error naming the input).
//   2. fold-and-infer: static shapes and dtypes everywhere; constant-only chains folded.
//   2b. decompose-ops: what is left of Tile and Clip becomes ops with kernels.
//   3. drop-noops: Identity, same-dtype Cast/CastLike, identity Dropout (needs step 2's dtypes).
//   4. dead-code: drops what folding and step 3 left unused, and compacts.
//   5. Every live tensor has a static shape (an internal error otherwise).
// Steps 2-4 run under a PassManager (LoadPasses), so --dump-after, --disable-pass and the
// verifier see them.
#include "compiler/passes/load_model.h"

#include "compiler/onnx/importer.h"

namespace fbl::passes {

void LoadPasses::addTo(PassManager& pm) {
  PassSpec foldSpec = PassSpec::required("every later pass needs static shapes and dtypes");
  foldSpec.infersShapes = true;
  pm.add(fold, foldSpec);
  pm.add(decompose, PassSpec::required("Tile and Clip have no kernels of their own"));
  pm.add(noops);
  pm.add(dce);
}

Result<ir::Graph> loadModel(const std::string& path, const LoadOptions& opts) {
  onnx::ImportOptions importOpts;
  importOpts.shapeOverrides = opts.shapeOverrides;
  FBL_ASSIGN(ir::Graph g, onnx::importModel(path, importOpts));
  if (!opts.simplify) return g;
  return simplifyModel(std::move(g));
}

Result<ir::Graph> simplifyModel(ir::Graph g, const PassOptions& opts) {
  LoadPasses load;
  PassManager pm(opts);
  load.addTo(pm);
  // Its passes' errors quote the file's names, which may hold any bytes: one line each way out
  // (loadModel and fblc inspect both come through here).
  if (auto ran = pm.run(g); !ran.ok()) return oneLine(ran.error());
  if (Status st = checkStaticShapes(g); !st.ok()) return oneLine(st.error());
  return g;
}

Status checkStaticShapes(const ir::Graph& g) {
  int64_t unknown = countValuesWithoutStaticShape(g);
  if (unknown != 0)
    return makeError("{}: internal error: {} tensors have no static shape after loading", g.sourcePath, unknown);
  return Status::success();
}

}  // namespace fbl::passes
