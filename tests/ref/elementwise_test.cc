#include <functional>

#include "tests/ref/ref_test_util.h"

using namespace fbl::reftest;

namespace {

// The broadcast of two shapes, written out for the test (numpy's rule).
Shape naiveBroadcast(Shape a, Shape b) {
  while (a.size() < b.size()) a.insert(a.begin(), 1);
  while (b.size() < a.size()) b.insert(b.begin(), 1);
  for (size_t d = 0; d < a.size(); ++d) a[d] = std::max(a[d], b[d]);
  return a;
}

// Checks a binary op against fn applied at explicitly computed broadcast indices.
void checkBinaryF32(const std::string& op, std::function<double(double, double)> fn, bool positive,
                    std::mt19937& rng) {
  for (int trial = 0; trial < 25; ++trial) {
    Shape out = randomShape(rng, 0, 4, 5);
    Shape sa = broadcastableTo(out, rng), sb = broadcastableTo(out, rng);
    if (trial % 2) std::swap(sa, sb);
    Tensor a = positive ? randomF32(sa, rng, 0.5f, 2.0f) : randomF32(sa, rng);
    Tensor b = positive ? randomF32(sb, rng, 0.5f, 2.0f) : randomF32(sb, rng);
    Tensor y = mustRun(op, {&a, &b})[0];
    Shape expect = naiveBroadcast(sa, sb);
    INFO(op << " " << fbl::ir::shapeToString(sa) << " " << fbl::ir::shapeToString(sb));
    REQUIRE(y.shape() == expect);
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto idx = unravel(i, expect);
      float ref = static_cast<float>(fn(a.at(ravelBroadcast(idx, sa)), b.at(ravelBroadcast(idx, sb))));
      REQUIRE(y.data<float>()[i] == Approx(ref).epsilon(1e-6).margin(1e-6));
    }
  }
}

}  // namespace

TEST_CASE("binary f32 ops broadcast like numpy", "[ref]") {
  std::mt19937 rng(1);
  checkBinaryF32("Add", [](double x, double y) { return x + y; }, false, rng);
  checkBinaryF32("Sub", [](double x, double y) { return x - y; }, false, rng);
  checkBinaryF32("Mul", [](double x, double y) { return x * y; }, false, rng);
  checkBinaryF32("Div", [](double x, double y) { return x / y; }, true, rng);
  checkBinaryF32("Max", [](double x, double y) { return std::max(x, y); }, false, rng);
  checkBinaryF32("Min", [](double x, double y) { return std::min(x, y); }, false, rng);
  checkBinaryF32("Pow", [](double x, double y) { return std::pow(x, y); }, true, rng);
}

TEST_CASE("Pow takes an exponent of another dtype", "[ref]") {
  Tensor x = Tensor::fromVector<float>({3}, {1.5f, -2.0f, 3.0f});
  Tensor e = Tensor::scalar<int64_t>(2);
  Tensor y = mustRun("Pow", {&x, &e})[0];
  for (int i = 0; i < 3; ++i) CHECK(y.data<float>()[i] == Approx(x.at(i) * x.at(i)));
}

TEST_CASE("integer arithmetic and comparisons broadcast", "[ref]") {
  std::mt19937 rng(2);
  for (DType dt : {DType::I64, DType::I32}) {
    for (int trial = 0; trial < 20; ++trial) {
      Shape out = randomShape(rng, 1, 3, 4);
      Shape sa = broadcastableTo(out, rng), sb = broadcastableTo(out, rng);
      Tensor a = randomInt(dt, sa, rng, -50, 50);
      Tensor b = randomInt(dt, sb, rng, 1, 9);
      Shape expect = naiveBroadcast(sa, sb);
      auto at = [&](const Tensor& t, const Shape& s, int64_t i) {
        return static_cast<int64_t>(t.at(ravelBroadcast(unravel(i, expect), s)));
      };
      Tensor sum = mustRun("Add", {&a, &b})[0], diff = mustRun("Sub", {&a, &b})[0];
      Tensor prod = mustRun("Mul", {&a, &b})[0], quot = mustRun("Div", {&a, &b})[0];
      Tensor mx = mustRun("Max", {&a, &b})[0], neg = mustRun("Neg", {&a})[0], ab = mustRun("Abs", {&a})[0];
      Tensor eq = mustRun("Equal", {&a, &b})[0], lt = mustRun("Less", {&a, &b})[0];
      Tensor ge = mustRun("GreaterOrEqual", {&a, &b})[0], le = mustRun("LessOrEqual", {&a, &b})[0];
      Tensor gt = mustRun("Greater", {&a, &b})[0];
      REQUIRE(sum.dtype() == dt);
      REQUIRE(eq.dtype() == DType::Bool);
      for (int64_t i = 0; i < sum.numel(); ++i) {
        int64_t x = at(a, sa, i), y = at(b, sb, i);
        REQUIRE(sum.at(i) == x + y);
        REQUIRE(diff.at(i) == x - y);
        REQUIRE(prod.at(i) == x * y);
        REQUIRE(quot.at(i) == x / y);  // truncation toward zero, as C
        REQUIRE(mx.at(i) == std::max(x, y));
        REQUIRE(eq.at(i) == (x == y));
        REQUIRE(lt.at(i) == (x < y));
        REQUIRE(le.at(i) == (x <= y));
        REQUIRE(gt.at(i) == (x > y));
        REQUIRE(ge.at(i) == (x >= y));
      }
      for (int64_t i = 0; i < a.numel(); ++i) {
        REQUIRE(neg.at(i) == -a.at(i));
        REQUIRE(ab.at(i) == std::abs(a.at(i)));
      }
    }
  }
}

TEST_CASE("integer division by zero is an error naming the node", "[ref]") {
  Tensor a = i64s({4, 5}), z = i64s({1, 0});
  auto r = runOp("Div", {&a, &z});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("Div_0") != std::string::npos);
}

TEST_CASE("logic ops and Where", "[ref]") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    Shape out = randomShape(rng, 0, 4, 4);
    Shape sc = broadcastableTo(out, rng), sx = broadcastableTo(out, rng), sy = broadcastableTo(out, rng);
    Tensor c = randomInt(DType::Bool, sc, rng, 0, 1);
    Tensor d = randomInt(DType::Bool, sx, rng, 0, 1);
    Tensor x = randomF32(sx, rng), y = randomF32(sy, rng);
    Shape expect = naiveBroadcast(naiveBroadcast(sc, sx), sy);
    Tensor w = mustRun("Where", {&c, &x, &y})[0];
    REQUIRE(w.shape() == expect);
    for (int64_t i = 0; i < w.numel(); ++i) {
      auto idx = unravel(i, expect);
      double ref = c.at(ravelBroadcast(idx, sc)) ? x.at(ravelBroadcast(idx, sx)) : y.at(ravelBroadcast(idx, sy));
      REQUIRE(w.at(i) == ref);
    }
    Tensor andT = mustRun("And", {&c, &d})[0], orT = mustRun("Or", {&c, &d})[0];
    Tensor notT = mustRun("Not", {&c})[0];
    Shape cd = naiveBroadcast(sc, sx);
    for (int64_t i = 0; i < andT.numel(); ++i) {
      auto idx = unravel(i, cd);
      bool p = c.at(ravelBroadcast(idx, sc)) != 0, q = d.at(ravelBroadcast(idx, sx)) != 0;
      REQUIRE(andT.at(i) == (p && q));
      REQUIRE(orT.at(i) == (p || q));
    }
    for (int64_t i = 0; i < c.numel(); ++i) REQUIRE(notT.at(i) == (c.at(i) == 0));
  }
}

TEST_CASE("variadic Max and Min fold all inputs", "[ref]") {
  std::mt19937 rng(4);
  Tensor a = randomF32({2, 3}, rng), b = randomF32({3}, rng), c = randomF32({2, 1}, rng);
  Tensor mx = mustRun("Max", {&a, &b, &c})[0], mn = mustRun("Min", {&a, &b, &c})[0];
  Tensor single = mustRun("Max", {&a})[0];
  requireEqual(single, a);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      float x = a.data<float>()[i * 3 + j], y = b.data<float>()[j], z = c.data<float>()[i];
      REQUIRE(mx.data<float>()[i * 3 + j] == std::max({x, y, z}));
      REQUIRE(mn.data<float>()[i * 3 + j] == std::min({x, y, z}));
    }
}

TEST_CASE("unary f32 ops follow their formulas", "[ref]") {
  std::mt19937 rng(5);
  Tensor x = randomF32({3, 7, 5}, rng, -4.0f, 4.0f);
  Tensor pos = randomF32({3, 7, 5}, rng, 0.1f, 4.0f);
  struct Case {
    const char* op;
    bool positive;
    std::function<double(double)> fn;
    Attrs attrs;
  };
  std::vector<Case> cases = {
      {"Neg", false, [](double v) { return -v; }, {}},
      {"Abs", false, [](double v) { return std::abs(v); }, {}},
      {"Sign", false, [](double v) { return (v > 0) - (v < 0); }, {}},
      {"Ceil", false, [](double v) { return std::ceil(v); }, {}},
      {"Floor", false, [](double v) { return std::floor(v); }, {}},
      {"Sqrt", true, [](double v) { return std::sqrt(v); }, {}},
      {"Reciprocal", true, [](double v) { return 1 / v; }, {}},
      {"Exp", false, [](double v) { return std::exp(v); }, {}},
      {"Log", true, [](double v) { return std::log(v); }, {}},
      {"Erf", false, [](double v) { return std::erf(v); }, {}},
      {"Sigmoid", false, [](double v) { return 1 / (1 + std::exp(-v)); }, {}},
      {"Tanh", false, [](double v) { return std::tanh(v); }, {}},
      {"Relu", false, [](double v) { return v > 0 ? v : 0; }, {}},
      {"Cos", false, [](double v) { return std::cos(v); }, {}},
      {"Sin", false, [](double v) { return std::sin(v); }, {}},
      {"Gelu", false, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, {}},
      {"Gelu", false,
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); },
       {{"approximate", std::string("tanh")}}},
  };
  for (const auto& c : cases) {
    const Tensor& in = c.positive ? pos : x;
    Tensor y = mustRun(c.op, {&in}, c.attrs)[0];
    INFO(c.op);
    REQUIRE(y.shape() == in.shape());
    for (int64_t i = 0; i < y.numel(); ++i)
      REQUIRE(y.at(i) == Approx(c.fn(in.at(i))).epsilon(1e-6).margin(1e-6));
  }
}

TEST_CASE("Round halves to even, Sign of integers and zeros", "[ref]") {
  Tensor x = Tensor::fromVector<float>({8}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.4f, -2.6f});
  requireEqual(mustRun("Round", {&x})[0], Tensor::fromVector<float>({8}, {-2, -2, -0.0f, 0, 2, 2, 2, -3}));
  Tensor i = Tensor::fromVector<int64_t>({4}, {-7, 0, 3, -1});
  requireEqual(mustRun("Sign", {&i})[0], Tensor::fromVector<int64_t>({4}, {-1, 0, 1, -1}));
  Tensor z = Tensor::fromVector<float>({2}, {0.0f, -0.0f});
  requireEqual(mustRun("Sign", {&z})[0], Tensor::fromVector<float>({2}, {0, 0}));
}

TEST_CASE("Cast, CastLike, Identity and inference Dropout", "[ref]") {
  Tensor x = Tensor::fromVector<float>({4}, {-1.7f, 0.0f, 2.9f, 3.0f});
  Tensor toI64 = mustRun("Cast", {&x}, {{"to", int64_t{7}}})[0];
  requireEqual(toI64, Tensor::fromVector<int64_t>({4}, {-1, 0, 2, 3}));
  Tensor toBool = mustRun("Cast", {&x}, {{"to", int64_t{9}}})[0];
  requireEqual(toBool, Tensor::fromVector<bool>({4}, {true, false, true, true}));
  Tensor big = Tensor::scalar<int64_t>((int64_t{1} << 40) + 3);
  Tensor i32like = Tensor::scalar<int32_t>(0);
  Tensor back = mustRun("CastLike", {&toI64, &x})[0];
  requireEqual(back, Tensor::fromVector<float>({4}, {-1, 0, 2, 3}));
  Tensor f64 = mustRun("Cast", {&big}, {{"to", int64_t{11}}})[0];
  CHECK(f64.data<double>()[0] == static_cast<double>((int64_t{1} << 40) + 3));
  CHECK(mustRun("CastLike", {&x, &i32like})[0].dtype() == DType::I32);
  requireEqual(mustRun("Identity", {&x})[0], x);
  auto drop = mustRun("Dropout", {&x}, {}, 2);
  requireEqual(drop[0], x);
  requireEqual(drop[1], Tensor::fromVector<bool>({4}, {true, true, true, true}));
  CHECK_FALSE(runOp("Cast", {&x}, {{"to", int64_t{8}}}).ok());  // strings
}

TEST_CASE("elementwise errors name the node instead of crashing", "[ref]") {
  Tensor f = Tensor::fromVector<float>({2}, {1, 2});
  Tensor i = i64s({1, 2});
  Tensor f3 = Tensor::fromVector<float>({3}, {1, 2, 3});
  for (auto r : {runOp("Add", {&f, &i}), runOp("Add", {&f, &f3}), runOp("Exp", {&i}),
                 runOp("Add", {&f}), runOp("Not", {&f}), runOp("Where", {&f, &f, &f})}) {
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("node '") != std::string::npos);
  }
}

TEST_CASE("Mod: the divisor's sign (fmod=0) or the dividend's (fmod=1)", "[ref]") {
  // The ONNX spec's examples.
  Tensor a = Tensor::fromVector<int64_t>({6}, {-4, 7, 5, 4, -7, 8});
  Tensor b = Tensor::fromVector<int64_t>({6}, {2, -3, 8, -2, 3, 5});
  requireEqual(mustRun("Mod", {&a, &b})[0], Tensor::fromVector<int64_t>({6}, {0, -2, 5, 0, 2, 3}));
  requireEqual(mustRun("Mod", {&a, &b}, {{"fmod", int64_t{1}}})[0],
               Tensor::fromVector<int64_t>({6}, {0, 1, 5, 0, -1, 3}));
  // Random: a == (a div b) * b + mod with mod in the divisor's half-open range, against floor.
  std::mt19937 rng(5);
  Tensor x = randomInt(DType::I32, {40}, rng, -50, 50), y = randomInt(DType::I32, {40}, rng, 1, 9);
  for (int64_t i = 0; i < 40; ++i)
    if (i % 2) y.set(i, -y.at(i));
  Tensor m = mustRun("Mod", {&x, &y})[0];
  for (int64_t i = 0; i < 40; ++i) {
    const double q = std::floor(x.at(i) / y.at(i));
    REQUIRE(m.at(i) == x.at(i) - q * y.at(i));
  }
  Tensor f = randomF32({7}, rng), g = randomF32({7}, rng, 0.5f, 2.0f);
  Tensor fm = mustRun("Mod", {&f, &g}, {{"fmod", int64_t{1}}})[0];
  for (int64_t i = 0; i < 7; ++i) REQUIRE(fm.at(i) == static_cast<float>(std::fmod(f.data<float>()[i], g.data<float>()[i])));
  CHECK_FALSE(runOp("Mod", {&f, &g}).ok());  // floats need fmod=1
  Tensor z = Tensor::fromVector<int64_t>({6}, {1, 1, 0, 1, 1, 1});
  CHECK_FALSE(runOp("Mod", {&a, &z}).ok());
}
