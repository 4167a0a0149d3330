// low-rank-terms: step 5's first rewrite (fusion.h, planLowRankTerms). LoRA's narrow-K products
// are added inside the product their sum joins; fblayout only. The terms need the fusion pass:
// assign-storage withdraws them where it did not run. Never changes the IR.
#pragma once

#include <string>
#include <string_view>

#include "compiler/plan/layout_lowering.h"

namespace fbl::plan {

class LowRankTermsPass {
 public:
  explicit LowRankTermsPass(LayoutLowering& out) : out_(out) {}
  static constexpr std::string_view name() { return "low-rank-terms"; }
  Result<bool> run(ir::Graph& g);  // true when any term was found
  std::string dump(const ir::Graph& g) const;

 private:
  LayoutLowering& out_;
};

}  // namespace fbl::plan
