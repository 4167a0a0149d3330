#include "compiler/plan/low_rank_terms.h"

#include "compiler/plan/fusion.h"
#include "compiler/plan/lowering_printer.h"

namespace fbl::plan {

Result<bool> LowRankTermsPass::run(ir::Graph& g) {
  FBL_ASSERT(out_.strategy == strategy::Strategy::kFBLayout);  // the baselines disable the pass
  return planLowRankTerms(g, out_);
}

std::string LowRankTermsPass::dump(const ir::Graph& g) const { return formatFusion(g, out_); }

}  // namespace fbl::plan
