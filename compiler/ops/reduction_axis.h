// Which axis of an input an op reduces over (a MatMul's K, a Softmax's axis, a loss's classes).
#pragma once

#include <optional>

#include "compiler/ir/graph.h"

namespace fbl::ops {

// The reduction a consumer performs on input `slot`, as an axis of that input (nullopt: none).
std::optional<int64_t> reductionAxis(const ir::Graph& g, const ir::Node& n, int slot);

}  // namespace fbl::ops
