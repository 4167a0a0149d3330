// layout lowering: the product the four passes share, and the passes in order (the algorithm
// is in layout_lowering.h; each pass in its own file pair).
#include "compiler/plan/layout_lowering.h"

#include "compiler/passes/layout_text.h"
#include "compiler/plan/assign_storage.h"
#include "compiler/plan/fusion.h"
#include "compiler/plan/low_rank_terms.h"
#include "compiler/plan/lower_layouts.h"

namespace fbl::plan {

using ir::NodeId;

std::vector<std::vector<ValueRead>> valueReads(const ir::Graph& g, const LayoutLowering& l) {
  std::vector<std::vector<ValueRead>> reads(g.values.size());
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const ir::Node& n = g.nodes[id];
    const NodeLowering& nl = l.nodes[id];
    if (n.dead || (nl.skip && !nl.fused)) continue;
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      if (nl.layouts.inputs[s]) reads[nl.layouts.inputs[s]->value].push_back({id, static_cast<int>(s), true});
      else if (n.inputs[s] != ir::kNoValue) reads[n.inputs[s]].push_back({id, static_cast<int>(s), false});
    }
    for (const auto& [v, from] : nl.materialise) reads[from.value].push_back({id, -1, true});
  }
  return reads;
}

LoweringPasses::LoweringPasses(const passes::LayoutAssignment& a, const std::vector<ir::ValueId>& mustExist,
                               const LoweringOptions& options)
    : assignment_(a),
      out_(std::make_unique<LayoutLowering>()),
      lower_(std::make_unique<LowerLayoutsPass>(a, mustExist, *out_)),
      lowRank_(std::make_unique<LowRankTermsPass>(*out_)),
      fusion_(std::make_unique<FusionPass>(*out_)),
      storage_(std::make_unique<AssignStoragePass>(a, options, *out_)) {}

LoweringPasses::~LoweringPasses() = default;

void LoweringPasses::addTo(passes::PassManager& pm) {
  // Dumps print the IR with the assignment the passes lower (they never change the IR).
  const passes::LayoutAssignment& a = assignment_;
  auto spec = [&a](passes::PassSpec s) {
    s.printIR = [&a](const ir::Graph& g) { return passes::printLayoutGraph(g, a); };
    return s;
  };
  pm.add(*lower_, spec(passes::PassSpec::required("the plan builder needs to know what each node runs and reads")));
  pm.add(*lowRank_, spec({}));
  pm.add(*fusion_, spec({}));
  pm.add(*storage_, spec(passes::PassSpec::required("the plan builder needs every tensor's layout")));
}

void LoweringPasses::disableForStrategy(passes::PassOptions& po) const {
  if (assignment_.strategy == strategy::Strategy::kFBLayout) return;
  po.disabled.insert(std::string(LowRankTermsPass::name()));
  po.disabled.insert(std::string(FusionPass::name()));
}

LayoutLowering& LoweringPasses::result() { return *out_; }

}  // namespace fbl::plan
