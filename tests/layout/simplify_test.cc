#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "compiler/layout/index_expr.h"
#include "compiler/layout/range_analysis.h"
#include "compiler/layout/simplify.h"

using namespace fbl::layout;

namespace {

std::vector<Expr> vars3() { return {Expr::var(0, 24, "x0"), Expr::var(1, 8, "x1"), Expr::var(2, 12, "x2")}; }

Expr P(const std::string& s) {
  auto v = vars3();
  auto e = parseExpr(s, v);
  INFO(s);
  REQUIRE(e.ok());
  return *e;
}

// Every point of the variables' box.
template <typename F>
void forAllPoints(const std::vector<int64_t>& extents, F&& f) {
  std::vector<int64_t> p(extents.size(), 0);
  for (;;) {
    f(p);
    size_t d = extents.size();
    while (d > 0 && ++p[d - 1] == extents[d - 1]) p[--d] = 0;
    if (d == 0) return;
  }
}

void requireSameValues(const Expr& a, const Expr& b, const std::vector<int64_t>& extents) {
  forAllPoints(extents, [&](const std::vector<int64_t>& p) {
    if (eval(a, p) != eval(b, p)) {
      INFO(a.str() << "  vs  " << b.str());
      REQUIRE(eval(a, p) == eval(b, p));
    }
  });
}

struct RuleCase {
  const char* rule;
  const char* fires;     // side condition holds
  const char* expected;  // rewrite at the root
  const char* blocked;   // pattern matches, side condition fails: must not fire
};

}  // namespace

TEST_CASE("each rule fires exactly when its side condition holds", "[layout]") {
  // x0 in [0,24), x1 in [0,8), x2 in [0,12).
  const RuleCase cases[] = {
      {"mod-small", "x1 % 8", "x1", "x1 % 7"},
      {"div-of-mul", "x0 * 12 / 4", "x0 * 3", "x0 * 6 / 4"},
      {"div-of-mul-known", "x0 * 4 % 12 * 6 / 8", "x0 * 4 % 12 / 4 * 3", "x0 * 4 % 12 * 5 / 8"},
      {"div-of-mul-coarse", "x0 * 4 / 12", "x0 / 3", "x0 * 6 / 4"},
      {"mod-of-mul", "x0 * 12 % 4", "0", "x0 * 6 % 4"},
      {"mod-of-mul-coarse", "x0 * 4 % 12", "x0 % 3 * 4", "x0 * 6 % 4"},
      {"mod-of-mod", "x0 % 12 % 4", "x0 % 4", "x0 % 12 % 5"},
      {"div-of-mod", "x0 % 12 / 4", "x0 / 4 % 3", "x0 % 12 / 5"},
      {"div-split", "(x0 * 8 + x2) / 4", "x0 * 8 / 4 + x2 / 4", "(x0 * 6 + x2) / 4"},
      {"mod-split", "(x0 * 8 + x2) % 4", "x2 % 4", "(x0 * 6 + x2) % 4"},
      {"div-drop-small", "(x0 * 16 + x1) / 32", "x0 * 16 / 32", "(x0 * 8 + x2) / 32"},
      {"mod-drop-small", "(x0 * 16 + x1) % 32", "x0 * 16 % 32 + x1", "(x0 * 8 + x2) % 32"},
      {"merge-div", "x0 / 4 % 2 * 3 + x0 / 8 * 6 + x1", "x0 / 4 * 3 + x1", "x0 / 4 % 2 * 3 + x0 / 8 * 5 + x1"},
      {"merge-mod", "x0 % 4 + x0 / 4 % 3 * 4", "x0 % 12", "x0 % 4 + x0 / 4 % 3 * 5"},
  };
  for (const RuleCase& c : cases) {
    INFO(c.rule << ": " << c.fires);
    auto out = applyRuleAtRoot(c.rule, P(c.fires));
    REQUIRE(out.ok());
    CHECK(*out == P(c.expected));
    requireSameValues(P(c.fires), *out, {24, 8, 12});
    INFO("blocked: " << c.blocked);
    CHECK_FALSE(applyRuleAtRoot(c.rule, P(c.blocked)).ok());
  }
  // The table and this test list the same rules.
  CHECK(simplifierRules().size() == std::size(cases) + 1);  // + div-of-div (unconditional)
  CHECK(applyRuleAtRoot("div-of-div", P("x0 / 2 / 3")).value() == P("x0 / 6"));
}

TEST_CASE("the paper's rules with side conditions proven from ranges", "[layout]") {
  Expr i = Expr::var(0, 4096, "i"), j = Expr::var(1, 64, "j"), big = Expr::var(1, 65, "j");
  // i mod Ca mod Cb -> i mod Cb when Ca mod Cb == 0, and not otherwise.
  CHECK(simplify(floorMod(floorMod(i, 96), 32)) == floorMod(i, 32));
  CHECK(simplify(floorMod(floorMod(i, 96), 64)) == floorMod(floorMod(i, 96), 64));
  // (i*c + j) / c -> i + j/c, and j/c -> 0 because 0 <= j < c.
  CHECK(simplify(floorDiv(i * 64 + j, 64)) == i);
  CHECK(simplify(floorDiv(i * 64 + big, 64)) == i + floorDiv(big, 64));
  // DEPS.md pitfall 6's example, which LLVM folds only for unsigned values.
  CHECK(simplify(floorMod(floorDiv(i, 64), 8) * 64 + floorMod(i, 64)) == floorMod(i, 512));
  CHECK(simplify(floorDiv(i, 64) * 64 + floorMod(i, 64)) == i);
}

TEST_CASE("simplification preserves values exhaustively on random expressions", "[layout]") {
  std::mt19937 rng(20261130);
  const std::vector<int64_t> extents{6, 4, 12};
  std::vector<Expr> v = {Expr::var(0, 6, "a0"), Expr::var(1, 4, "a1"), Expr::var(2, 12, "a2")};
  const int64_t consts[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 48};
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  std::function<Expr(int)> gen = [&](int depth) -> Expr {
    if (depth == 0 || pick(5) == 0) return pick(6) == 0 ? Expr::constant(pick(20) - 4) : v[pick(3)];
    switch (pick(7)) {
      case 5: {  // mixed-radix digits that should merge back
        Expr x = gen(depth - 1);
        int64_t a = consts[pick(6)], b = consts[pick(6)], k = consts[pick(4)];
        return floorMod(floorDiv(x, a), b) * (a * k) + floorMod(x, a) * k + floorDiv(x, a * b) * (a * b * k);
      }
      case 6: {
        Expr x = gen(depth - 1);
        int64_t a = consts[pick(6)], b = consts[pick(6)];
        return floorMod(floorDiv(x, a * b), b) * (a * b) + floorMod(floorDiv(x, a), b) * a;
      }
      case 0: return gen(depth - 1) + gen(depth - 1);
      case 1: return gen(depth - 1) * (consts[pick(10)] * (pick(8) == 0 ? -1 : 1));
      case 2: return floorDiv(gen(depth - 1), consts[pick(10)]);
      case 3: return floorMod(gen(depth - 1), consts[pick(10)]);
      default: return gen(depth - 1) * consts[pick(10)] + gen(depth - 1);
    }
  };
  int shrunk = 0;
  SimplifyStats stats;
  for (int n = 0; n < 2000; ++n) {
    Expr e = gen(5);
    Expr s = simplify(e, &stats);
    requireSameValues(e, s, extents);
    shrunk += countNodes(s) < countNodes(e);
    INFO(e.str() << "  ->  " << s.str());
    CHECK(countDivMod(s) <= countDivMod(e));
  }
  CHECK(stats.budgetExhausted == 0);
  CHECK(shrunk > 200);
  for (const RuleInfo& r : simplifierRules()) {
    INFO(r.name);
    CHECK(stats.fired[r.name] > 0);  // every rule is exercised by the random expressions
  }
}

// simplify() remembers whole results across calls (a compile asks for the same ones per layer):
// a second call gives the same expression, and a caller that counts rule firings still sees
// them for an expression already remembered.
TEST_CASE("simplify remembers results across calls, and still counts for callers that ask", "[simplify]") {
  const Expr e = P("(x0 * 8 + x1) / 8 * 8 + (x0 * 8 + x1) % 8");
  const Expr first = simplify(e);
  CHECK(first == P("x0 * 8 + x1"));
  CHECK(simplify(e) == first);
  SimplifyStats stats;
  CHECK(simplify(e, &stats) == first);
  int fired = 0;
  for (const auto& [rule, n] : stats.fired) fired += n;
  CHECK(fired > 0);
}
