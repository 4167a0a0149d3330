// assign-storage: step 4 of layout_lowering.h, the end of step 5 (fusion's operand layouts,
// or the low-rank terms withdrawn where fusion did not run) and step 6 (launch kinds and
// counts). Every value gets its storage: an R-Tile, an image, a transposed or encoded matrix, or
// row-major; every read and write composes with it. Never changes the IR.
#pragma once

#include <string>
#include <string_view>

#include "compiler/plan/layout_lowering.h"

namespace fbl::plan {

class AssignStoragePass {
 public:
  AssignStoragePass(const passes::LayoutAssignment& a, const LoweringOptions& options, LayoutLowering& out)
      : a_(a), options_(options), out_(out) {}
  static constexpr std::string_view name() { return "assign-storage"; }
  Result<bool> run(ir::Graph& g);  // never changes the IR
  std::string dump(const ir::Graph& g) const;

 private:
  const passes::LayoutAssignment& a_;
  const LoweringOptions& options_;
  LayoutLowering& out_;
};

}  // namespace fbl::plan
