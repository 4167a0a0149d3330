// Finite-difference checks of every gradient rule: each test builds a small forward graph
// around one op, differentiates it with buildTrainingGraph, runs the joint graph with the
// reference executor and compares each trainable's gradient with central differences of the
// forward graph's loss.
#include <catch2/catch.hpp>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ref/executor.h"
#include "tests/autodiff/test_graph.h"

namespace fbl {
namespace {

using testing::TestGraph;
using ir::ValueId;
using Attrs = std::map<std::string, ir::AttrValue>;

float lossWith(ref::Executor& fwd, ValueId param, const ir::Tensor& value) {
  REQUIRE(fwd.setValue(param, value).ok());
  auto r = fwd.run({});
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  return static_cast<float>(r.value()[0].at(0));
}

// Checks d loss / d p for every initializer named "p*" (at most 40 elements each).
void checkGradients(TestGraph& t, const std::map<ValueId, ir::Tensor>& feeds = {},
                    double h = 1e-2, double tol = 1e-2, double floor = 3e-4) {
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = {"p*"};
  opts.optimizer.kind = autodiff::OptimizerKind::SGD;
  auto tg = autodiff::buildTrainingGraph(t.g, opts);
  INFO((tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  std::vector<ValueId> fetch;
  for (const auto& tp : tg->trainables) fetch.push_back(tp.grad);
  ref::Executor joint(tg->graph);
  auto grads = joint.run(feeds, fetch);
  INFO((grads.ok() ? "" : grads.error().message));
  REQUIRE(grads.ok());

  ir::Graph forward = t.g;
  ref::Executor fwd(forward);
  for (size_t i = 0; i < tg->trainables.size(); ++i) {
    ValueId p = tg->trainables[i].param;
    const ir::Tensor base = *t.g.values[p].data;
    const ir::Tensor& analytic = grads.value()[i];
    REQUIRE(analytic.shape() == base.shape());
    std::vector<int64_t> picks;
    for (int64_t k = 0; k < base.numel(); ++k) picks.push_back(k);
    std::shuffle(picks.begin(), picks.end(), t.rng());
    if (picks.size() > 40) picks.resize(40);
    double worst = 0;
    for (int64_t k : picks) {
      ir::Tensor plus = base, minus = base;
      plus.data<float>()[k] += static_cast<float>(h);
      minus.data<float>()[k] -= static_cast<float>(h);
      double fd = (double(lossWith(fwd, p, plus)) - lossWith(fwd, p, minus)) / (2 * h);
      worst = std::max(worst, std::abs(fd - analytic.at(k)));
    }
    REQUIRE(fwd.setValue(p, base).ok());
    INFO("trainable " << t.g.values[p].name << ": worst |fd - analytic| " << worst
                      << ", max |analytic| " << testing::maxAbs(analytic));
    // Relative to the gradient's scale, plus a floor for fp32 rounding in the differences.
    CHECK(worst <= tol * testing::maxAbs(analytic) + floor);
  }
}

TEST_CASE("gradcheck: broadcasting arithmetic", "[autodiff][gradcheck]") {
  for (std::string op : {"Add", "Sub", "Mul", "Div"}) {
    DYNAMIC_SECTION(op) {
      TestGraph t;
      ValueId a = t.param("pa", {2, 3, 4});
      ValueId b = op == "Div" ? t.param("pb", {3, 1}, 0.5f, 1.5f) : t.param("pb", {3, 1});
      t.weightedSumLoss(t.node(op, {a, b}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: unary math", "[autodiff][gradcheck]") {
  for (std::string op : {"Neg", "Sqrt", "Reciprocal", "Sigmoid", "Tanh", "Erf"}) {
    DYNAMIC_SECTION(op) {
      TestGraph t;
      ValueId x = t.param("px", {3, 5}, 0.5f, 2.0f);
      t.weightedSumLoss(t.node(op, {x}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: Pow with constant exponents", "[autodiff][gradcheck]") {
  for (float e : {2.0f, 3.0f, 0.5f, 1.0f}) {
    DYNAMIC_SECTION("exponent " << e) {
      TestGraph t;
      ValueId x = t.param("px", {4, 3}, 0.5f, 1.5f);
      t.weightedSumLoss(t.node("Pow", {x, t.scalar(e)}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: Gelu, both approximations", "[autodiff][gradcheck]") {
  for (std::string approx : {"none", "tanh"}) {
    DYNAMIC_SECTION(approx) {
      TestGraph t;
      ValueId x = t.param("px", {4, 6}, -3, 3);
      t.weightedSumLoss(t.node("Gelu", {x}, {{"approximate", approx}}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: reductions", "[autodiff][gradcheck]") {
  TestGraph t;
  ValueId x = t.param("px", {2, 3, 4});
  SECTION("ReduceMean last axis, keepdims") {
    t.weightedSumLoss(t.node("ReduceMean", {x, t.ints({-1})}, {{"keepdims", int64_t(1)}}));
  }
  SECTION("ReduceSum two axes, no keepdims") {
    t.weightedSumLoss(t.node("ReduceSum", {x, t.ints({0, 2})}, {{"keepdims", int64_t(0)}}));
  }
  SECTION("ReduceMean over everything") {
    t.weightedSumLoss(t.node("ReduceMean", {x}, {{"keepdims", int64_t(0)}}));
  }
  checkGradients(t);
}

TEST_CASE("gradcheck: MatMul shapes", "[autodiff][gradcheck]") {
  struct Case {
    ir::Shape a, b;
  };
  for (const auto& c : std::vector<Case>{{{2, 3, 4}, {4, 5}},
                                         {{2, 1, 3, 4}, {3, 4, 5}},
                                         {{3, 4}, {2, 4, 5}},
                                         {{4}, {4, 5}},
                                         {{3, 4}, {4}},
                                         {{2, 3, 4}, {4}}}) {
    DYNAMIC_SECTION(ir::shapeToString(c.a) << " x " << ir::shapeToString(c.b)) {
      TestGraph t;
      ValueId a = t.param("pa", c.a), b = t.param("pb", c.b);
      t.weightedSumLoss(t.node("MatMul", {a, b}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: LoRA branch x W^T + 2 (x A^T) B^T", "[autodiff][gradcheck]") {
  TestGraph t;
  ValueId x = t.param("x", {2, 5, 6});
  ValueId w = t.param("w", {7, 6});
  ValueId a = t.param("pA", {3, 6}), b = t.param("pB", {7, 3});
  ValueId base = t.node("MatMul", {x, t.node("Transpose", {w}, {{"perm", std::vector<int64_t>{1, 0}}})});
  ValueId h = t.node("MatMul", {x, t.node("Transpose", {a}, {{"perm", std::vector<int64_t>{1, 0}}})});
  ValueId z = t.node("MatMul", {h, t.node("Transpose", {b}, {{"perm", std::vector<int64_t>{1, 0}}})});
  t.weightedSumLoss(t.node("Add", {base, t.node("Mul", {z, t.scalar(2.0f)})}));
  checkGradients(t);
}

TEST_CASE("gradcheck: Gemm orientations", "[autodiff][gradcheck]") {
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      DYNAMIC_SECTION("transA " << ta << " transB " << tb) {
        TestGraph t;
        ValueId a = t.param("pa", ta ? ir::Shape{4, 3} : ir::Shape{3, 4});
        ValueId b = t.param("pb", tb ? ir::Shape{5, 4} : ir::Shape{4, 5});
        ValueId c = t.param("pc", {5});
        t.weightedSumLoss(t.node("Gemm", {a, b, c},
                                 {{"transA", ta}, {"transB", tb}, {"alpha", 0.5f}, {"beta", 2.0f}}));
        checkGradients(t);
      }
    }
}

TEST_CASE("gradcheck: Conv", "[autodiff][gradcheck]") {
  SECTION("ViT patch embedding: stride = kernel") {
    TestGraph t;
    ValueId x = t.param("px", {2, 3, 8, 8});
    ValueId w = t.param("pw", {4, 3, 4, 4});
    ValueId b = t.param("pb", {4});
    t.weightedSumLoss(t.node("Conv", {x, w, b},
                             {{"kernel_shape", std::vector<int64_t>{4, 4}},
                              {"strides", std::vector<int64_t>{4, 4}}}));
    checkGradients(t);
  }
  SECTION("padded, strided, dilated, grouped") {
    TestGraph t;
    ValueId x = t.param("px", {1, 4, 7, 6});
    ValueId w = t.param("pw", {6, 2, 3, 2});
    t.weightedSumLoss(t.node("Conv", {x, w},
                             {{"group", int64_t(2)},
                              {"pads", std::vector<int64_t>{1, 0, 2, 1}},
                              {"strides", std::vector<int64_t>{2, 1}},
                              {"dilations", std::vector<int64_t>{1, 2}}}));
    checkGradients(t);
  }
}

TEST_CASE("gradcheck: Softmax", "[autodiff][gradcheck]") {
  for (int64_t axis : {-1, 1}) {
    DYNAMIC_SECTION("axis " << axis) {
      TestGraph t;
      ValueId x = t.param("px", {2, 4, 3}, -2, 2);
      t.weightedSumLoss(t.node("Softmax", {x}, {{"axis", axis}}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: LayerNormalization", "[autodiff][gradcheck]") {
  TestGraph t;
  ValueId x = t.param("px", {2, 3, 8}, -2, 2);
  ValueId s = t.param("ps", {8}), b = t.param("pb", {8});
  t.weightedSumLoss(t.node("LayerNormalization", {x, s, b}, {{"epsilon", 1e-5f}}));
  checkGradients(t);
}

TEST_CASE("gradcheck: Gather", "[autodiff][gradcheck]") {
  SECTION("embedding lookup with repeated ids") {
    TestGraph t;
    ValueId table = t.param("pt", {10, 4});
    ValueId ids = t.constant(ir::Tensor::fromVector<int64_t>({2, 3}, {1, 7, 1, 0, 9, 7}));
    t.weightedSumLoss(t.node("Gather", {table, ids}, {{"axis", int64_t(0)}}));
    checkGradients(t);
  }
  SECTION("scalar negative index on axis 1 (the CLS token)") {
    TestGraph t;
    ValueId x = t.param("px", {3, 5, 2});
    ValueId idx = t.constant(ir::Tensor::scalar<int64_t>(-5));
    t.weightedSumLoss(t.node("Gather", {x, idx}, {{"axis", int64_t(1)}}));
    checkGradients(t);
  }
}

TEST_CASE("gradcheck: movement ops", "[autodiff][gradcheck]") {
  TestGraph t;
  ValueId x = t.param("px", {2, 3, 4});
  SECTION("Reshape") { t.weightedSumLoss(t.node("Reshape", {x, t.ints({4, -1})})); }
  SECTION("Transpose") {
    t.weightedSumLoss(t.node("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}}));
  }
  SECTION("Unsqueeze then Squeeze") {
    ValueId u = t.node("Unsqueeze", {x, t.ints({1})});
    ValueId e = t.node("Expand", {u, t.ints({2, 5, 3, 4})});
    t.weightedSumLoss(t.node("Squeeze", {t.node("ReduceSum", {e, t.ints({1})}), t.ints({1})}));
  }
  SECTION("Expand") {
    ValueId y = t.param("py", {3, 1});
    t.weightedSumLoss(t.node("Mul", {t.node("Expand", {y, t.ints({2, 3, 4})}), x}));
  }
  SECTION("Slice with steps, negative starts and a reversed axis") {
    t.weightedSumLoss(t.node("Slice", {x, t.ints({-2, 3, 0}), t.ints({100, -100, 4}),
                                       t.ints({1, 2, 0}), t.ints({1, -2, 1})}));
  }
  SECTION("Concat") {
    ValueId y = t.param("py", {2, 2, 4});
    t.weightedSumLoss(t.node("Concat", {x, y, x}, {{"axis", int64_t(-2)}}));
  }
  SECTION("Where with a broadcast branch") {
    std::vector<bool> mask{true, false, false, true, true, false, true, true, false, false, true, false};
    ValueId cond = t.constant(ir::Tensor::fromVector<bool>({3, 4}, mask));
    ValueId y = t.param("py", {4});
    t.weightedSumLoss(t.node("Where", {cond, x, y}));
  }
  checkGradients(t);
}

TEST_CASE("gradcheck: SoftmaxCrossEntropyLoss", "[autodiff][gradcheck]") {
  for (std::string reduction : {"mean", "sum"}) {
    DYNAMIC_SECTION("[N, C, d] scores, ignore_index, " << reduction) {
      TestGraph t;
      ValueId scores = t.param("ps", {2, 5, 3}, -2, 2);
      ValueId labels = t.constant(ir::Tensor::fromVector<int64_t>({2, 3}, {4, -100, 0, 2, 2, 1}));
      t.setLoss(t.node("SoftmaxCrossEntropyLoss", {scores, labels},
                       {{"reduction", reduction}, {"ignore_index", int64_t(-100)}}));
      checkGradients(t);
    }
  }
  SECTION("reduction none, [N, C] scores") {
    TestGraph t;
    ValueId scores = t.param("ps", {4, 6}, -2, 2);
    ValueId labels = t.constant(ir::Tensor::fromVector<int64_t>({4}, {5, 0, 3, 3}));
    t.weightedSumLoss(t.node("SoftmaxCrossEntropyLoss", {scores, labels}, {{"reduction", std::string("none")}}));
    checkGradients(t);
  }
}

}  // namespace
}  // namespace fbl
