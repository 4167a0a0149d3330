
#include "tests/ref/ref_test_util.h"

using namespace fbl::reftest;

namespace {
// C[b] = A[b] B[b] with a triple loop per batch index, numpy batching written out.
Tensor naiveMatMul(const Tensor& a, const Tensor& b) {
  Shape sa = a.shape(), sb = b.shape();
  const bool aVec = sa.size() == 1, bVec = sb.size() == 1;
  if (aVec) sa.insert(sa.begin(), 1);
  if (bVec) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape batch = ba.size() > bb.size() ? ba : bb;
  for (size_t i = 0; i < batch.size(); ++i) {
    int64_t x = i + ba.size() >= batch.size() ? ba[i + ba.size() - batch.size()] : 1;
    int64_t y = i + bb.size() >= batch.size() ? bb[i + bb.size() - batch.size()] : 1;
    batch[i] = std::max(x, y);
  }
  Shape out = batch;
  if (!aVec) out.push_back(m);
  if (!bVec) out.push_back(n);
  Tensor c(DType::F32, out);
  const int64_t batches = fbl::ir::numElements(batch);
  for (int64_t bi = 0; bi < batches; ++bi) {
    auto idx = unravel(bi, batch);
    int64_t oa = ravelBroadcast(idx, ba) * m * k, ob = ravelBroadcast(idx, bb) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += a.at(oa + i * k + p) * b.at(ob + p * n + j);
        c.set((bi * m + i) * n + j, acc);
      }
  }
  return c;
}
}  // namespace

TEST_CASE("MatMul matches a triple loop, with batch broadcasting and 1-D operands", "[ref]") {
  std::mt19937 rng(31);
  std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},          {{4}, {4, 5}},          {{3, 4}, {4}},
      {{4}, {4}},                {{2, 3, 4}, {4, 5}},    {{2, 1, 3, 4}, {3, 4, 2}},
      {{1, 3, 4}, {5, 1, 4, 6}}, {{70, 300}, {300, 270}},  // crosses every tile edge
      {{2, 0, 4}, {4, 3}},       {{3, 0}, {0, 2}},
  };
  std::uniform_int_distribution<int64_t> dim(1, 40);
  for (int trial = 0; trial < 10; ++trial) {
    int64_t m = dim(rng), k = dim(rng), n = dim(rng);
    cases.push_back({{m, k}, {k, n}});
  }
  for (const auto& [sa, sb] : cases) {
    Tensor a = randomF32(sa, rng), b = randomF32(sb, rng);
    Tensor y = mustRun("MatMul", {&a, &b})[0];
    Tensor ref = naiveMatMul(a, b);
    INFO(fbl::ir::shapeToString(sa) << " x " << fbl::ir::shapeToString(sb));
    REQUIRE(y.shape() == ref.shape());
    CHECK(scaledMaxError(y, ref) < 1e-6);
  }
  Tensor a = randomF32({3, 4}, rng), b = randomF32({5, 6}, rng);
  auto r = runOp("MatMul", {&a, &b});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("MatMul_0") != std::string::npos);
}

// A training-size product (the blocked loop, not a toy's): sampled entries against a dot product
// in double. Its speed is the benchmarks' to measure.
TEST_CASE("MatMul of a training-size product matches a double-precision dot product", "[ref]") {
  std::mt19937 rng(32);
  Tensor a = randomF32({256, 512}, rng), b = randomF32({512, 512}, rng);
  Tensor y = mustRun("MatMul", {&a, &b})[0];
  REQUIRE(y.shape() == Shape{256, 512});
  std::uniform_int_distribution<int64_t> row(0, 255), col(0, 511);
  for (int k = 0; k < 64; ++k) {
    const int64_t i = row(rng), j = col(rng);
    double acc = 0;
    for (int64_t p = 0; p < 512; ++p) acc += a.at(i * 512 + p) * b.at(p * 512 + j);
    REQUIRE(y.at(i * 512 + j) == Approx(acc).epsilon(1e-5).margin(1e-5));
  }
}

TEST_CASE("Gemm: transA/transB, alpha, beta and broadcast C", "[ref]") {
  std::mt19937 rng(33);
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      for (const Shape& sc : {Shape{}, Shape{6}, Shape{5, 1}, Shape{5, 6}}) {
        Tensor a = randomF32(ta ? Shape{7, 5} : Shape{5, 7}, rng);
        Tensor b = randomF32(tb ? Shape{6, 7} : Shape{7, 6}, rng);
        Tensor c = randomF32(sc, rng);
        const float alpha = 0.5f, beta = -2.0f;
        Tensor y = mustRun("Gemm", {&a, &b, &c},
                           {{"transA", ta}, {"transB", tb}, {"alpha", alpha}, {"beta", beta}})[0];
        REQUIRE(y.shape() == Shape{5, 6});
        for (int64_t i = 0; i < 5; ++i)
          for (int64_t j = 0; j < 6; ++j) {
            double acc = 0;
            for (int64_t p = 0; p < 7; ++p)
              acc += a.at(ta ? p * 5 + i : i * 7 + p) * b.at(tb ? j * 7 + p : p * 6 + j);
            double cv = c.at(ravelBroadcast({i, j}, sc));
            REQUIRE(y.at(i * 6 + j) == Approx(alpha * acc + beta * cv).epsilon(1e-5).margin(1e-5));
          }
      }
}

TEST_CASE("Conv 2-D NCHW with groups, strides, pads and dilations", "[ref]") {
  std::mt19937 rng(34);
  struct Case {
    int64_t n, c, h, w, m, kh, kw, group;
    std::vector<int64_t> strides, pads, dil;
  };
  std::vector<Case> cases = {
      {2, 3, 32, 32, 8, 8, 8, 1, {8, 8}, {0, 0, 0, 0}, {1, 1}},  // ViT patch embedding
      {1, 4, 7, 9, 6, 3, 3, 2, {1, 2}, {1, 0, 2, 1}, {1, 1}},
      {2, 2, 8, 8, 4, 3, 2, 1, {2, 1}, {1, 1, 1, 1}, {2, 3}},
      {1, 4, 5, 5, 4, 3, 3, 4, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // depthwise
  };
  for (const Case& cs : cases) {
    const int64_t cg = cs.c / cs.group, mg = cs.m / cs.group;
    Tensor x = randomF32({cs.n, cs.c, cs.h, cs.w}, rng);
    Tensor w = randomF32({cs.m, cg, cs.kh, cs.kw}, rng);
    Tensor b = randomF32({cs.m}, rng);
    Tensor y = mustRun("Conv", {&x, &w, &b},
                       {{"group", cs.group}, {"strides", cs.strides}, {"pads", cs.pads}, {"dilations", cs.dil}})[0];
    const int64_t oh = (cs.h + cs.pads[0] + cs.pads[2] - (cs.kh - 1) * cs.dil[0] - 1) / cs.strides[0] + 1;
    const int64_t ow = (cs.w + cs.pads[1] + cs.pads[3] - (cs.kw - 1) * cs.dil[1] - 1) / cs.strides[1] + 1;
    REQUIRE(y.shape() == Shape{cs.n, cs.m, oh, ow});
    Tensor ref(DType::F32, y.shape());
    for (int64_t n = 0; n < cs.n; ++n)
      for (int64_t m = 0; m < cs.m; ++m)
        for (int64_t r = 0; r < oh; ++r)
          for (int64_t s = 0; s < ow; ++s) {
            double acc = b.at(m);
            const int64_t g = m / mg;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t i = 0; i < cs.kh; ++i)
                for (int64_t j = 0; j < cs.kw; ++j) {
                  int64_t ih = r * cs.strides[0] - cs.pads[0] + i * cs.dil[0];
                  int64_t iw = s * cs.strides[1] - cs.pads[1] + j * cs.dil[1];
                  if (ih < 0 || ih >= cs.h || iw < 0 || iw >= cs.w) continue;
                  acc += x.at(((n * cs.c + g * cg + c) * cs.h + ih) * cs.w + iw) *
                         w.at(((m * cg + c) * cs.kh + i) * cs.kw + j);
                }
            ref.set(((n * cs.m + m) * oh + r) * ow + s, acc);
          }
    CHECK(scaledMaxError(y, ref) < 1e-6);
  }
  Tensor x = randomF32({1, 3, 4, 4}, rng), w = randomF32({2, 2, 3, 3}, rng);
  CHECK_FALSE(runOp("Conv", {&x, &w}).ok());
}
