// Index simplification: a table of one-line rewrite rules, each with a side condition proven
// by range analysis (range_analysis.h), in the style of TVM's rewrite_simplify. Every rule is
// an identity of floor division/modulo, so a rewrite never changes a value on the variables'
// domain; docs/index-simplification.md lists the rules with their proofs.
//
// Algorithm (simplify):
//   1. Simplify the operands bottom-up and rebuild the node (the builders fold constants and
//      keep sums flat, sorted and merged).
//   2. If range analysis pins the node to one value, it is that constant.
//   3. Otherwise try the rules whose pattern root matches the node, in table order; the first
//      one whose pattern matches and whose side condition holds rewrites the node, and the
//      result is simplified again from step 1. A result with more divisions and modulos than
//      the node had is discarded and the next rule is tried, so simplification never raises
//      the div/mod count.
//   4. A rewrite budget bounds the work; running out keeps the (still correct) current form and
//      is counted in SimplifyStats so tests can insist it never happens.
// Results are remembered across calls (per thread, a bounded table), except those that ran out
// of budget; a call given SimplifyStats always runs, so that its counts are whole.
//
// Pattern language: x, y, z match expressions; a..f match constants. Inside a sum pattern
// `x * a` also matches a bare term with a = 1 and `x / a` a term that is not a division with
// a = 1, so one rule covers every coefficient. A sum pattern made of explicit terms plus a
// trailing wildcard binds that wildcard to the remaining terms (possibly none); the pattern
// `x + y` alone splits the terms by divisibility: x takes the terms whose known divisor is a
// multiple of one of the divisors present, y the rest (both non-empty).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/layout/index_expr.h"

namespace fbl::layout {

struct SimplifyStats {
  std::map<std::string, int> fired;  // rule name -> rewrites
  int budgetExhausted = 0;
};

Expr simplify(const Expr& e, SimplifyStats* stats = nullptr);

struct RuleInfo {
  std::string name, pattern, rewrite, condition;
};
// The rule table, for documentation and tests.
std::vector<RuleInfo> simplifierRules();

// Applies only the named rule at the root of e (operands untouched); nullopt-like empty
// result when the pattern does not match or the side condition fails. For rule tests.
Result<Expr> applyRuleAtRoot(const std::string& rule, const Expr& e);

}  // namespace fbl::layout
