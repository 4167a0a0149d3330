// lower-layouts: steps 1-3 of layout_lowering.h. Which reads go through a composed map, which
// chains one copy kernel materialises, and which movement ops run at all. It fills the
// LayoutLowering the later lowering passes share, and never changes the IR.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/plan/layout_lowering.h"

namespace fbl::plan {

class LowerLayoutsPass {
 public:
  LowerLayoutsPass(const passes::LayoutAssignment& a, const std::vector<ir::ValueId>& mustExist, LayoutLowering& out)
      : a_(a), mustExist_(mustExist), out_(out) {}
  static constexpr std::string_view name() { return "lower-layouts"; }
  Result<bool> run(ir::Graph& g);  // never changes the IR
  std::string dump(const ir::Graph& g) const;  // --dump-after: lowering_printer.h

 private:
  const passes::LayoutAssignment& a_;
  const std::vector<ir::ValueId>& mustExist_;
  LayoutLowering& out_;
};

}  // namespace fbl::plan
