// The reference executor's kernels: plain fp32/int64 loops, one per op, written for clarity and
// checked element by element. They define the semantics every generated OpenCL kernel is
// compared against, and constant folding runs them at compile time.
#pragma once

#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::ref {

using Inputs = std::vector<const ir::Tensor*>;  // nullptr for an omitted optional input
using EvalFn = Result<std::vector<ir::Tensor>> (*)(const ir::Node&, const Inputs&);

// nullptr when no kernel exists for the op.
EvalFn findKernel(std::string_view op);

// Evaluates one node; errors name the node.
Result<std::vector<ir::Tensor>> evalNode(const ir::Graph& g, const ir::Node& n,
                                         const Inputs& inputs);

}  // namespace fbl::ref
