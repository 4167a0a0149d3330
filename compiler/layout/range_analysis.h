// Range analysis for index expressions: the facts the simplifier's side conditions need.
//
//   1. A value range [lo, hi] (inclusive) for every node, by interval arithmetic bottom-up:
//      a variable is [0, extent-1]; x % c is [x.lo % c, x.hi % c] when x stays inside one
//      period, otherwise [0, c-1]; x / c divides both ends. Intervals saturate instead of
//      overflowing.
//   2. A known divisor d for every node (e == 0 mod d; TVM calls this the modular set with
//      base 0): a constant is divisible by itself, a product multiplies its operand's divisor by
//      the factor, a sum takes the gcd of its terms, x % c keeps gcd(d(x), c), x / c knows 1.
//
// Both are computed once when a node is built (index_expr.cc calls these rules) and cached in
// the node, so querying them is O(1).
#pragma once

#include <cstdint>

#include "compiler/layout/index_expr.h"

namespace fbl::layout {

struct Range {
  int64_t lo = 0;
  int64_t hi = 0;
  bool within(int64_t a, int64_t b) const { return lo >= a && hi < b; }  // inside [a, b)
  bool isPoint() const { return lo == hi; }
  friend bool operator==(const Range&, const Range&) = default;
};

// The cached facts of a built expression.
Range rangeOf(const Expr& e);
// 0 means "divisible by everything" (the constant 0).
int64_t knownDivisor(const Expr& e);
bool provablyDivisible(const Expr& e, int64_t d);

// The interval and divisor rules, applied by the builders.
Range rangeOfSum(Range a, Range b);
Range rangeOfMul(Range a, int64_t c);
Range rangeOfDiv(Range a, int64_t c);
Range rangeOfMod(Range a, int64_t c);
int64_t divisorOfSum(int64_t a, int64_t b);
int64_t divisorOfMul(int64_t a, int64_t c);
int64_t divisorOfMod(int64_t a, int64_t c);

}  // namespace fbl::layout
