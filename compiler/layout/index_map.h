// IndexMap: a function from the integer points of a box (the domain, one variable per dim) to
// a tuple of coordinates, each an index expression over those variables. Movement ops are
// IndexMaps from the consumer's index to the producer's index; a Layout (layout.h) is an
// IndexMap from a tensor's logical index to a physical location. Composition is substitution.
//
//   auto v = movementMap({2, 3, 4}, MovementOp::permute({2, 0, 1}));  // [4,2,3] -> [2,3,4]
//   v->outputs() is {i1, i2, i0}: consumer (i0, i1, i2) reads producer (i1, i2, i0).
//
// inverse() works by digit analysis: when every output coordinate is a sum of "digits"
// (x / a % b) * c of the input variables, the digits of each variable tile its mixed-radix
// representation exactly, and within each output the digits' coefficients do not overlap, the
// map is injective and each variable is rebuilt from the digits read back out of the outputs.
// Other maps (slices with gaps are fine; broadcasts, or reshapes that mix digits of several
// variables into one non-digit expression, are not) report why there is no inverse.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "compiler/ir/tensor.h"
#include "compiler/layout/index_expr.h"

namespace fbl::layout {

using ir::Shape;

class IndexMap {
 public:
  IndexMap() = default;
  // outputs are expressions over variables 0..domain.size()-1 (see vars()); codomain gives
  // the extent of every output coordinate (the box the values land in).
  IndexMap(Shape domain, std::vector<Expr> outputs, Shape codomain);
  static IndexMap identity(const Shape& shape);
  // The variables of a domain: var(d, shape[d], "i<d>").
  static std::vector<Expr> vars(const Shape& domain);

  const Shape& domain() const { return domain_; }
  const Shape& codomain() const { return codomain_; }
  const std::vector<Expr>& outputs() const { return outputs_; }

  std::vector<int64_t> apply(std::span<const int64_t> index) const;
  IndexMap simplified() const;
  int countDivMod() const;
  // Same domain, codomain and (structurally) outputs; simplify first for a semantic-ish test.
  friend bool operator==(const IndexMap& a, const IndexMap& b);
  // "[4,2,3] -> [2,3,4]: (i1, i2, i0)"
  std::string str() const;

  Result<IndexMap> inverse() const;

 private:
  Shape domain_, codomain_;
  std::vector<Expr> outputs_;
};

// outer ∘ inner: inner's outputs feed outer's inputs (inner.codomain() == outer.domain()).
// Not simplified, so div/mod counts before simplification stay observable.
Result<IndexMap> compose(const IndexMap& outer, const IndexMap& inner);

}  // namespace fbl::layout
