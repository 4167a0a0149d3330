// dead-code: removes the nodes whose results no graph output depends on, then compacts the
// node list. Values are never removed (ids are stable); unreferenced ones are simply not live.
#pragma once

#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

class DeadCode {
 public:
  static constexpr std::string_view name() { return "dead-code"; }
  // True when any node was removed.
  Result<bool> run(ir::Graph& g);
  int64_t removed() const { return removed_; }

 private:
  int64_t removed_ = 0;
};

}  // namespace fbl::passes
