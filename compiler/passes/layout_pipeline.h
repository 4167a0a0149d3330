// The layout pipeline (paper Fig. 7 after graph construction): the joint training graph in, a
// LayoutAssignment out. Passes, in order, each switchable off for ablation (--disable-pass):
//
//   classify-operators       Table 1 classes; reads through movement chains (required)
//   assign-rtile             anchors: one R-Tile per FTD-D operand tensor by Eq. 2
//   tile-index-elimination   the three tile checks; tile maps, reconfiguration, explicit fallbacks
//   global-layout-selection  propagation through FTI-C/FTD-C; greedy search on FTD-D chains
//   layout-assignment        conversions still needed; final readability check (required)
//
// The paper's breakdown (Sec. 5.4): "R-Tile alone" disables tile-index-elimination and
// global-layout-selection, "+ index elimination" disables global-layout-selection, and the full
// pipeline adds global selection. The baseline strategies `reuse` and `explicit` run only the
// required passes: no R-Tile, every movement op a kernel. With the verifier on, the
// assignment's own check (checkAssignment) runs after every pass, as the IR verifier does.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/passes/global_layout_selection.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/passes/pass_manager.h"
#include "compiler/passes/tile_index_elimination.h"
#include "compiler/profile/profile.h"
#include "compiler/strategy/strategy.h"
#include "compiler/support/result.h"

namespace fbl::passes {

struct LayoutPipelineOptions {
  strategy::Strategy strategy = strategy::Strategy::kFBLayout;
  PassOptions passes;  // verify, dumpAfter, disabled
};

struct LayoutPipelineResult {
  LayoutAssignment assignment;
  std::vector<PassRun> runs;
  double totalMs = 0;
};

// The pass names in pipeline order.
std::vector<std::string> layoutPassNames();

// The five passes over one assignment, for a PassManager that runs more than the pipeline
// (fblc compile's). The passes outlive the manager.
struct LayoutPasses {
  LayoutPasses(LayoutAssignment& a, const profile::HardwareProfile& p);
  // A baseline strategy (reuse, explicit) runs only the required passes.
  void disableForStrategy(PassOptions& opts) const;
  // Adds the five in order; with the verifier, checkAssignment runs after each.
  void addTo(PassManager& pm);
  // "NAME disabled" in the assignment's notes for each of them that did not run.
  void noteDisabled(const std::vector<PassRun>& runs);

  LayoutAssignment& assignment;
  ClassifyOperators classify;
  AssignRTile assign;
  TileIndexElimination eliminate;
  GlobalLayoutSelection select;
  LayoutAssignmentPass finish;
};

Result<LayoutPipelineResult> runLayoutPipeline(ir::Graph& g, const profile::HardwareProfile& p,
                                               const LayoutPipelineOptions& opts = {});

// "classify-operators 1.2 ms, assign-rtile 3.4 ms, ... (total 9.9 ms)".
std::string formatPassTimes(const std::vector<PassRun>& runs);

}  // namespace fbl::passes
