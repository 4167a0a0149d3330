// Generated index arithmetic: the OpenCL C statements that turn a linear index over an
// iteration shape into one element offset per operand, each operand read through its own
// strides (0 where it is broadcast). Unsigned arithmetic throughout, so the device compiler can
// fold div/mod by powers of two (see shared/DEPS.md, pitfall 6).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/tensor.h"

namespace fbl::codegen {

struct StridedOperand {
  std::string var;               // the uint it declares ("o_a")
  std::vector<int64_t> strides;  // one per iteration dim, in elements
  int64_t base = 0;
};

// Statements declaring `uint <var> = ...;` for every operand from `linear` (a uint expression)
// over `shape`. Dimensions that every operand walks contiguously are merged first.
std::string emitOffsets(const ir::Shape& shape, const std::string& linear,
                        const std::vector<StridedOperand>& operands, const std::string& indent = "  ");

// Strides of `in` broadcast (right-aligned, numpy rules) to `out`: 0 on broadcast dims.
std::vector<int64_t> broadcastStrides(const ir::Shape& in, const ir::Shape& out);

// A float literal OpenCL C parses exactly ("2.0f", "1e-05f", "INFINITY").
std::string floatLiteral(double v);

}  // namespace fbl::codegen
