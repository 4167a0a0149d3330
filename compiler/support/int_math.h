// Integer arithmetic the tilings, layouts and planners share.
#pragma once

#include <cstdint>

namespace fbl {

// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// a rounded up to a multiple of m, for a >= 0, m > 0.
constexpr int64_t roundUp(int64_t a, int64_t m) { return ceilDiv(a, m) * m; }

}  // namespace fbl
