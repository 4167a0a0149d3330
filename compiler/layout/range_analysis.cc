#include "compiler/layout/range_analysis.h"

#include <limits>
#include <numeric>

namespace fbl::layout {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
constexpr int64_t kMin = -kMax;

int64_t clampAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return (a > 0) ? kMax : kMin;
  return std::min(kMax, std::max(kMin, r));
}

int64_t clampMul(int64_t a, int64_t c) {
  int64_t r;
  if (__builtin_mul_overflow(a, c, &r)) return ((a > 0) == (c > 0)) ? kMax : kMin;
  return std::min(kMax, std::max(kMin, r));
}

}  // namespace

Range rangeOfSum(Range a, Range b) { return {clampAdd(a.lo, b.lo), clampAdd(a.hi, b.hi)}; }

Range rangeOfMul(Range a, int64_t c) {
  int64_t x = clampMul(a.lo, c), y = clampMul(a.hi, c);
  return {std::min(x, y), std::max(x, y)};
}

Range rangeOfDiv(Range a, int64_t c) { return {floorDivInt(a.lo, c), floorDivInt(a.hi, c)}; }

Range rangeOfMod(Range a, int64_t c) {
  if (floorDivInt(a.lo, c) == floorDivInt(a.hi, c)) return {floorModInt(a.lo, c), floorModInt(a.hi, c)};
  return {0, c - 1};
}

int64_t divisorOfSum(int64_t a, int64_t b) { return std::gcd(a, b); }  // gcd(0, b) == b

int64_t divisorOfMul(int64_t a, int64_t c) {
  int64_t r;
  if (__builtin_mul_overflow(a, c < 0 ? -c : c, &r)) return 1;
  return r;
}

// x % c == x - c * (x / c): both parts are multiples of gcd(d(x), c).
int64_t divisorOfMod(int64_t a, int64_t c) { return std::gcd(a, c); }

bool provablyDivisible(const Expr& e, int64_t d) {
  int64_t k = knownDivisor(e);
  return k == 0 || k % d == 0;
}

}  // namespace fbl::layout
