#include <limits>
#include <numeric>

#include "tests/ref/ref_test_util.h"

using namespace fbl::reftest;

namespace {
Tensor iota(const Shape& s) {
  Tensor t(DType::F32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + idx[d];
  return off;
}
}  // namespace

TEST_CASE("Constant reads every value attribute", "[ref]") {
  Tensor t = Tensor::fromVector<float>({2}, {1.5f, 2.5f});
  requireEqual(mustRun("Constant", {}, {{"value", t}})[0], t);
  requireEqual(mustRun("Constant", {}, {{"value_float", 3.0f}})[0], Tensor::scalar<float>(3.0f));
  requireEqual(mustRun("Constant", {}, {{"value_int", int64_t{7}}})[0], Tensor::scalar<int64_t>(7));
  requireEqual(mustRun("Constant", {}, {{"value_ints", std::vector<int64_t>{1, 2}}})[0], i64s({1, 2}));
  requireEqual(mustRun("Constant", {}, {{"value_floats", std::vector<float>{1, 2}}})[0],
               Tensor::fromVector<float>({2}, {1, 2}));
  CHECK_FALSE(runOp("Constant", {}).ok());
}

TEST_CASE("ConstantOfShape, Shape and Range", "[ref]") {
  Tensor s = i64s({2, 3});
  Tensor z = mustRun("ConstantOfShape", {&s})[0];
  requireEqual(z, Tensor(DType::F32, {2, 3}));
  Tensor seven = Tensor::fromVector<int64_t>({1}, {7});
  Tensor sevens = mustRun("ConstantOfShape", {&s}, {{"value", seven}})[0];
  requireEqual(sevens, Tensor::fromVector<int64_t>({2, 3}, {7, 7, 7, 7, 7, 7}));
  Tensor neg = i64s({2, -1});
  CHECK_FALSE(runOp("ConstantOfShape", {&neg}).ok());

  Tensor x(DType::F32, {2, 3, 4, 5});
  requireEqual(mustRun("Shape", {&x})[0], i64s({2, 3, 4, 5}));
  requireEqual(mustRun("Shape", {&x}, {{"start", int64_t{1}}, {"end", int64_t{-1}}})[0], i64s({3, 4}));
  requireEqual(mustRun("Shape", {&x}, {{"start", int64_t{-10}}, {"end", int64_t{10}}})[0], i64s({2, 3, 4, 5}));
  requireEqual(mustRun("Shape", {&x}, {{"start", int64_t{3}}, {"end", int64_t{1}}})[0], i64s({}));

  Tensor a = Tensor::scalar<int64_t>(1), b = Tensor::scalar<int64_t>(10), d = Tensor::scalar<int64_t>(3);
  requireEqual(mustRun("Range", {&a, &b, &d})[0], i64s({1, 4, 7}));
  Tensor fa = Tensor::scalar<float>(1.0f), fb = Tensor::scalar<float>(-1.0f), fd = Tensor::scalar<float>(-0.5f);
  requireEqual(mustRun("Range", {&fa, &fb, &fd})[0], Tensor::fromVector<float>({4}, {1.0f, 0.5f, 0.0f, -0.5f}));
  requireEqual(mustRun("Range", {&b, &a, &d})[0], i64s({}));
  Tensor zero = Tensor::scalar<int64_t>(0);
  CHECK_FALSE(runOp("Range", {&a, &b, &zero}).ok());
}

TEST_CASE("Reshape handles 0, -1 and allowzero", "[ref]") {
  Tensor x = iota({2, 3, 4});
  auto reshape = [&](std::vector<int64_t> s, int64_t allowZero = 0) {
    Tensor st = i64s(s);
    return runOp("Reshape", {&x, &st}, {{"allowzero", allowZero}});
  };
  auto r = reshape({0, -1});
  REQUIRE(r.ok());
  CHECK(r->at(0).shape() == Shape{2, 12});
  for (int64_t i = 0; i < 24; ++i) REQUIRE(r->at(0).at(i) == i);
  CHECK(reshape({-1})->at(0).shape() == Shape{24});
  CHECK(reshape({4, 0, 2})->at(0).shape() == Shape{4, 3, 2});
  CHECK_FALSE(reshape({0, 5}).ok());
  CHECK_FALSE(reshape({-1, -1}).ok());
  CHECK_FALSE(reshape({0, -1}, 1).ok());  // allowzero: 0 is a real zero, 24 != 0
  Tensor empty(DType::F32, {0, 3});
  Tensor st = i64s({3, 0});
  CHECK(mustRun("Reshape", {&empty, &st}, {{"allowzero", int64_t{1}}})[0].shape() == Shape{3, 0});
}

TEST_CASE("Unsqueeze, Squeeze and Flatten", "[ref]") {
  Tensor x = iota({3, 1, 4});
  Tensor ax = i64s({0, -1});
  CHECK(mustRun("Unsqueeze", {&x, &ax})[0].shape() == Shape{1, 3, 1, 4, 1});
  CHECK(mustRun("Unsqueeze", {&x}, {{"axes", std::vector<int64_t>{1}}})[0].shape() == Shape{3, 1, 1, 4});
  Tensor one = i64s({1});
  CHECK(mustRun("Squeeze", {&x, &one})[0].shape() == Shape{3, 4});
  CHECK(mustRun("Squeeze", {&x})[0].shape() == Shape{3, 4});
  Tensor bad = i64s({0});
  CHECK_FALSE(runOp("Squeeze", {&x, &bad}).ok());
  CHECK(mustRun("Flatten", {&x}, {{"axis", int64_t{2}}})[0].shape() == Shape{3, 4});
}

TEST_CASE("Transpose permutes indices", "[ref]") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    Shape s = randomShape(rng, 1, 5, 4);
    std::vector<int64_t> perm(s.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Tensor x = randomF32(s, rng);
    Tensor y = mustRun("Transpose", {&x}, {{"perm", perm}})[0];
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto oi = unravel(i, y.shape());
      std::vector<int64_t> ii(s.size());
      for (size_t d = 0; d < s.size(); ++d) ii[perm[d]] = oi[d];
      REQUIRE(y.at(i) == x.at(ravel(ii, s)));
    }
  }
  Tensor m = iota({2, 3});
  Tensor t = mustRun("Transpose", {&m})[0];
  requireEqual(t, Tensor::fromVector<float>({3, 2}, {0, 3, 1, 4, 2, 5}));
  CHECK_FALSE(runOp("Transpose", {&m}, {{"perm", std::vector<int64_t>{0, 0}}}).ok());
}

TEST_CASE("Slice: negative, clamped and stepped ranges", "[ref]") {
  Tensor x = iota({10});
  auto slice = [&](int64_t s, int64_t e, int64_t step) {
    Tensor st = i64s({s}), en = i64s({e}), ax = i64s({0}), sp = i64s({step});
    std::vector<float> got;
    Tensor y = mustRun("Slice", {&x, &st, &en, &ax, &sp})[0];
    for (int64_t i = 0; i < y.numel(); ++i) got.push_back(y.data<float>()[i]);
    return got;
  };
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  CHECK(slice(2, 5, 1) == std::vector<float>{2, 3, 4});
  CHECK(slice(-3, kMax, 1) == std::vector<float>{7, 8, 9});
  CHECK(slice(0, 10, 3) == std::vector<float>{0, 3, 6, 9});
  CHECK(slice(-1, kMin, -1) == std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(slice(8, 1, -3) == std::vector<float>{8, 5, 2});
  CHECK(slice(20, -20, -4) == std::vector<float>{9, 5, 1});
  CHECK(slice(5, 2, 1).empty());
  CHECK(slice(-100, 2, 1) == std::vector<float>{0, 1});
  CHECK(slice(9, kMin, kMin) == std::vector<float>{9});
  CHECK(slice(1, kMax, kMax) == std::vector<float>{1});

  // Random multi-axis slices against explicit index arithmetic.
  std::mt19937 rng(12);
  for (int trial = 0; trial < 30; ++trial) {
    Shape s = randomShape(rng, 1, 4, 6);
    Tensor t = randomF32(s, rng);
    std::vector<int64_t> starts, ends, axes, steps;
    std::uniform_int_distribution<int64_t> pos(-8, 8), stp(1, 3);
    std::bernoulli_distribution neg(0.4), use(0.7);
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
      if (!use(rng)) continue;
      axes.push_back(neg(rng) ? d - static_cast<int64_t>(s.size()) : d);
      starts.push_back(pos(rng));
      ends.push_back(pos(rng));
      steps.push_back(neg(rng) ? -stp(rng) : stp(rng));
    }
    Tensor st = i64s(starts), en = i64s(ends), ax = i64s(axes), sp = i64s(steps);
    Tensor y = mustRun("Slice", {&t, &st, &en, &ax, &sp})[0];
    // The per-axis index lists, by the spec's clamping rules written as a loop.
    std::vector<std::vector<int64_t>> picks(s.size());
    for (size_t d = 0; d < s.size(); ++d)
      for (int64_t i = 0; i < s[d]; ++i) picks[d].push_back(i);
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t d = axes[k] < 0 ? axes[k] + static_cast<int64_t>(s.size()) : axes[k];
      int64_t dim = s[d], b = starts[k] < 0 ? starts[k] + dim : starts[k];
      int64_t e = ends[k] < 0 ? ends[k] + dim : ends[k];
      picks[d].clear();
      if (steps[k] > 0) {
        for (int64_t i = std::max<int64_t>(b, 0); i < std::min(e, dim); i += steps[k]) picks[d].push_back(i);
      } else {
        // The spec clamps a negative-step start into [0, dim - 1] (numpy would give nothing).
        for (int64_t i = std::clamp<int64_t>(b, 0, dim - 1); i > std::max<int64_t>(e, -1); i += steps[k])
          picks[d].push_back(i);
      }
    }
    Shape expect;
    for (auto& p : picks) expect.push_back(static_cast<int64_t>(p.size()));
    REQUIRE(y.shape() == expect);
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto oi = unravel(i, expect);
      for (size_t d = 0; d < s.size(); ++d) oi[d] = picks[d][oi[d]];
      REQUIRE(y.at(i) == t.at(ravel(oi, s)));
    }
  }
}

TEST_CASE("Concat, Split and Expand", "[ref]") {
  Tensor a = iota({2, 2, 3}), b = iota({2, 1, 3});
  Tensor c = mustRun("Concat", {&a, &b}, {{"axis", int64_t{-2}}})[0];
  REQUIRE(c.shape() == Shape{2, 3, 3});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 3; ++k) {
        double ref = j < 2 ? a.at((i * 2 + j) * 3 + k) : b.at(i * 3 + k);
        REQUIRE(c.at((i * 3 + j) * 3 + k) == ref);
      }
  Tensor ints = i64s({1, 2}), more = i64s({3});
  requireEqual(mustRun("Concat", {&ints, &more}, {{"axis", int64_t{0}}})[0], i64s({1, 2, 3}));
  CHECK_FALSE(runOp("Concat", {&a, &ints}, {{"axis", int64_t{0}}}).ok());

  Tensor sizes = i64s({2, 1});
  auto parts = mustRun("Split", {&c, &sizes}, {{"axis", int64_t{1}}}, 2);
  requireEqual(parts[0], a);
  requireEqual(parts[1], b);
  Tensor seven = iota({7});
  auto thirds = mustRun("Split", {&seven}, {{"num_outputs", int64_t{3}}}, 3);
  CHECK(thirds[0].shape() == Shape{3});
  CHECK(thirds[2].shape() == Shape{1});
  CHECK(thirds[2].at(0) == 6);

  Tensor col = iota({3, 1});
  Tensor shape = i64s({2, 1, 4});
  Tensor e = mustRun("Expand", {&col, &shape})[0];
  REQUIRE(e.shape() == Shape{2, 3, 4});
  for (int64_t i = 0; i < e.numel(); ++i) REQUIRE(e.at(i) == col.at(unravel(i, e.shape())[1]));
  Tensor smaller = i64s({1});
  CHECK(mustRun("Expand", {&col, &smaller})[0].shape() == Shape{3, 1});
  Tensor bad = i64s({2, 4});
  CHECK_FALSE(runOp("Expand", {&col, &bad}).ok());
}

TEST_CASE("Pad in constant mode, negative pads crop", "[ref]") {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 20; ++trial) {
    Shape s = randomShape(rng, 1, 3, 5);
    std::uniform_int_distribution<int64_t> p(-1, 2);
    std::vector<int64_t> pads(2 * s.size());
    for (auto& v : pads) v = p(rng);
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] + pads[d] + pads[d + s.size()] < 0) pads[d + s.size()] = 0;
    Tensor x = randomF32(s, rng), padT = i64s(pads), cv = Tensor::scalar<float>(-7.0f);
    Tensor y = mustRun("Pad", {&x, &padT, &cv})[0];
    const size_t r = s.size();
    for (size_t d = 0; d < r; ++d) REQUIRE(y.shape()[d] == s[d] + pads[d] + pads[d + r]);
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto oi = unravel(i, y.shape());
      bool inside = true;
      for (size_t d = 0; d < r; ++d) {
        oi[d] -= pads[d];
        inside = inside && oi[d] >= 0 && oi[d] < s[d];
      }
      REQUIRE(y.at(i) == (inside ? x.at(ravel(oi, s)) : -7.0));
    }
  }
  Tensor x = iota({2, 2});
  Tensor pads = i64s({1, 1}), axes = i64s({1});
  Tensor y = mustRun("Pad", {&x, &pads, nullptr, &axes})[0];
  requireEqual(y, Tensor::fromVector<float>({2, 4}, {0, 0, 1, 0, 0, 2, 3, 0}));
  CHECK_FALSE(runOp("Pad", {&x, &pads}, {{"mode", std::string("reflect")}}).ok());
}

TEST_CASE("Trilu keeps the upper or lower triangle", "[ref]") {
  Tensor x = iota({2, 3, 4});
  for (int64_t upper : {0, 1})
    for (int64_t k : {-1, 0, 2}) {
      Tensor kt = Tensor::scalar<int64_t>(k);
      Tensor y = mustRun("Trilu", {&x, &kt}, {{"upper", upper}})[0];
      for (int64_t i = 0; i < y.numel(); ++i) {
        auto idx = unravel(i, x.shape());
        bool keep = upper ? idx[2] - idx[1] >= k : idx[2] - idx[1] <= k;
        REQUIRE(y.at(i) == (keep ? x.at(i) : 0.0));
      }
    }
}
