#include <catch2/catch.hpp>

#include <vector>

#include "compiler/layout/index_expr.h"
#include "compiler/layout/range_analysis.h"

using namespace fbl::layout;

namespace {

std::vector<Expr> ijk() { return {Expr::var(0, 16, "i"), Expr::var(1, 8, "j"), Expr::var(2, 64, "k")}; }

Expr parse(const std::string& s) {
  auto v = ijk();
  auto e = parseExpr(s, v);
  INFO(s);
  REQUIRE(e.ok());
  return *e;
}

}  // namespace

TEST_CASE("builders keep sums flat, sorted and merged", "[layout]") {
  auto v = ijk();
  Expr i = v[0], j = v[1], k = v[2];
  CHECK((i + (j + 3)) + 2 == (j + i) + 5);
  CHECK((i * 2 + i * 3) == i * 5);
  CHECK((i * 2 + i * -2 + 4).isConst(4));
  CHECK(((i + j) * 4) == i * 4 + j * 4);
  CHECK(((i * 4) * 8) == i * 32);
  CHECK(floorDiv(i, 1) == i);
  CHECK(floorMod(i, 1).isConst(0));
  CHECK(floorDiv(Expr::constant(-1), 4).isConst(-1));
  CHECK(floorMod(Expr::constant(-1), 4).isConst(3));
  CHECK((i * 64 + k + j * 8).str() == "i * 64 + j * 8 + k");
  CHECK((k + -3).str() == "k - 3");
}

TEST_CASE("printer and parser round-trip", "[layout]") {
  for (const char* s : {"i / 64 % 8 * 64 + k % 64", "(i + j) / 4", "i * 64 + j * 8 + k - 5", "(i * 3 + 1) % 7 / 2",
                        "k % 16 * 4 + i / 2 % 3", "i - j * 2 + 40"}) {
    Expr e = parse(s);
    CHECK(parse(e.str()) == e);
  }
  CHECK(parse("(i / 64) % 8").str() == "i / 64 % 8");
  auto v = ijk();
  CHECK_FALSE(parseExpr("i * j", v).ok());
  CHECK_FALSE(parseExpr("i / 0", v).ok());
  CHECK_FALSE(parseExpr("q + 1", v).ok());
  CHECK_FALSE(parseExpr("(i + 1", v).ok());
}

TEST_CASE("eval follows floor semantics", "[layout]") {
  Expr e = parse("(i * 3 - 20) / 4 + (i * 3 - 20) % 4");
  for (int64_t i = 0; i < 16; ++i) {
    int64_t x = i * 3 - 20;
    int64_t q = x >= 0 ? x / 4 : -((-x + 3) / 4);
    std::vector<int64_t> pt{i, 0, 0};
    CHECK(eval(e, pt) == q + (x - 4 * q));
  }
}

TEST_CASE("range analysis: intervals and known divisors", "[layout]") {
  CHECK(rangeOf(parse("i * 64 + j * 8 + k")) == Range{0, 15 * 64 + 7 * 8 + 63});
  CHECK(rangeOf(parse("k % 16")) == Range{0, 15});
  CHECK(rangeOf(parse("(k + 64) % 128")) == Range{64, 127});  // stays inside one period
  CHECK(rangeOf(parse("k / 8")) == Range{0, 7});
  CHECK(rangeOf(parse("j - 10")) == Range{-10, -3});
  CHECK(knownDivisor(parse("i * 64 + j * 8")) == 8);
  CHECK(knownDivisor(parse("i * 48 % 32")) == 16);
  CHECK(knownDivisor(parse("i / 2")) == 1);
  CHECK(provablyDivisible(parse("i * 12 + 36"), 4));
  CHECK_FALSE(provablyDivisible(parse("i * 12 + 2"), 4));
}

TEST_CASE("OpenCL printer emits unsigned arithmetic or refuses", "[layout]") {
  auto ok = toOpenCL(parse("i / 64 % 8 * 64 + k % 64"));
  REQUIRE(ok.ok());
  CHECK(*ok == "i / 64u % 8u * 64u + k % 64u");
  auto sub = toOpenCL(parse("i - j + 10"));
  REQUIRE(sub.ok());
  CHECK(*sub == "i + 10u - j");  // positive terms first, so uint never wraps mid-sum
  CHECK_FALSE(toOpenCL(parse("i - 20")).ok());          // may be negative
  CHECK_FALSE(toOpenCL(parse("(i - 8) / 4 + 2")).ok());  // negative division operand
  auto big = Expr::var(0, int64_t{1} << 33, "n");
  CHECK_FALSE(toOpenCL(big).ok());
}

TEST_CASE("countDivMod counts printed divisions and modulos", "[layout]") {
  CHECK(countDivMod(parse("i / 64 % 8 * 64 + k % 64")) == 3);
  CHECK(countDivMod(parse("i * 64 + j")) == 0);
  CHECK(countDivMod(parse("(i + k / 4) / 4 % 2")) == 3);
}
