// The layout pipeline: the pass order is in layout_pipeline.h.
#include "compiler/passes/layout_pipeline.h"

#include <fmt/format.h>

#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/passes/fuse_attention.h"
#include "compiler/passes/global_layout_selection.h"
#include "compiler/passes/tile_index_elimination.h"

namespace fbl::passes {

std::vector<std::string> layoutPassNames() {
  return {std::string(ClassifyOperators::name()), std::string(AssignRTile::name()),
          std::string(TileIndexElimination::name()), std::string(GlobalLayoutSelection::name()),
          std::string(LayoutAssignmentPass::name())};
}

std::vector<std::string> loweringPassNames() { return {"fusion"}; }

std::vector<std::string> graphPassNames() { return {std::string(FuseAttention::name())}; }

Result<LayoutPipelineResult> runLayoutPipeline(ir::Graph& g, const profile::HardwareProfile& p,
                                               const LayoutPipelineOptions& opts) {
  LayoutPipelineResult res;
  LayoutAssignment& a = res.assignment;
  a.strategy = opts.strategy;
  a.profile = p.name;
  ClassifyOperators classify(a);
  AssignRTile assign(a, p);
  TileIndexElimination eliminate(a, p);
  GlobalLayoutSelection select(a, p);
  LayoutAssignmentPass finish(a);
  PassOptions po = opts.passes;
  for (const std::string& n : loweringPassNames()) po.disabled.erase(n);
  for (const std::string& n : graphPassNames()) po.disabled.erase(n);
  if (opts.strategy != strategy::Strategy::kFBLayout)
    for (std::string_view n : {AssignRTile::name(), TileIndexElimination::name(), GlobalLayoutSelection::name()})
      po.disabled.insert(std::string(n));
  PassManager pm(po);
  pm.add(classify, /*required=*/true);
  pm.add(assign);
  pm.add(eliminate);
  pm.add(select);
  pm.add(finish, /*required=*/true);
  FBL_ASSIGN(res.runs, pm.run(g));
  for (const PassRun& r : res.runs) {
    res.totalMs += r.ms;
    if (!r.ran) a.notes.push_back(r.name + " disabled");
  }
  return res;
}

std::string formatPassTimes(const std::vector<PassRun>& runs) {
  std::string s;
  double total = 0;
  for (const PassRun& r : runs) {
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", r.name, r.ran ? fmt::format("{:.1f} ms", r.ms) : "off");
    total += r.ms;
  }
  return s + fmt::format(" (total {:.1f} ms)", total);
}

}  // namespace fbl::passes
