// The joint graph's structure: which nodes backward has, which forward tensors it reuses, how
// the optimizer's state is laid out, that every new node agrees with its op's shape rule, and
// the errors a user sees.
#include <catch2/catch.hpp>

#include "compiler/autodiff/grad_rules.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/autodiff/training_summary.h"
#include "compiler/ops/op_schema.h"
#include "compiler/passes/load_model.h"
#include "compiler/ref/executor.h"
#include "tests/autodiff/tensor_diff.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using testing::GraphBuilder;
using ir::ValueId;

const std::vector<int64_t> kT{1, 0};

// x [1, 16, 64] through a frozen linear layer W with a LoRA branch (A [8, 64], B [64, 8]),
// into a softmax cross-entropy over 64 classes, as the corpus exports it.
struct LoraGraph {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x, w, a, b, h, logits;
  LoraGraph() {
    x = t.input("x", ir::DType::F32, {1, 16, 64});
    w = t.randomParam("m.q_proj.base_layer.weight", {64, 64});
    a = t.randomParam("m.q_proj.lora_A.default.weight", {8, 64});
    b = t.randomParam("m.q_proj.lora_B.default.weight", {64, 8});
    ValueId base = t.op("MatMul", {x, t.op("Transpose", {w}, {{"perm", kT}})});
    h = t.op("MatMul", {x, t.op("Transpose", {a}, {{"perm", kT}})});
    ValueId z = t.op("MatMul", {h, t.op("Transpose", {b}, {{"perm", kT}})});
    logits = t.op("Add", {base, t.op("Mul", {z, t.scalar(2.0f)})});
    ValueId flat = t.op("Reshape", {logits, t.ints({-1, 64})});
    ValueId labels = t.input("labels", ir::DType::I64, {16});
    t.output(t.op("SoftmaxCrossEntropyLoss", {flat, labels},
                     {{"reduction", std::string("mean")}, {"ignore_index", int64_t(-100)}}));
    t.g.values[t.g.outputs[0]].name = "loss";
  }
};

std::map<std::string, int64_t> opsOf(const ir::Graph& g, ir::Phase phase) {
  std::map<std::string, int64_t> h;
  for (const auto& n : g.nodes)
    if (!n.dead && n.phase == phase) ++h[n.op];
  return h;
}

TEST_CASE("LoRA backward is three matrix products and no frozen-weight gradient", "[autodiff]") {
  LoraGraph lg;
  auto tg = autodiff::buildTrainingGraph(lg.t.g, {});
  INFO((tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  auto bwd = opsOf(tg->graph, ir::Phase::Backward);
  // dh = dz @ B, dB = dz^T @ h, dA = dh^T @ x: no batched weight products, no reductions.
  CHECK(bwd["MatMul"] == 3);
  CHECK(bwd.count("fbl.ReduceSumTo") == 0);
  CHECK(bwd["fbl.SoftmaxCrossEntropyLossGrad"] == 1);
  // Weight-shaped right operands only: the batch is folded into the rows.
  for (const auto& n : tg->graph.nodes)
    if (n.phase == ir::Phase::Backward && n.op == "MatMul")
      CHECK(tg->graph.values[n.inputs[1]].shape.size() == 2);
  // The weight gradients read the weights themselves, not their forward transposes.
  CHECK(tg->graph.values[lg.b].reusedByBackward);
  CHECK(tg->graph.values[lg.h].reusedByBackward);
  CHECK(tg->graph.values[lg.x].reusedByBackward);
  CHECK_FALSE(tg->graph.values[lg.w].reusedByBackward);  // W's gradient is never needed
  CHECK_FALSE(tg->graph.values[tg->loss].reusedByBackward);
}

TEST_CASE("the joint graph's layout: phases, state and outputs", "[autodiff]") {
  LoraGraph lg;
  autodiff::TrainingOptions opts;
  opts.optimizer.lr = 1e-2f;
  auto tg = autodiff::buildTrainingGraph(lg.t.g, opts);
  REQUIRE(tg.ok());
  const ir::Graph& g = tg->graph;
  REQUIRE(tg->trainables.size() == 2);
  CHECK(g.values[tg->trainables[0].param].name == "m.q_proj.lora_A.default.weight");
  REQUIRE(tg->state.size() == 4);
  REQUIRE(tg->step != ir::kNoValue);
  CHECK(g.values[tg->step].kind == ir::ValueKind::Input);
  CHECK(g.values[tg->step].dtype == ir::DType::I64);
  CHECK(g.values[tg->step].shape.empty());
  for (const auto& s : tg->state) {
    const ir::Value& v = g.values[s.current];
    CHECK(v.kind == ir::ValueKind::Initializer);
    REQUIRE(v.data);
    CHECK(testing::maxAbs(*v.data) == 0.0);
    CHECK(v.shape == g.values[s.param].shape);
  }
  std::vector<ValueId> want{tg->loss};
  for (const auto& t : tg->trainables) want.push_back(t.updated);
  for (const auto& s : tg->state) want.push_back(s.updated);
  CHECK(g.outputs == want);
  CHECK(opsOf(g, ir::Phase::Optimizer) == std::map<std::string, int64_t>{{"fbl.AdamW", 2}});
  // Topological order holds: every input is produced earlier.
  std::vector<bool> ready(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) ready[v] = g.values[v].producer == ir::kNoNode;
  for (const auto& n : g.nodes) {
    for (ValueId in : n.inputs) CHECK((in == ir::kNoValue || ready[in]));
    for (ValueId o : n.outputs)
      if (o != ir::kNoValue) ready[o] = true;
  }
}

TEST_CASE("every backward and optimizer node agrees with its op's shape rule", "[autodiff]") {
  LoraGraph lg;
  for (auto kind : {autodiff::OptimizerKind::AdamW, autodiff::OptimizerKind::SGD}) {
    autodiff::TrainingOptions opts;
    opts.optimizer.kind = kind;
    opts.optimizer.momentum = 0.9f;
    auto tg = autodiff::buildTrainingGraph(lg.t.g, opts);
    REQUIRE(tg.ok());
    ir::Graph g = tg->graph;
    for (const auto& n : tg->graph.nodes) {
      if (n.phase == ir::Phase::Forward) continue;
      REQUIRE(ops::validateNode(g, n).ok());
      Status st = ops::inferNode(g, n);
      INFO(n.name << ": " << (st.ok() ? "" : st.error().message));
      REQUIRE(st.ok());
      for (ValueId o : n.outputs) {
        if (o == ir::kNoValue) continue;
        CHECK(g.values[o].shape == tg->graph.values[o].shape);
        CHECK(g.values[o].dtype == tg->graph.values[o].dtype);
      }
    }
  }
}

TEST_CASE("only paths that reach a trainable are differentiated", "[autodiff]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId frozen = t.randomParam("frozen", {4, 4});
  ValueId p = t.randomParam("p", {4, 4});
  // A frozen-only chain joins the trainable path late: nothing upstream of the join is visited.
  ValueId f1 = t.op("Sigmoid", {t.op("Tanh", {frozen})});
  ValueId y = t.op("Mul", {t.op("Sqrt", {t.op("Mul", {p, p})}), f1});
  t.weightedSumLoss(y);
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = {"p"};
  auto tg = autodiff::buildTrainingGraph(t.g, opts);
  REQUIRE(tg.ok());
  auto bwd = opsOf(tg->graph, ir::Phase::Backward);
  CHECK(bwd.count("fbl.SigmoidGrad") == 0);
  CHECK(bwd.count("fbl.TanhGrad") == 0);
  CHECK(tg->graph.values[f1].reusedByBackward);
}

TEST_CASE("trainable selection errors explain themselves", "[autodiff]") {
  SECTION("folded weights") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId a = t.randomParam("val_12", {2, 2});
    ValueId b = t.randomParam("val_13", {2, 2});
    t.weightedSumLoss(t.op("MatMul", {a, b}));
    auto tg = autodiff::buildTrainingGraph(t.g, {});
    REQUIRE_FALSE(tg.ok());
    CHECK_THAT(tg.error().message, Catch::Contains("'*lora_*'") && Catch::Contains("val_12") &&
                                       Catch::Contains("optimize=False"));
  }
  SECTION("no LoRA") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId a = t.randomParam("m.fc.weight", {2, 2});
    t.weightedSumLoss(t.op("Neg", {a}));
    auto tg = autodiff::buildTrainingGraph(t.g, {});
    REQUIRE_FALSE(tg.ok());
    CHECK_THAT(tg.error().message, Catch::Contains("m.fc.weight") && Catch::Contains("--trainable"));
  }
  SECTION("a trainable that does not reach the loss") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId a = t.randomParam("pa", {2, 2});
    t.randomParam("pb", {2, 2});
    t.weightedSumLoss(t.op("Neg", {a}));
    autodiff::TrainingOptions opts;
    opts.trainableGlobs = {"p*"};
    auto tg = autodiff::buildTrainingGraph(t.g, opts);
    REQUIRE_FALSE(tg.ok());
    CHECK_THAT(tg.error().message, Catch::Contains("'pb' does not affect the loss"));
  }
  SECTION("an op without a gradient rule on the path") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId a = t.randomParam("pa", {2, 3});
    t.weightedSumLoss(t.op("Cos", {a}));
    autodiff::TrainingOptions opts;
    opts.trainableGlobs = {"p*"};
    auto tg = autodiff::buildTrainingGraph(t.g, opts);
    REQUIRE_FALSE(tg.ok());
    CHECK_THAT(tg.error().message, Catch::Contains("(Cos)") && Catch::Contains("no gradient rule"));
  }
  SECTION("bad optimizer settings") {
    LoraGraph lg;
    autodiff::TrainingOptions opts;
    opts.optimizer.lr = -1;
    auto tg = autodiff::buildTrainingGraph(lg.t.g, opts);
    REQUIRE_FALSE(tg.ok());
    CHECK_THAT(tg.error().message, Catch::Contains("--lr"));
  }
}

TEST_CASE("the training summary counts phases and lists reuse edges", "[autodiff]") {
  LoraGraph lg;
  auto tg = autodiff::buildTrainingGraph(lg.t.g, {});
  REQUIRE(tg.ok());
  auto s = autodiff::summarizeTrainingGraph(tg.value());
  CHECK(s.nodes[0] == static_cast<int64_t>(lg.t.g.nodes.size()));
  CHECK(s.ops[2]["fbl.AdamW"] == 2);
  CHECK(s.trainableElements == 8 * 64 + 64 * 8);
  bool readsX = false;
  for (const auto& e : s.reuseEdges) readsX = readsX || e.value == "x";
  CHECK(readsX);
  std::string text = autodiff::formatTrainingSummary(s, 3);
  CHECK_THAT(text, Catch::Contains("backward") && Catch::Contains("reuse edges") &&
                       Catch::Contains("more"));
}

TEST_CASE("SGD with momentum matches its formula over two steps", "[autodiff]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId p = t.randomParam("p", {3});
  t.weightedSumLoss(t.op("Mul", {p, p}));  // loss = sum(r * p^2): gradient 2 r p
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = {"p"};
  opts.optimizer = {autodiff::OptimizerKind::SGD, 0.1f, 0.5f};
  opts.optimizer.weightDecay = 0.01f;
  auto tg = autodiff::buildTrainingGraph(t.g, opts);
  REQUIRE(tg.ok());
  // r is the Mul's second input (the constant the loss weights by).
  const ir::Tensor& r = *t.g.values[t.g.nodes[1].inputs[1]].data;
  std::vector<double> pv, buf(3, 0.0);
  for (int i = 0; i < 3; ++i) pv.push_back(t.g.values[p].data->at(i));
  ref::Executor ex(tg->graph);
  for (int step = 0; step < 2; ++step) {
    auto out = ex.run({}, {tg->trainables[0].updated, tg->state[0].updated});
    REQUIRE(out.ok());
    for (int i = 0; i < 3; ++i) {
      double g = 2 * r.at(i) * pv[i] + 0.01 * pv[i];
      buf[i] = 0.5 * buf[i] + g;
      pv[i] -= 0.1 * buf[i];
      CHECK(out.value()[0].at(i) == Approx(pv[i]).epsilon(1e-5));
    }
    REQUIRE(ex.setValue(tg->trainables[0].param, out.value()[0]).ok());
    REQUIRE(ex.setValue(tg->state[0].current, out.value()[1]).ok());
  }
}

TEST_CASE("AdamW matches its formula over three steps", "[autodiff]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId p = t.randomParam("p", {4});
  t.weightedSumLoss(t.op("Mul", {p, p}));
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = {"p"};
  opts.optimizer.lr = 0.05f;
  opts.optimizer.weightDecay = 0.1f;
  auto tg = autodiff::buildTrainingGraph(t.g, opts);
  REQUIRE(tg.ok());
  const ir::Tensor& r = *t.g.values[t.g.nodes[1].inputs[1]].data;
  std::vector<double> pv, m(4, 0.0), v(4, 0.0);
  for (int i = 0; i < 4; ++i) pv.push_back(t.g.values[p].data->at(i));
  const double lr = 0.05, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  ref::Executor ex(tg->graph);
  for (int64_t step = 1; step <= 3; ++step) {
    std::map<ValueId, ir::Tensor> feeds{{tg->step, ir::Tensor::scalar<int64_t>(step)}};
    auto out = ex.run(feeds, {tg->trainables[0].updated, tg->state[0].updated, tg->state[1].updated});
    REQUIRE(out.ok());
    for (int i = 0; i < 4; ++i) {
      double g = 2 * r.at(i) * pv[i];
      pv[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      double mh = m[i] / (1 - std::pow(b1, step)), vh = v[i] / (1 - std::pow(b2, step));
      pv[i] -= lr * mh / (std::sqrt(vh) + eps);
      CHECK(out.value()[0].at(i) == Approx(pv[i]).epsilon(1e-5));
    }
    REQUIRE(ex.setValue(tg->trainables[0].param, out.value()[0]).ok());
    REQUIRE(ex.setValue(tg->state[0].current, out.value()[1]).ok());
    REQUIRE(ex.setValue(tg->state[1].current, out.value()[2]).ok());
  }
}

TEST_CASE("the gradient rule table covers the corpus's differentiable ops", "[autodiff]") {
  for (std::string_view op :
       {"MatMul", "Gemm", "Conv", "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Sqrt", "Reciprocal",
        "ReduceMean", "ReduceSum", "Softmax", "LayerNormalization", "Gelu", "Erf", "Sigmoid",
        "Tanh", "Gather", "Expand", "Reshape", "Transpose", "Slice", "Concat", "Unsqueeze",
        "Squeeze", "Where", "SoftmaxCrossEntropyLoss"})
    CHECK(autodiff::findGradRule(op) != nullptr);
}

}  // namespace
}  // namespace fbl

namespace fbl {
namespace {

TEST_CASE("corpus joint graphs: every new node validates and matches its shape rule",
          "[autodiff][corpus]") {
  for (std::string model : {"llama-tiny", "bert-tiny", "vit-tiny", "bert-tiny-torchscript",
                            "llama-full"}) {
    DYNAMIC_SECTION(model) {
      auto fwd = passes::loadModel(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx");
      REQUIRE(fwd.ok());
      auto tg = autodiff::buildTrainingGraph(fwd.value(), {});
      INFO((tg.ok() ? "" : tg.error().message));
      REQUIRE(tg.ok());
      ir::Graph g = tg->graph;
      size_t checked = 0;
      for (const auto& n : tg->graph.nodes) {
        if (n.phase == ir::Phase::Forward) continue;
        Status st = ops::validateNode(g, n);
        if (st.ok()) st = ops::inferNode(g, n);
        INFO(n.name << ": " << (st.ok() ? "" : st.error().message));
        REQUIRE(st.ok());
        for (ValueId o : n.outputs)
          if (o != ir::kNoValue) REQUIRE(g.values[o].shape == tg->graph.values[o].shape);
        ++checked;
      }
      CHECK(checked > tg->trainables.size());
    }
  }
}

}  // namespace
}  // namespace fbl
