// The layout pipeline: the pass order is in layout_pipeline.h.
#include "compiler/passes/layout_pipeline.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/passes/layout_text.h"

namespace fbl::passes {

std::vector<std::string> layoutPassNames() {
  return {std::string(ClassifyOperators::name()), std::string(AssignRTile::name()),
          std::string(TileIndexElimination::name()), std::string(GlobalLayoutSelection::name()),
          std::string(LayoutAssignmentPass::name())};
}

LayoutPasses::LayoutPasses(LayoutAssignment& a, const profile::HardwareProfile& p)
    : assignment(a), classify(a), assign(a, p), eliminate(a, p), select(a, p), finish(a) {}

void LayoutPasses::disableForStrategy(PassOptions& opts) const {
  if (assignment.strategy != strategy::Strategy::kFBLayout)
    for (std::string_view n : {AssignRTile::name(), TileIndexElimination::name(), GlobalLayoutSelection::name()})
      opts.disabled.insert(std::string(n));
}

void LayoutPasses::addTo(PassManager& pm) {
  LayoutAssignment& a = assignment;
  auto check = [&a](const ir::Graph& g) { return checkAssignment(g, a, /*final=*/false); };
  auto print = [&a](const ir::Graph& g) { return printLayoutGraph(g, a); };
  auto spec = [&](PassSpec s) {
    s.printIR = print;
    return s;
  };
  PassSpec classifySpec = PassSpec::required("every layout pass reads its classes and read chains");
  classifySpec.check = check;
  pm.add(classify, spec(classifySpec));
  pm.add(assign, spec(PassSpec::checked(check)));
  pm.add(eliminate, spec(PassSpec::checked(check)));
  pm.add(select, spec(PassSpec::checked(check)));
  pm.add(finish, spec(PassSpec::required("it decides the reads left undecided and checks the assignment")));
}

void LayoutPasses::noteDisabled(const std::vector<PassRun>& runs) {
  const std::vector<std::string> names = layoutPassNames();
  for (const PassRun& r : runs)
    if (!r.ran && std::find(names.begin(), names.end(), r.name) != names.end())
      assignment.notes.push_back(r.name + " disabled");
}

Result<LayoutPipelineResult> runLayoutPipeline(ir::Graph& g, const profile::HardwareProfile& p,
                                               const LayoutPipelineOptions& opts) {
  LayoutPipelineResult res;
  res.assignment.strategy = opts.strategy;
  res.assignment.profile = p.name;
  LayoutPasses layout(res.assignment, p);
  PassOptions po = opts.passes;
  layout.disableForStrategy(po);
  PassManager pm(po);
  layout.addTo(pm);
  FBL_ASSIGN(res.runs, pm.run(g));
  for (const PassRun& r : res.runs) res.totalMs += r.ms;
  layout.noteDisabled(res.runs);
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
