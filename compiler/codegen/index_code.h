// Generated index arithmetic: the OpenCL C statements that turn a linear index over an
// iteration shape into one element offset per operand, each operand read through its own
// strides (0 where it is broadcast). Unsigned arithmetic throughout, so the device compiler can
// fold div/mod by powers of two (see shared/DEPS.md, pitfall 6).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/tensor.h"
#include "compiler/layout/layout.h"

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

// An operand read (or the output written) through a Layout: `layout` maps the operand's own
// index (its shape, broadcast numpy style against the iteration shape) to a buffer offset.
struct LayoutOperand {
  std::string var;  // the uint offset it declares
  layout::Layout layout;
  std::optional<layout::Expr> sign;  // +-1 over the operand's index; declares `bool <var>_pos`
};

// Statements declaring every operand's offset (and sign) from `linear` over `shape`. Layouts
// whose offset is affine in the index (row-major, permuted, sliced) and carry no sign go through
// emitOffsets (merged dims); otherwise the coordinates are peeled once and each offset is the
// operand's layout composed with its broadcast view, simplified and printed unsigned.
Result<std::string> emitLayoutOffsets(const ir::Shape& shape, const std::string& linear,
                                      const std::vector<LayoutOperand>& operands,
                                      const std::string& indent = "  ");

// Strides of `in` broadcast (right-aligned, numpy rules) to `out`: 0 on broadcast dims.
std::vector<int64_t> broadcastStrides(const ir::Shape& in, const ir::Shape& out);

// A float literal OpenCL C parses exactly ("2.0f", "1e-05f", "INFINITY").
std::string floatLiteral(double v);

}  // namespace fbl::codegen
