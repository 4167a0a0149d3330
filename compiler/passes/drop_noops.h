// drop-noops: removes nodes that pass their input through unchanged -- Identity, Cast and
// CastLike to the dtype the input already has, and Dropout that is the identity (no
// training_mode, training_mode constant false, or ratio constant 0). Runs after
// fold-and-infer, which provides the dtypes and the constant ratios this needs.
#pragma once

#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

class DropNoops {
 public:
  static constexpr std::string_view name() { return "drop-noops"; }
  // True when any node was removed.
  Result<bool> run(ir::Graph& g);
  int64_t dropped() const { return dropped_; }

 private:
  int64_t dropped_ = 0;
};

}  // namespace fbl::passes
