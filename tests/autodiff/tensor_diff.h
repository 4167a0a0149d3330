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

// A parameter after some AdamW steps against PyTorch's: the worst error relative to the
// parameter's max-abs over the elements whose first-step gradient fp32 resolves, and the worst
// absolute error over those it does not. Adam's first step is lr g / (|g| + eps), about
// lr sign(g) wherever |g| is well above eps: an element whose gradient is rounding noise (below
// 1e-5 of its tensor's largest) steps by up to lr either way, in fbl and in PyTorch alike, so
// only that bound holds for it.
struct AdamParamError {
  double resolved = 0;    // relative to max-abs
  double unresolved = 0;  // absolute
};
inline AdamParamError adamParamError(const ir::Tensor& mine, const ir::Tensor& want, const ir::Tensor& firstGrad) {
  REQUIRE(mine.numel() == want.numel());
  REQUIRE(firstGrad.numel() == want.numel());
  const double scale = std::max(maxAbs(want), 1e-30), noise = 1e-5 * maxAbs(firstGrad);
  AdamParamError e;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::abs(mine.at(i) - want.at(i));
    if (std::abs(firstGrad.at(i)) >= noise) e.resolved = std::max(e.resolved, d / scale);
    else e.unresolved = std::max(e.unresolved, d);
  }
  return e;
}

}  // namespace fbl::testing
