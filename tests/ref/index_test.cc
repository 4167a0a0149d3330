#include <limits>

#include "tests/ref/ref_test_util.h"

using namespace fbl::reftest;

TEST_CASE("Gather along any axis with negative indices", "[ref]") {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 20; ++trial) {
    Shape s = randomShape(rng, 1, 4, 5);
    const int64_t r = static_cast<int64_t>(s.size());
    int64_t axis = std::uniform_int_distribution<int64_t>(-r, r - 1)(rng);
    int64_t ax = axis < 0 ? axis + r : axis;
    Shape is = randomShape(rng, 0, 2, 3);
    Tensor x = randomF32(s, rng);
    Tensor idx = randomInt(trial % 2 ? DType::I32 : DType::I64, is, rng, -s[ax], s[ax] - 1);
    Tensor y = mustRun("Gather", {&x, &idx}, {{"axis", axis}})[0];
    Shape expect(s.begin(), s.begin() + ax);
    expect.insert(expect.end(), is.begin(), is.end());
    expect.insert(expect.end(), s.begin() + ax + 1, s.end());
    REQUIRE(y.shape() == expect);
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto oi = unravel(i, expect);
      std::vector<int64_t> ii(oi.begin(), oi.begin() + ax);
      std::vector<int64_t> ij(oi.begin() + ax, oi.begin() + ax + is.size());
      int64_t k = static_cast<int64_t>(idx.at(ravelBroadcast(ij, is)));
      ii.push_back(k < 0 ? k + s[ax] : k);
      ii.insert(ii.end(), oi.begin() + ax + is.size(), oi.end());
      REQUIRE(y.at(i) == x.at(ravelBroadcast(ii, s)));
    }
  }
  Tensor table = Tensor::fromVector<int64_t>({3, 2}, {10, 11, 20, 21, 30, 31});
  Tensor ids = Tensor::fromVector<int64_t>({2, 2}, {2, 0, -1, 1});
  requireEqual(mustRun("Gather", {&table, &ids})[0],
               Tensor::fromVector<int64_t>({2, 2, 2}, {30, 31, 10, 11, 30, 31, 20, 21}));
  Tensor bad = i64s({3});
  auto r = runOp("Gather", {&table, &bad});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("Gather_0") != std::string::npos);
  CHECK(r.error().message.find("out of range") != std::string::npos);
  Tensor badNeg = i64s({-4});
  CHECK_FALSE(runOp("Gather", {&table, &badNeg}).ok());
}

TEST_CASE("GatherElements picks along one axis", "[ref]") {
  std::mt19937 rng(42);
  for (int64_t axis : {0, 1, -1}) {
    Shape s{3, 4, 5};
    int64_t ax = axis < 0 ? axis + 3 : axis;
    Shape is{2, 3, 4};
    is[ax] = 6;
    Tensor x = randomF32(s, rng);
    Tensor idx = randomInt(DType::I64, is, rng, -s[ax], s[ax] - 1);
    Tensor y = mustRun("GatherElements", {&x, &idx}, {{"axis", axis}})[0];
    REQUIRE(y.shape() == is);
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto oi = unravel(i, is);
      int64_t k = static_cast<int64_t>(idx.at(i));
      oi[ax] = k < 0 ? k + s[ax] : k;
      REQUIRE(y.at(i) == x.at(ravelBroadcast(oi, s)));
    }
  }
  Tensor x = Tensor::fromVector<float>({2, 2}, {1, 2, 3, 4});
  Tensor bad = Tensor::fromVector<int64_t>({2, 1}, {0, 2});
  CHECK_FALSE(runOp("GatherElements", {&x, &bad}, {{"axis", int64_t{1}}}).ok());
}

TEST_CASE("GatherND with and without batch_dims", "[ref]") {
  // The ONNX spec's examples.
  Tensor d1 = Tensor::fromVector<int32_t>({2, 2}, {0, 1, 2, 3});
  Tensor i1 = Tensor::fromVector<int64_t>({2, 2}, {0, 0, 1, 1});
  requireEqual(mustRun("GatherND", {&d1, &i1})[0], Tensor::fromVector<int32_t>({2}, {0, 3}));
  Tensor i2 = Tensor::fromVector<int64_t>({2, 1}, {1, 0});
  requireEqual(mustRun("GatherND", {&d1, &i2})[0], Tensor::fromVector<int32_t>({2, 2}, {2, 3, 0, 1}));
  Tensor d3 = Tensor::fromVector<int32_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor i3 = Tensor::fromVector<int64_t>({2, 1, 2}, {0, 1, 1, 0});
  requireEqual(mustRun("GatherND", {&d3, &i3})[0],
               Tensor::fromVector<int32_t>({2, 1, 2}, {2, 3, 4, 5}));
  Tensor i4 = Tensor::fromVector<int64_t>({2, 1}, {1, 0});
  requireEqual(mustRun("GatherND", {&d3, &i4}, {{"batch_dims", int64_t{1}}})[0],
               Tensor::fromVector<int32_t>({2, 2}, {2, 3, 4, 5}));

  // Random, batch_dims 1, against explicit indexing.
  std::mt19937 rng(43);
  Tensor data = randomF32({3, 4, 5, 2}, rng);
  Tensor idx(DType::I64, {3, 6, 2});
  for (int64_t i = 0; i < idx.numel(); i += 2) {
    idx.set(i, std::uniform_int_distribution<int64_t>(-4, 3)(rng));
    idx.set(i + 1, std::uniform_int_distribution<int64_t>(0, 4)(rng));
  }
  Tensor y = mustRun("GatherND", {&data, &idx}, {{"batch_dims", int64_t{1}}})[0];
  REQUIRE(y.shape() == Shape{3, 6, 2});
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < 6; ++t)
      for (int64_t e = 0; e < 2; ++e) {
        int64_t i0 = static_cast<int64_t>(idx.at((b * 6 + t) * 2)), i1v = static_cast<int64_t>(idx.at((b * 6 + t) * 2 + 1));
        if (i0 < 0) i0 += 4;
        REQUIRE(y.at((b * 6 + t) * 2 + e) == data.at(((b * 4 + i0) * 5 + i1v) * 2 + e));
      }
  Tensor oob = Tensor::fromVector<int64_t>({1, 2}, {0, 2});
  CHECK_FALSE(runOp("GatherND", {&d1, &oob}).ok());
}

TEST_CASE("SoftmaxCrossEntropyLoss: reductions, ignore_index, weights, spatial dims", "[ref]") {
  std::mt19937 rng(44);
  const int64_t kIgnore = -100;
  for (const Shape& s : {Shape{6, 5}, Shape{3, 4, 2, 3}})
    for (bool useWeights : {false, true})
      for (const char* reduction : {"mean", "sum", "none"}) {
        const int64_t n = s[0], c = s[1];
        Shape ls = s;
        ls.erase(ls.begin() + 1);
        Tensor scores = randomF32(s, rng, -5.0f, 5.0f);
        Tensor labels = randomInt(DType::I64, ls, rng, 0, c - 1);
        labels.set(0, kIgnore);
        labels.set(labels.numel() - 1, kIgnore);
        Tensor w = randomF32({c}, rng, 0.2f, 2.0f);
        auto outs = mustRun("SoftmaxCrossEntropyLoss", {&scores, &labels, useWeights ? &w : nullptr},
                            {{"reduction", std::string(reduction)}, {"ignore_index", kIgnore}}, 2);
        const int64_t spatial = scores.numel() / (n * c);
        double sum = 0, wsum = 0;
        Tensor perItem(DType::F32, ls);
        for (int64_t b = 0; b < n; ++b)
          for (int64_t p = 0; p < spatial; ++p) {
            double z = 0;
            for (int64_t k = 0; k < c; ++k) z += std::exp(scores.at((b * c + k) * spatial + p));
            for (int64_t k = 0; k < c; ++k)
              REQUIRE(outs[1].at((b * c + k) * spatial + p) ==
                      Approx(scores.at((b * c + k) * spatial + p) - std::log(z)).margin(1e-5));
            int64_t l = static_cast<int64_t>(labels.at(b * spatial + p));
            if (l == kIgnore) continue;
            double wt = useWeights ? w.at(l) : 1.0;
            double loss = -wt * (scores.at((b * c + l) * spatial + p) - std::log(z));
            perItem.set(b * spatial + p, loss);
            sum += loss;
            wsum += wt;
          }
        INFO(reduction << " weights " << useWeights << " " << fbl::ir::shapeToString(s));
        if (std::string(reduction) == "none") {
          CHECK(scaledMaxError(outs[0], perItem) < 1e-6);
        } else {
          REQUIRE(outs[0].shape() == Shape{});
          double ref = std::string(reduction) == "sum" ? sum : sum / wsum;
          CHECK(outs[0].at(0) == Approx(ref).epsilon(1e-6));
        }
      }
  Tensor scores = Tensor::fromVector<float>({1, 3}, {0, 1, 2});
  Tensor bad = i64s({3});
  CHECK_FALSE(runOp("SoftmaxCrossEntropyLoss", {&scores, &bad}).ok());
  Tensor wrongShape = i64s({0, 1});
  CHECK_FALSE(runOp("SoftmaxCrossEntropyLoss", {&scores, &wrongShape}).ok());
}

TEST_CASE("ScatterElements writes along one axis in position order", "[ref]") {
  // The ONNX spec's example, axis 1.
  Tensor data = Tensor::fromVector<float>({1, 5}, {1, 2, 3, 4, 5});
  Tensor idx = Tensor::fromVector<int64_t>({1, 2}, {1, 3});
  Tensor upd = Tensor::fromVector<float>({1, 2}, {11, 21});
  requireEqual(mustRun("ScatterElements", {&data, &idx, &upd}, {{"axis", int64_t{1}}})[0],
               Tensor::fromVector<float>({1, 5}, {1, 11, 3, 21, 5}));

  // Random, every axis and reduction, against a naive loop over the positions in order.
  std::mt19937 rng(44);
  for (int64_t axis : {0, 1, -1})
    for (std::string red : {"none", "add", "mul", "max", "min"}) {
      Shape s{3, 4, 5};
      const int64_t ax = axis < 0 ? axis + 3 : axis;
      Shape is{2, 3, 4};
      Tensor x = randomF32(s, rng);
      Tensor id = randomInt(DType::I64, is, rng, -s[ax], s[ax] - 1);
      Tensor u = randomF32(is, rng);
      Tensor y = mustRun("ScatterElements", {&x, &id, &u}, {{"axis", axis}, {"reduction", red}})[0];
      Tensor want = x;
      for (int64_t p = 0; p < id.numel(); ++p) {
        auto at = unravel(p, is);
        const int64_t k = static_cast<int64_t>(id.at(p));
        at[ax] = k < 0 ? k + s[ax] : k;
        const int64_t o = ravelBroadcast(at, s);
        const double v = want.at(o), w = u.at(p);
        want.set(o, red == "add" ? v + w : red == "mul" ? v * w : red == "max" ? std::max(v, w)
                    : red == "min" ? std::min(v, w) : w);
      }
      INFO("axis " << axis << " " << red);
      requireEqual(y, want);
    }
  Tensor bad = Tensor::fromVector<int64_t>({1, 2}, {1, 5});
  CHECK_FALSE(runOp("ScatterElements", {&data, &bad, &upd}, {{"axis", int64_t{1}}}).ok());
}
