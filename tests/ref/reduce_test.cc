#include <limits>

#include "tests/ref/ref_test_util.h"

using namespace fbl::reftest;

TEST_CASE("ReduceSum/Mean/Max/Min over random axes", "[ref]") {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 40; ++trial) {
    Shape s = randomShape(rng, 1, 4, 5);
    const int64_t r = static_cast<int64_t>(s.size());
    std::vector<int64_t> axes;
    std::bernoulli_distribution pick(0.5), neg(0.5);
    for (int64_t d = 0; d < r; ++d)
      if (pick(rng)) axes.push_back(neg(rng) ? d - r : d);
    const int64_t keep = trial % 2;
    const bool asInput = trial % 3 == 0;
    Tensor x = randomF32(s, rng);
    std::vector<bool> reduced(r, axes.empty());
    for (int64_t a : axes) reduced[a < 0 ? a + r : a] = true;
    Shape kept;
    for (int64_t d = 0; d < r; ++d) kept.push_back(reduced[d] ? 1 : s[d]);
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
      Tensor axesT = i64s(axes);
      Attrs attrs{{"keepdims", keep}};
      if (!asInput) attrs["axes"] = axes;
      Tensor y = mustRun(op, {&x, asInput && !axes.empty() ? &axesT : nullptr}, attrs)[0];
      Shape expect;
      for (int64_t d = 0; d < r; ++d)
        if (!reduced[d] || keep) expect.push_back(kept[d]);
      INFO(op << " " << fbl::ir::shapeToString(s) << " axes " << axes.size());
      REQUIRE(y.shape() == expect);
      // Naive: visit every input element and fold it into its kept-dims output cell.
      std::vector<double> acc(fbl::ir::numElements(kept), std::string(op) == "ReduceMax" ? -1e30
                                                          : std::string(op) == "ReduceMin" ? 1e30 : 0.0);
      int64_t count = x.numel() / static_cast<int64_t>(acc.size());
      for (int64_t i = 0; i < x.numel(); ++i) {
        auto idx = unravel(i, s);
        for (int64_t d = 0; d < r; ++d)
          if (reduced[d]) idx[d] = 0;
        int64_t o = ravelBroadcast(idx, kept);
        double v = x.at(i);
        if (std::string(op) == "ReduceMax") acc[o] = std::max(acc[o], v);
        else if (std::string(op) == "ReduceMin") acc[o] = std::min(acc[o], v);
        else acc[o] += v;
      }
      for (size_t o = 0; o < acc.size(); ++o) {
        double ref = std::string(op) == "ReduceMean" ? acc[o] / count : acc[o];
        REQUIRE(y.at(o) == Approx(ref).epsilon(1e-6).margin(1e-6));
      }
    }
  }
}

TEST_CASE("Reduce with empty axes: all, or nothing with noop_with_empty_axes", "[ref]") {
  Tensor x = Tensor::fromVector<int64_t>({2, 2}, {1, 2, 3, 4});
  Tensor all = mustRun("ReduceSum", {&x}, {{"keepdims", int64_t{0}}})[0];
  requireEqual(all, Tensor::scalar<int64_t>(10));
  Tensor empty = i64s({});
  requireEqual(mustRun("ReduceSum", {&x, &empty}, {{"noop_with_empty_axes", int64_t{1}}})[0], x);
  requireEqual(mustRun("ReduceMax", {&x}, {{"axes", std::vector<int64_t>{1}}})[0],
               Tensor::fromVector<int64_t>({2, 1}, {2, 4}));
}

TEST_CASE("Softmax and LogSoftmax along any axis", "[ref]") {
  std::mt19937 rng(22);
  for (int trial = 0; trial < 20; ++trial) {
    Shape s = randomShape(rng, 1, 4, 6);
    const int64_t r = static_cast<int64_t>(s.size());
    int64_t axis = std::uniform_int_distribution<int64_t>(-r, r - 1)(rng);
    int64_t ax = axis < 0 ? axis + r : axis;
    Tensor x = randomF32(s, rng, -20.0f, 20.0f);
    Tensor sm = mustRun("Softmax", {&x}, {{"axis", axis}})[0];
    Tensor lsm = mustRun("LogSoftmax", {&x}, {{"axis", axis}})[0];
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto idx = unravel(i, s);
      double sum = 0;
      for (int64_t k = 0; k < s[ax]; ++k) {
        auto j = idx;
        j[ax] = k;
        sum += std::exp(x.at(ravelBroadcast(j, s)));
      }
      REQUIRE(sm.at(i) == Approx(std::exp(x.at(i)) / sum).epsilon(1e-5).margin(1e-7));
      REQUIRE(lsm.at(i) == Approx(x.at(i) - std::log(sum)).epsilon(1e-5).margin(1e-5));
    }
  }
  // Large logits stay finite.
  Tensor big = Tensor::fromVector<float>({2}, {1000.0f, 1000.0f});
  Tensor y = mustRun("Softmax", {&big})[0];
  CHECK(y.at(0) == Approx(0.5));
}

TEST_CASE("LayerNormalization gives Y, Mean and InvStdDev", "[ref]") {
  std::mt19937 rng(23);
  for (int64_t axis : {-1, 1, -2}) {
    Shape s{3, 4, 5};
    int64_t ax = axis < 0 ? axis + 3 : axis;
    Shape norm(s.begin() + ax, s.end());
    Tensor x = randomF32(s, rng, -3.0f, 5.0f), scale = randomF32(norm, rng), bias = randomF32(norm, rng);
    const float eps = 1e-3f;
    auto outs = mustRun("LayerNormalization", {&x, &scale, &bias}, {{"axis", axis}, {"epsilon", eps}}, 3);
    const int64_t d = fbl::ir::numElements(norm), rows = x.numel() / d;
    Shape stat = s;
    for (int64_t k = ax; k < 3; ++k) stat[k] = 1;
    REQUIRE(outs[1].shape() == stat);
    REQUIRE(outs[2].shape() == stat);
    for (int64_t row = 0; row < rows; ++row) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < d; ++k) mean += x.at(row * d + k) / d;
      for (int64_t k = 0; k < d; ++k) var += (x.at(row * d + k) - mean) * (x.at(row * d + k) - mean) / d;
      double inv = 1 / std::sqrt(var + eps);
      REQUIRE(outs[1].at(row) == Approx(mean).margin(1e-6));
      REQUIRE(outs[2].at(row) == Approx(inv).epsilon(1e-6));
      for (int64_t k = 0; k < d; ++k) {
        double ref = (x.at(row * d + k) - mean) * inv * scale.at(k) + bias.at(k);
        REQUIRE(outs[0].at(row * d + k) == Approx(ref).epsilon(1e-5).margin(1e-6));
      }
    }
  }
  // Without bias, with a scale broadcast over the normalized shape.
  Tensor x = Tensor::fromVector<float>({1, 4}, {1, 2, 3, 4}), one = Tensor::fromVector<float>({1}, {2.0f});
  Tensor y = mustRun("LayerNormalization", {&x, &one})[0];
  CHECK(y.at(0) == Approx(2 * -1.5 / std::sqrt(1.25 + 1e-5)));
}

TEST_CASE("CumSum: inclusive, exclusive, reverse, axis input", "[ref]") {
  std::mt19937 rng(24);
  Shape s{3, 4, 2};
  Tensor x = randomF32(s, rng);
  Tensor xi = randomInt(DType::I64, s, rng, -9, 9);
  for (int64_t axis : {0, 1, -1})
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1})
        for (const Tensor* in : {&x, &xi}) {
          Tensor ax = Tensor::scalar<int32_t>(static_cast<int32_t>(axis));
          Tensor y = mustRun("CumSum", {in, &ax}, {{"exclusive", exclusive}, {"reverse", reverse}})[0];
          REQUIRE(y.dtype() == in->dtype());
          int64_t a = axis < 0 ? axis + 3 : axis;
          for (int64_t i = 0; i < y.numel(); ++i) {
            auto idx = unravel(i, s);
            double ref = 0;
            for (int64_t k = 0; k < s[a]; ++k) {
              bool take = reverse ? (exclusive ? k > idx[a] : k >= idx[a]) : (exclusive ? k < idx[a] : k <= idx[a]);
              auto j = idx;
              j[a] = k;
              if (take) ref += in->at(ravelBroadcast(j, s));
            }
            REQUIRE(y.at(i) == Approx(ref).margin(1e-5));
          }
        }
}

TEST_CASE("TopK: largest or smallest first, ties by position, NaN ranked above numbers", "[ref]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Rows [3, 1, 3, 0, 2] and [2, NaN, 5, -1, 5].
  Tensor x = Tensor::fromVector<float>({2, 5}, {3, 1, 3, 0, 2, 2, nan, 5, -1, 5});
  Tensor k3 = Tensor::fromVector<int64_t>({1}, {3});
  auto largest = mustRun("TopK", {&x, &k3}, {{"axis", int64_t{1}}}, 2);
  REQUIRE(largest.size() == 2);
  requireEqual(largest[1], Tensor::fromVector<int64_t>({2, 3}, {0, 2, 4, 1, 2, 4}));
  CHECK(largest[0].at(0) == 3);
  CHECK(largest[0].at(2) == 2);
  CHECK(std::isnan(largest[0].at(3)));
  CHECK(largest[0].at(5) == 5);
  auto smallest = mustRun("TopK", {&x, &k3}, {{"axis", int64_t{-1}}, {"largest", int64_t{0}}}, 2);
  requireEqual(smallest[1], Tensor::fromVector<int64_t>({2, 3}, {3, 1, 4, 3, 0, 2}));
  // Along axis 0, as a router ranks experts down a column.
  Tensor col = Tensor::fromVector<float>({3, 2}, {0.1f, 0.9f, 0.7f, 0.2f, 0.4f, 0.5f});
  Tensor k2 = Tensor::fromVector<int64_t>({1}, {2});
  auto down = mustRun("TopK", {&col, &k2}, {{"axis", int64_t{0}}}, 2);
  requireEqual(down[1], Tensor::fromVector<int64_t>({2, 2}, {1, 0, 2, 2}));
}

TEST_CASE("ArgMax and ArgMin: first or last of ties, keepdims, a NaN wins, int64 positions", "[ref]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Rows [3, 1, 3, 0] and [2, NaN, 5, NaN] along axis 1.
  Tensor x = Tensor::fromVector<float>({2, 4}, {3, 1, 3, 0, 2, nan, 5, nan});
  requireEqual(mustRun("ArgMax", {&x}, {{"axis", int64_t{1}}})[0], Tensor::fromVector<int64_t>({2, 1}, {0, 1}));
  requireEqual(mustRun("ArgMax", {&x}, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}, {"keepdims", int64_t{0}}})[0],
               Tensor::fromVector<int64_t>({2}, {2, 1}));
  requireEqual(mustRun("ArgMin", {&x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}})[0],
               Tensor::fromVector<int64_t>({2}, {3, 1}));
  // Along axis 0 of an integer tensor, as HF's decoders find the last real token.
  Tensor ids = Tensor::fromVector<int64_t>({3, 2}, {0, 7, 4, 7, 4, 2});
  requireEqual(mustRun("ArgMax", {&ids}, {{"keepdims", int64_t{0}}})[0], Tensor::fromVector<int64_t>({2}, {1, 0}));
  requireEqual(mustRun("ArgMax", {&ids}, {{"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}})[0],
               Tensor::fromVector<int64_t>({2}, {2, 1}));
  requireEqual(mustRun("ArgMin", {&ids}, {{"keepdims", int64_t{0}}})[0], Tensor::fromVector<int64_t>({2}, {0, 2}));
}
