// The numeric comparisons the gradient checks and the training tests share.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "compiler/ir/tensor.h"

namespace fbl::testing {

inline double maxAbs(const ir::Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.at(i)));
  return m;
}

inline double maxAbsDiff(const ir::Tensor& a, const ir::Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.at(i) - b.at(i)));
  return m;
}

}  // namespace fbl::testing
