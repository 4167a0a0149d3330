// Finite-difference checks of every gradient rule: each test builds a small forward graph
// around one op, differentiates it with buildTrainingGraph, runs the joint graph with the
// reference executor and compares each trainable's gradient with central differences of the
// forward graph's loss. Rules for ops with kinks (Relu, Max, Min, ReduceMax) are checked on
// data away from the kinks, and their tie conventions against naive loops at the end.
#include <catch2/catch.hpp>

#include "compiler/autodiff/training_graph.h"
#include "compiler/passes/decompose_ops.h"
#include "compiler/ref/executor.h"
#include "tests/autodiff/tensor_diff.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using testing::GraphBuilder;
using ir::ValueId;
using Attrs = std::map<std::string, ir::AttrValue>;

float lossWith(ref::Executor& fwd, ValueId param, const ir::Tensor& value) {
  REQUIRE(fwd.setValue(param, value).ok());
  auto r = fwd.run({});
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  return static_cast<float>(r.value()[0].at(0));
}

// Runs the joint graph and returns d loss / d p for every initializer named "p*", in
// buildTrainingGraph's trainable order, with the trainables' ids.
std::vector<std::pair<ValueId, ir::Tensor>> analyticGradients(
    GraphBuilder& t, const std::map<ValueId, ir::Tensor>& feeds = {}) {
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
  std::vector<std::pair<ValueId, ir::Tensor>> out;
  for (size_t i = 0; i < tg->trainables.size(); ++i)
    out.emplace_back(tg->trainables[i].param, grads.value()[i]);
  return out;
}

// Checks d loss / d p for every initializer named "p*" (at most 40 elements each).
void checkGradients(GraphBuilder& t, const std::map<ValueId, ir::Tensor>& feeds = {},
                    double h = 1e-2, double tol = 1e-2, double floor = 3e-4) {
  auto grads = analyticGradients(t, feeds);
  ir::Graph forward = t.g;
  ref::Executor fwd(forward);
  for (const auto& [p, analytic] : grads) {
    const ir::Tensor base = *t.g.values[p].data;
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

// Max, Min, ReduceMax and ReLU have kinks, where central differences are meaningless; these
// draw parameters that stay more than the step h = 1e-2 away from every kink.

// Elements all distinct, 0.05 apart, from one shuffled grid that straddles 0 with a margin of
// 0.025 (a zero pad never ties either): no tie moves under a step of h.
std::vector<ValueId> distinctParams(GraphBuilder& t,
                                    const std::vector<std::pair<std::string, ir::Shape>>& specs) {
  int64_t total = 0;
  for (const auto& [name, shape] : specs) total += ir::numElements(shape);
  std::vector<float> grid;
  for (int64_t k = 0; k < total; ++k) grid.push_back(0.05f * static_cast<float>(k - total / 2) + 0.025f);
  std::shuffle(grid.begin(), grid.end(), t.rng());
  std::vector<ValueId> ids;
  size_t next = 0;
  for (const auto& [name, shape] : specs) {
    ir::Tensor v(ir::DType::F32, shape);
    for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] = grid[next++];
    ids.push_back(t.init(name, std::move(v)));
  }
  return ids;
}

// Uniform in [lo, hi), moved 0.2 away from any kink it falls within 0.1 of.
ValueId kinkFreeParam(GraphBuilder& t, const std::string& name, const ir::Shape& shape, float lo,
                      float hi, const std::vector<float>& kinks) {
  ir::Tensor v = t.randomTensor(shape, lo, hi);
  for (int64_t i = 0; i < v.numel(); ++i) {
    float& x = v.data<float>()[i];
    for (float k : kinks)
      if (std::abs(x - k) < 0.1f) x += x < k ? -0.2f : 0.2f;
  }
  return t.init(name, std::move(v));
}

TEST_CASE("gradcheck: broadcasting arithmetic", "[autodiff][gradcheck]") {
  for (std::string op : {"Add", "Sub", "Mul", "Div"}) {
    DYNAMIC_SECTION(op) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId a = t.randomParam("pa", {2, 3, 4});
      ValueId b = op == "Div" ? t.randomParam("pb", {3, 1}, 0.5f, 1.5f) : t.randomParam("pb", {3, 1});
      t.weightedSumLoss(t.op(op, {a, b}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: unary math", "[autodiff][gradcheck]") {
  for (std::string op : {"Neg", "Sqrt", "Reciprocal", "Sigmoid", "Tanh", "Erf"}) {
    DYNAMIC_SECTION(op) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId x = t.randomParam("px", {3, 5}, 0.5f, 2.0f);
      t.weightedSumLoss(t.op(op, {x}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: piecewise-constant ops pass no gradient", "[autodiff][gradcheck]") {
  // x * op(x): the gradient is op(x) alone, as PyTorch's (DeBERTa-v2's log position buckets).
  for (std::string op : {"Sign", "Ceil", "Floor", "Round"}) {
    DYNAMIC_SECTION(op) {
      GraphBuilder t = GraphBuilder::inferring();
      std::vector<float> steps;  // where any of them jumps: the integers and the halves
      for (int k = -6; k <= 6; ++k) steps.push_back(0.5f * static_cast<float>(k));
      ValueId x = kinkFreeParam(t, "px", {3, 5}, -2.8f, 2.8f, steps);
      t.weightedSumLoss(t.op("Mul", {x, t.op(op, {x})}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: Pow with constant exponents", "[autodiff][gradcheck]") {
  for (float e : {2.0f, 3.0f, 0.5f, 1.0f}) {
    DYNAMIC_SECTION("exponent " << e) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId x = t.randomParam("px", {4, 3}, 0.5f, 1.5f);
      t.weightedSumLoss(t.op("Pow", {x, t.scalar(e)}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: Gelu, both approximations", "[autodiff][gradcheck]") {
  for (std::string approx : {"none", "tanh"}) {
    DYNAMIC_SECTION(approx) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId x = t.randomParam("px", {4, 6}, -3, 3);
      t.weightedSumLoss(t.op("Gelu", {x}, {{"approximate", approx}}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: reductions", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.randomParam("px", {2, 3, 4});
  SECTION("ReduceMean last axis, keepdims") {
    t.weightedSumLoss(t.op("ReduceMean", {x, t.ints({-1})}, {{"keepdims", int64_t(1)}}));
  }
  SECTION("ReduceSum two axes, no keepdims") {
    t.weightedSumLoss(t.op("ReduceSum", {x, t.ints({0, 2})}, {{"keepdims", int64_t(0)}}));
  }
  SECTION("ReduceMean over everything") {
    t.weightedSumLoss(t.op("ReduceMean", {x}, {{"keepdims", int64_t(0)}}));
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
      GraphBuilder t = GraphBuilder::inferring();
      ValueId a = t.randomParam("pa", c.a), b = t.randomParam("pb", c.b);
      t.weightedSumLoss(t.op("MatMul", {a, b}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: LoRA branch x W^T + 2 (x A^T) B^T", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.randomParam("x", {2, 5, 6});
  ValueId w = t.randomParam("w", {7, 6});
  ValueId a = t.randomParam("pA", {3, 6}), b = t.randomParam("pB", {7, 3});
  ValueId base = t.op("MatMul", {x, t.op("Transpose", {w}, {{"perm", std::vector<int64_t>{1, 0}}})});
  ValueId h = t.op("MatMul", {x, t.op("Transpose", {a}, {{"perm", std::vector<int64_t>{1, 0}}})});
  ValueId z = t.op("MatMul", {h, t.op("Transpose", {b}, {{"perm", std::vector<int64_t>{1, 0}}})});
  t.weightedSumLoss(t.op("Add", {base, t.op("Mul", {z, t.scalar(2.0f)})}));
  checkGradients(t);
}

TEST_CASE("gradcheck: Gemm orientations", "[autodiff][gradcheck]") {
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      DYNAMIC_SECTION("transA " << ta << " transB " << tb) {
        GraphBuilder t = GraphBuilder::inferring();
        ValueId a = t.randomParam("pa", ta ? ir::Shape{4, 3} : ir::Shape{3, 4});
        ValueId b = t.randomParam("pb", tb ? ir::Shape{5, 4} : ir::Shape{4, 5});
        ValueId c = t.randomParam("pc", {5});
        t.weightedSumLoss(t.op("Gemm", {a, b, c},
                                 {{"transA", ta}, {"transB", tb}, {"alpha", 0.5f}, {"beta", 2.0f}}));
        checkGradients(t);
      }
    }
}

TEST_CASE("gradcheck: Conv", "[autodiff][gradcheck]") {
  SECTION("ViT patch embedding: stride = kernel") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId x = t.randomParam("px", {2, 3, 8, 8});
    ValueId w = t.randomParam("pw", {4, 3, 4, 4});
    ValueId b = t.randomParam("pb", {4});
    t.weightedSumLoss(t.op("Conv", {x, w, b},
                             {{"kernel_shape", std::vector<int64_t>{4, 4}},
                              {"strides", std::vector<int64_t>{4, 4}}}));
    checkGradients(t);
  }
  SECTION("padded, strided, dilated, grouped") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId x = t.randomParam("px", {1, 4, 7, 6});
    ValueId w = t.randomParam("pw", {6, 2, 3, 2});
    t.weightedSumLoss(t.op("Conv", {x, w},
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
      GraphBuilder t = GraphBuilder::inferring();
      ValueId x = t.randomParam("px", {2, 4, 3}, -2, 2);
      t.weightedSumLoss(t.op("Softmax", {x}, {{"axis", axis}}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: LayerNormalization", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.randomParam("px", {2, 3, 8}, -2, 2);
  ValueId s = t.randomParam("ps", {8}), b = t.randomParam("pb", {8});
  t.weightedSumLoss(t.op("LayerNormalization", {x, s, b}, {{"epsilon", 1e-5f}}));
  checkGradients(t);
}

TEST_CASE("gradcheck: Gather", "[autodiff][gradcheck]") {
  SECTION("embedding lookup with repeated ids") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId table = t.randomParam("pt", {10, 4});
    ValueId ids = t.constant(ir::Tensor::fromVector<int64_t>({2, 3}, {1, 7, 1, 0, 9, 7}));
    t.weightedSumLoss(t.op("Gather", {table, ids}, {{"axis", int64_t(0)}}));
    checkGradients(t);
  }
  SECTION("scalar negative index on axis 1 (the CLS token)") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId x = t.randomParam("px", {3, 5, 2});
    ValueId idx = t.constant(ir::Tensor::scalar<int64_t>(-5));
    t.weightedSumLoss(t.op("Gather", {x, idx}, {{"axis", int64_t(1)}}));
    checkGradients(t);
  }
}

TEST_CASE("gradcheck: movement ops", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.randomParam("px", {2, 3, 4});
  SECTION("Reshape") { t.weightedSumLoss(t.op("Reshape", {x, t.ints({4, -1})})); }
  SECTION("Transpose") {
    t.weightedSumLoss(t.op("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}}));
  }
  SECTION("Unsqueeze then Squeeze") {
    ValueId u = t.op("Unsqueeze", {x, t.ints({1})});
    ValueId e = t.op("Expand", {u, t.ints({2, 5, 3, 4})});
    t.weightedSumLoss(t.op("Squeeze", {t.op("ReduceSum", {e, t.ints({1})}), t.ints({1})}));
  }
  SECTION("Expand") {
    ValueId y = t.randomParam("py", {3, 1});
    t.weightedSumLoss(t.op("Mul", {t.op("Expand", {y, t.ints({2, 3, 4})}), x}));
  }
  SECTION("Slice with steps, negative starts and a reversed axis") {
    t.weightedSumLoss(t.op("Slice", {x, t.ints({-2, 3, 0}), t.ints({100, -100, 4}),
                                       t.ints({1, 2, 0}), t.ints({1, -2, 1})}));
  }
  SECTION("Concat") {
    ValueId y = t.randomParam("py", {2, 2, 4});
    t.weightedSumLoss(t.op("Concat", {x, y, x}, {{"axis", int64_t(-2)}}));
  }
  SECTION("Where with a broadcast branch") {
    std::vector<bool> mask{true, false, false, true, true, false, true, true, false, false, true, false};
    ValueId cond = t.constant(ir::Tensor::fromVector<bool>({3, 4}, mask));
    ValueId y = t.randomParam("py", {4});
    t.weightedSumLoss(t.op("Where", {cond, x, y}));
  }
  checkGradients(t);
}

TEST_CASE("gradcheck: CumSum, every direction", "[autodiff][gradcheck]") {
  for (const int64_t exclusive : {0, 1})
    for (const int64_t reverse : {0, 1})
      DYNAMIC_SECTION("exclusive " << exclusive << " reverse " << reverse) {
        GraphBuilder t = GraphBuilder::inferring();
        ValueId x = t.randomParam("px", {2, 5, 3});
        ValueId axis = t.constant(ir::Tensor::scalar<int64_t>(-2));
        t.weightedSumLoss(t.op("CumSum", {x, axis}, {{"exclusive", exclusive}, {"reverse", reverse}}));
        checkGradients(t);
      }
}

TEST_CASE("gradcheck: ScatterND and GatherND", "[autodiff][gradcheck]") {
  for (const std::string red : {"none", "add"})
    DYNAMIC_SECTION("ScatterND rows, reduction " << red) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId data = t.randomParam("pd", {5, 3});
      ValueId upd = t.randomParam("pu", {3, 3});
      ValueId idx = t.constant(ir::Tensor::fromVector<int64_t>({3, 1}, {4, 0, -3}));
      t.weightedSumLoss(t.op("ScatterND", {data, idx, upd}, {{"reduction", red}}));
      checkGradients(t);
    }
  SECTION("ScatterND add, a repeated element tuple") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId data = t.randomParam("pd", {3, 4});
    ValueId upd = t.randomParam("pu", {3});
    ValueId idx = t.constant(ir::Tensor::fromVector<int64_t>({3, 2}, {1, 2, 0, 3, 1, 2}));
    t.weightedSumLoss(t.op("ScatterND", {data, idx, upd}, {{"reduction", std::string("add")}}));
    checkGradients(t);
  }
  SECTION("GatherND pairs, a repeated tuple") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId data = t.randomParam("pd", {4, 3, 2});
    ValueId idx = t.constant(ir::Tensor::fromVector<int64_t>({2, 2, 2}, {0, 1, 3, -1, 0, 1, 2, 0}));
    t.weightedSumLoss(t.op("GatherND", {data, idx}));
    checkGradients(t);
  }
}

TEST_CASE("gradcheck: Split, with a part no gradient reaches", "[autodiff][gradcheck]") {
  // A fused qkv output split three ways; the loss reads the first and last parts only.
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.randomParam("px", {2, 4, 9});
  ValueId sizes = t.constant(ir::Tensor::fromVector<int64_t>({3}, {3, 2, 4}));
  std::vector<ValueId> parts = t.node("Split", {x, sizes}, {{"axis", int64_t{-1}}}, 3);
  ValueId y = t.op("Concat", {parts[2], parts[0]}, {{"axis", int64_t{-1}}});
  t.weightedSumLoss(y);
  checkGradients(t);
}

TEST_CASE("gradcheck: ScatterElements", "[autodiff][gradcheck]") {
  for (const std::string red : {"none", "add"})
    for (const int64_t axis : {0, 1})
      DYNAMIC_SECTION("reduction " << red << ", axis " << axis) {
        GraphBuilder t = GraphBuilder::inferring();
        ValueId data = t.randomParam("pd", {4, 5});
        ValueId upd = t.randomParam("pu", {2, 3});
        // Distinct targets along either axis (negative ones wrap); add also gets a repeat.
        std::vector<int64_t> idx = axis == 0 ? std::vector<int64_t>{3, 0, -2, 1, 2, -1}
                                             : std::vector<int64_t>{4, 0, 2, -1, 1, -5};
        if (red == "add") idx[1] = idx[0];
        ValueId ix = t.constant(ir::Tensor::fromVector<int64_t>({2, 3}, idx));
        t.weightedSumLoss(t.op("ScatterElements", {data, ix, upd}, {{"axis", axis}, {"reduction", red}}));
        checkGradients(t);
      }
}

TEST_CASE("gradcheck: GatherElements, repeated and negative indices", "[autodiff][gradcheck]") {
  // DeBERTa's disentangled attention gathers relative-position scores this way (axis -1).
  const ir::Shape dataShape{3, 4, 5};
  for (const int64_t axis : {0, 1, -1})
    DYNAMIC_SECTION("axis " << axis) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId data = t.randomParam("pd", dataShape);
      const size_t a = axis < 0 ? 2 : static_cast<size_t>(axis);
      const int64_t len = dataShape[a];
      ir::Shape idxShape = dataShape;
      idxShape[a] = 2;  // two picks along the axis per position
      std::vector<int64_t> idx(static_cast<size_t>(ir::numElements(idxShape)));
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i * 7) % (2 * len) - len;  // [-len, len)
      idx[static_cast<size_t>(ir::stridesOf(idxShape)[a])] = idx[0];  // both picks of position 0: one element twice
      ValueId ix = t.constant(ir::Tensor::fromVector<int64_t>(idxShape, idx));
      t.weightedSumLoss(t.op("GatherElements", {data, ix}, {{"axis", axis}}));
      checkGradients(t);
    }
}

TEST_CASE("gradcheck: Tile, Clip and Resize through their decomposition", "[autodiff][gradcheck]") {
  // fblc differentiates what decompose-ops leaves (Reshape/Expand, Max/Min, Gather/Mul/Add).
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = kinkFreeParam(t, "px", {1, 2, 3, 4}, -1.0f, 1.0f, {-0.5f, 0.4f});
  ValueId tiled = t.op("Tile", {x, t.ints("repeats", std::vector<int64_t>{1, 2, 1, 2})});
  ValueId clipped = t.op("Clip", {tiled, t.scalar(-0.5f), t.scalar(0.4f)});
  ValueId resized = t.node("Resize", {clipped, ir::kNoValue, ir::kNoValue, t.ints("sizes", std::vector<int64_t>{1, 4, 5, 11})},
                           {{"mode", std::string("linear")}})[0];
  t.weightedSumLoss(resized);
  passes::DecomposeOps pass;
  REQUIRE(pass.run(t.g).ok());
  CHECK(pass.rewritten() == 3);
  checkGradients(t);
}

TEST_CASE("gradcheck: TopK's values, as a router weighs its chosen experts", "[autodiff][gradcheck]") {
  // Softmax over 6 experts, the top 2 renormalized: the gradient reaches the logits through the
  // chosen positions only. Distinct logits keep the choice away from its kinks.
  GraphBuilder t = GraphBuilder::inferring();
  ir::Tensor logits(ir::DType::F32, {4, 6});
  for (int64_t i = 0; i < logits.numel(); ++i) logits.data<float>()[i] = static_cast<float>((i * 7 % 24) - 12) * 0.25f;
  ValueId x = t.init("plogits", logits);
  std::vector<ValueId> top = t.node("TopK", {t.op("Softmax", {x}, {{"axis", int64_t{-1}}}), t.ints({2})}, {}, 2);
  ValueId w = t.op("Div", {top[0], t.op("ReduceSum", {top[0], t.ints({-1})}, {{"keepdims", int64_t{1}}})});
  t.weightedSumLoss(w);
  checkGradients(t, {}, 1e-3, 1e-2, 1e-4);
}

TEST_CASE("gradcheck: Instance/BatchNormalization and AveragePool through their decomposition",
          "[autodiff][gradcheck]") {
  // Batch statistics make every output depend on every input of its channel: the gradient
  // through ReduceMean, Sub, Mul, Sqrt and Div must carry the statistics' terms.
  for (const char* op : {"BatchNormalization", "InstanceNormalization", "AveragePool"})
    DYNAMIC_SECTION(op) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId x = t.randomParam("px", {2, 3, 3, 4}, -1.0f, 2.0f);
      ValueId scale = t.randomParam("pscale", {3}), bias = t.randomParam("pbias", {3});
      ValueId y;
      if (std::string(op) == "BatchNormalization")
        y = t.op(op, {x, scale, bias, t.randomParam("mean", {3}), t.randomParam("var", {3}, 0.5f, 1.5f)},
                 {{"training_mode", int64_t{1}}});
      else if (std::string(op) == "InstanceNormalization")
        y = t.op(op, {x, scale, bias});
      else
        y = t.op("Add", {t.op("Mul", {t.op(op, {x}, {{"kernel_shape", std::vector<int64_t>{2, 3}},
                                                       {"pads", std::vector<int64_t>{1, 1, 1, 0}},
                                                       {"strides", std::vector<int64_t>{2, 1}}, {"ceil_mode", int64_t{1}}}),
                                        t.op("Reshape", {scale, t.ints({3, 1, 1})})}),
                         t.op("Reshape", {bias, t.ints({3, 1, 1})})});
      t.weightedSumLoss(y);
      passes::DecomposeOps pass;
      REQUIRE(pass.run(t.g).ok());
      CHECK(pass.rewritten() == 1);
      checkGradients(t, {}, 1e-3, 1e-2, 1e-3);
    }
}

TEST_CASE("autodiff: ScatterND with a repeated tuple under reduction none is refused", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId data = t.randomParam("pd", {4, 2});
  ValueId upd = t.randomParam("pu", {2, 2});
  ValueId idx = t.constant(ir::Tensor::fromVector<int64_t>({2, 1}, {1, -3}));  // -3 is row 1 again
  t.weightedSumLoss(t.op("ScatterND", {data, idx, upd}));
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = {"p*"};
  auto tg = autodiff::buildTrainingGraph(t.g, opts);
  REQUIRE_FALSE(tg.ok());
  CHECK_THAT(tg.error().message, Catch::Contains("repeated index tuple"));
}

TEST_CASE("gradcheck: SoftmaxCrossEntropyLoss", "[autodiff][gradcheck]") {
  for (std::string reduction : {"mean", "sum"}) {
    DYNAMIC_SECTION("[N, C, d] scores, ignore_index, " << reduction) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId scores = t.randomParam("ps", {2, 5, 3}, -2, 2);
      ValueId labels = t.constant(ir::Tensor::fromVector<int64_t>({2, 3}, {4, -100, 0, 2, 2, 1}));
      t.output(t.op("SoftmaxCrossEntropyLoss", {scores, labels},
                       {{"reduction", reduction}, {"ignore_index", int64_t(-100)}}));
      checkGradients(t);
    }
  }
  SECTION("reduction none, [N, C] scores") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId scores = t.randomParam("ps", {4, 6}, -2, 2);
    ValueId labels = t.constant(ir::Tensor::fromVector<int64_t>({4}, {5, 0, 3, 3}));
    t.weightedSumLoss(t.op("SoftmaxCrossEntropyLoss", {scores, labels}, {{"reduction", std::string("none")}}));
    checkGradients(t);
  }
}

TEST_CASE("gradcheck: Relu and ReLU6", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  SECTION("Relu") {
    ValueId x = kinkFreeParam(t, "px", {3, 5}, -1, 1, {0});
    t.weightedSumLoss(t.op("Relu", {x}));
  }
  SECTION("ReLU6 as Min(Relu(x), 6)") {
    ValueId x = kinkFreeParam(t, "px", {4, 6}, -3, 9, {0, 6});
    t.weightedSumLoss(t.op("Min", {t.op("Relu", {x}), t.scalar(6.0f)}));
  }
  checkGradients(t);
}

TEST_CASE("gradcheck: Max and Min, variadic and broadcasting", "[autodiff][gradcheck]") {
  for (std::string op : {"Max", "Min"}) {
    DYNAMIC_SECTION(op) {
      GraphBuilder t = GraphBuilder::inferring();
      auto p = distinctParams(t, {{"pa", {2, 3, 4}}, {"pb", {3, 1}}, {"pc", {4}}});
      ValueId frozen = t.constant(t.randomTensor({2, 1, 4}, -0.5f, 0.5f));
      t.weightedSumLoss(t.op(op, {p[0], frozen, p[1], p[2]}));
      checkGradients(t);
    }
  }
}

TEST_CASE("gradcheck: 3x3/2 max pooling with pad 1 as Pad, 9 strided Slices, Max (ResNet)",
          "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = distinctParams(t, {{"px", {1, 2, 5, 5}}})[0];
  ValueId padded = t.op("Pad", {x, t.ints({0, 0, 1, 1, 0, 0, 1, 1}), t.scalar(0.0f)});
  std::vector<ValueId> windows;
  for (int64_t dy = 0; dy < 3; ++dy)
    for (int64_t dx = 0; dx < 3; ++dx)
      windows.push_back(t.op("Slice", {padded, t.ints({dy, dx}), t.ints({dy + 5, dx + 5}),
                                         t.ints({2, 3}), t.ints({2, 2})}));
  t.weightedSumLoss(t.op("Max", windows));
  checkGradients(t);
}

TEST_CASE("gradcheck: ReduceMax", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  SECTION("2x2/2 max pooling as Reshape + ReduceMax (VGG)") {
    ValueId x = distinctParams(t, {{"px", {1, 2, 4, 4}}})[0];
    ValueId r = t.op("Reshape", {x, t.ints({1, 2, 2, 2, 2, 2})});
    t.weightedSumLoss(t.op("ReduceMax", {r, t.ints({3, 5})}, {{"keepdims", int64_t(0)}}));
  }
  SECTION("every axis, keepdims") {
    ValueId x = distinctParams(t, {{"px", {3, 4}}})[0];
    t.weightedSumLoss(t.op("ReduceMax", {x}, {{"keepdims", int64_t(1)}}));
  }
  SECTION("axes attribute (before opset 18)") {
    ValueId x = distinctParams(t, {{"px", {2, 3, 4}}})[0];
    t.weightedSumLoss(t.op("ReduceMax", {x}, {{"axes", std::vector<int64_t>{-2}}}));
  }
  checkGradients(t);
}

TEST_CASE("gradcheck: constant Pad", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.randomParam("px", {2, 3, 4});
  SECTION("positive pads on chosen axes, non-zero pad value") {
    t.weightedSumLoss(t.op("Pad", {x, t.ints({1, 0, 2, 3}), t.scalar(0.5f), t.ints({0, -1})}));
  }
  SECTION("negative pads crop") {
    t.weightedSumLoss(t.op("Pad", {x, t.ints({0, -1, 2, 1, 1, -2})}));
  }
  checkGradients(t);
}

// Ties and kinks, where no finite difference exists: the gradient follows the documented
// convention, computed here by naive loops.

// loss = sum(y * R); returns R.
ir::Tensor weightedLoss(GraphBuilder& t, ValueId y) {
  ir::Tensor r = t.randomTensor(t.g.values[y].shape, -1, 1);
  t.output(t.op("ReduceSum", {t.op("Mul", {y, t.constant(r)})}, {{"keepdims", int64_t(0)}}));
  return r;
}

// Small integers, so that ties are everywhere.
ValueId tiedParam(GraphBuilder& t, const std::string& name, const ir::Shape& shape) {
  ir::Tensor v = t.randomTensor(shape, 0, 3);
  for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] = std::floor(v.data<float>()[i]);
  return t.init(name, std::move(v));
}

const ir::Tensor& gradOf(const std::vector<std::pair<ValueId, ir::Tensor>>& grads, ValueId p) {
  for (const auto& [id, g] : grads)
    if (id == p) return g;
  FAIL("no gradient for the parameter");
  return grads.front().second;
}

TEST_CASE("autodiff: Max and Min route a tie's gradient to the first input that attains it",
          "[autodiff][gradcheck]") {
  for (bool isMax : {true, false}) {
    DYNAMIC_SECTION((isMax ? "Max" : "Min")) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId a = tiedParam(t, "pa", {2, 3}), b = tiedParam(t, "pb", {3});
      ValueId c = tiedParam(t, "pc", {2, 3});
      ir::Tensor r = weightedLoss(t, t.op(isMax ? "Max" : "Min", {a, b, c}));
      auto grads = analyticGradients(t);
      const ir::Tensor &va = *t.g.values[a].data, &vb = *t.g.values[b].data, &vc = *t.g.values[c].data;
      ir::Tensor da(ir::DType::F32, {2, 3}), db(ir::DType::F32, {3}), dc(ir::DType::F32, {2, 3});
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) {
          double x[3] = {va.at(i * 3 + j), vb.at(j), vc.at(i * 3 + j)};
          int first = 0;
          for (int k = 1; k < 3; ++k)
            if (isMax ? x[k] > x[first] : x[k] < x[first]) first = k;
          ir::Tensor& d = first == 0 ? da : first == 1 ? db : dc;
          int64_t at = first == 1 ? j : i * 3 + j;
          d.set(at, d.at(at) + r.at(i * 3 + j));
        }
      CHECK(testing::maxAbsDiff(gradOf(grads, a), da) < 1e-6);
      CHECK(testing::maxAbsDiff(gradOf(grads, b), db) < 1e-6);
      CHECK(testing::maxAbsDiff(gradOf(grads, c), dc) < 1e-6);
    }
  }
}

TEST_CASE("autodiff: ReduceMax shares the gradient evenly among tied maxima",
          "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = tiedParam(t, "px", {4, 5});
  ir::Tensor r = weightedLoss(t, t.op("ReduceMax", {x, t.ints({1})}, {{"keepdims", int64_t(0)}}));
  auto grads = analyticGradients(t);
  const ir::Tensor& vx = *t.g.values[x].data;
  ir::Tensor expected(ir::DType::F32, {4, 5});
  for (int64_t i = 0; i < 4; ++i) {
    double m = vx.at(i * 5);
    for (int64_t j = 1; j < 5; ++j) m = std::max(m, vx.at(i * 5 + j));
    int ties = 0;
    for (int64_t j = 0; j < 5; ++j) ties += vx.at(i * 5 + j) == m;
    for (int64_t j = 0; j < 5; ++j) expected.set(i * 5 + j, vx.at(i * 5 + j) == m ? r.at(i) / ties : 0.0);
  }
  CHECK(testing::maxAbsDiff(gradOf(grads, x), expected) < 1e-6);
}

TEST_CASE("autodiff: Relu's gradient is zero at zero", "[autodiff][gradcheck]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.init("px", ir::Tensor::fromVector<float>({5}, {-1.0f, 0.0f, 2.0f, -0.0f, 0.5f}));
  ir::Tensor r = weightedLoss(t, t.op("Relu", {x}));
  auto grads = analyticGradients(t);
  ir::Tensor expected(ir::DType::F32, {5});
  for (int64_t i = 0; i < 5; ++i) expected.set(i, t.g.values[x].data->at(i) > 0 ? r.at(i) : 0.0);
  CHECK(testing::maxAbsDiff(gradOf(grads, x), expected) < 1e-6);
}

}  // namespace
}  // namespace fbl
