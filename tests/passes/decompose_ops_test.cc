// decompose-ops: Tile, Clip, Resize, ReduceL2, 1-D Conv, Instance/BatchNormalization and the
// pools left to run time become ops with kernels (Reshape, Expand, Max, Min, Gather, Mul, Add,
// ReduceSum, Sqrt, Unsqueeze, 2-D Conv, Squeeze, LayerNormalization, ReduceMean, Pad, Slice),
// which compute what the originals' reference kernels do; Tile's reference kernel is checked
// against a naive loop, Resize's and its decomposition against ONNX's reference implementation
// (tests/data/resize), the others' against naive loops, and their gradients against the closed
// forms (MaxPool's: each window's dy to its first maximum) or, in grad_check_test, central
// differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <tuple>

#include "compiler/autodiff/training_graph.h"
#include "compiler/onnx/importer.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/ops/op_schema.h"
#include "compiler/passes/decompose_ops.h"
#include "compiler/passes/fold_and_infer.h"
#include "compiler/ref/executor.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using ir::DType;
using ir::Tensor;
using ir::ValueId;
using testing::GraphBuilder;

std::vector<std::string> liveOps(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes)
    if (!n.dead) ops.push_back(n.op);
  return ops;
}

Tensor runOne(const ir::Graph& g, ValueId out, const std::map<ValueId, Tensor>& feeds) {
  ref::Executor ex(g);
  auto r = ex.run(feeds, {out});
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  return (*r)[0];
}

// d loss / d `param` through the joint graph's gradient rules (the graph's one output is the loss);
// `feeds` by input name.
Tensor gradientOf(const ir::Graph& g, const std::string& param, const std::map<std::string, Tensor>& feeds = {}) {
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = {param};
  opts.optimizer.kind = autodiff::OptimizerKind::SGD;
  auto tg = autodiff::buildTrainingGraph(g, opts);
  INFO((tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  REQUIRE(tg->trainables.size() == 1);
  std::map<ValueId, Tensor> byId;
  for (const auto& [name, t] : feeds) byId[tg->graph.findValue(name)] = t;
  return runOne(tg->graph, tg->trainables[0].grad, byId);
}

// Runs the pass and checks that the graph computes the same `out` as before from `feeds`.
void decomposesExactly(GraphBuilder& t, ValueId out, const std::map<ValueId, Tensor>& feeds,
                       const std::vector<std::string>& want) {
  const Tensor before = runOne(t.g, out, feeds);
  passes::DecomposeOps pass;
  auto changed = pass.run(t.g);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(liveOps(t.g) == want);
  const Tensor after = runOne(t.g, out, feeds);
  REQUIRE(after.shape() == before.shape());
  REQUIRE(after.dtype() == before.dtype());
  for (int64_t i = 0; i < before.numel(); ++i) REQUIRE(after.at(i) == before.at(i));
}

TEST_CASE("Tile's reference kernel repeats the input whole along each axis", "[passes][decompose]") {
  GraphBuilder t = GraphBuilder::inferring();
  const ir::Shape xs{2, 3, 2};
  const std::vector<int64_t> reps{3, 1, 2};
  ValueId x = t.input("x", DType::F32, xs);
  ValueId y = t.op("Tile", {x, t.ints("repeats", reps)});
  REQUIRE(t.g.values[y].shape == ir::Shape{6, 3, 4});
  Tensor in = t.randomTensor(xs, -1, 1);
  Tensor got = runOne(t.g, y, {{x, in}});
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k)
        REQUIRE(got.at((i * 3 + j) * 4 + k) == in.at((i % 2 * 3 + j) * 2 + k % 2));
}

TEST_CASE("Tile becomes Reshape, Expand, Reshape, repeats of 1 only an Identity", "[passes][decompose]") {
  SECTION("two repeated axes of three, one of them the first") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId x = t.input("x", DType::F32, {2, 3, 4});
    ValueId y = t.op("Neg", {t.op("Tile", {x, t.ints("repeats", std::vector<int64_t>{2, 1, 3})})});
    decomposesExactly(t, y, {{x, t.randomTensor({2, 3, 4}, -1, 1)}}, {"Reshape", "Expand", "Reshape", "Neg"});
    // The merged shape: [1,2,3,1,4] -> [2,2,3,3,4] -> [4,3,12].
    ir::ValueId expanded = t.g.nodes[1].outputs[0];
    CHECK(t.g.values[expanded].shape == ir::Shape{2, 2, 3, 3, 4});
    CHECK(t.g.values[t.g.nodes[2].outputs[0]].shape == ir::Shape{4, 3, 12});
  }
  SECTION("integers, the last axis repeated") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId x = t.input("x", DType::I64, {3, 2});
    ValueId y = t.op("Tile", {x, t.ints("repeats", std::vector<int64_t>{1, 2})});
    decomposesExactly(t, y, {{x, Tensor::fromVector<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6})}},
                      {"Reshape", "Expand", "Reshape"});
  }
  SECTION("all repeats 1") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId x = t.input("x", DType::F32, {2, 2});
    ValueId y = t.op("Tile", {x, t.ints("repeats", std::vector<int64_t>{1, 1})});
    decomposesExactly(t, y, {{x, t.randomTensor({2, 2}, -1, 1)}}, {"Identity"});
  }
}

TEST_CASE("Clip becomes Max and Min, each only where its bound is given", "[passes][decompose]") {
  struct Case {
    bool lo, hi;
    std::vector<std::string> want;
  };
  for (const Case& c : {Case{true, true, {"Max", "Min"}}, Case{true, false, {"Max"}}, Case{false, true, {"Min"}},
                        Case{false, false, {"Identity"}}})
    DYNAMIC_SECTION("min " << c.lo << ", max " << c.hi) {
      GraphBuilder t = GraphBuilder::inferring();
      ValueId x = t.input("x", DType::F32, {4, 5});
      std::vector<ValueId> ins{x, c.lo ? t.scalar(-0.3f) : ir::kNoValue};
      if (c.hi) ins.push_back(t.scalar(0.4f));
      ValueId y = t.op("Clip", ins);
      decomposesExactly(t, y, {{x, t.randomTensor({4, 5}, -1, 1)}}, c.want);
    }
  SECTION("integers, min above max gives max everywhere") {
    GraphBuilder t = GraphBuilder::inferring();
    ValueId x = t.input("x", DType::I64, {5});
    ValueId y = t.op("Clip", {x, t.constant(Tensor::scalar<int64_t>(3)), t.constant(Tensor::scalar<int64_t>(1))});
    decomposesExactly(t, y, {{x, Tensor::fromVector<int64_t>({5}, {-4, 0, 2, 5, 9})}}, {"Max", "Min"});
    CHECK(runOne(t.g, y, {{x, Tensor::fromVector<int64_t>({5}, {-4, 0, 2, 5, 9})}}).at(0) == 1);
  }
}

TEST_CASE("ReduceL2 becomes Sqrt(ReduceSum(x * x)) with the same axes, and trains", "[passes][decompose]") {
  for (bool axesAsInput : {false, true})
    for (int64_t keep : {0, 1})
      DYNAMIC_SECTION("axes as " << (axesAsInput ? "an input" : "an attribute") << ", keepdims " << keep) {
        GraphBuilder t = GraphBuilder::inferring();
        const ValueId p = t.randomParam("p", {3, 4, 5});
        std::map<std::string, ir::AttrValue> attrs{{"keepdims", keep}};
        std::vector<ValueId> ins{p};
        if (axesAsInput) ins.push_back(t.ints({0, -1}));
        else attrs["axes"] = std::vector<int64_t>{0, -1};
        const ValueId y = t.op("ReduceL2", ins, attrs);
        t.weightedSumLoss(y);
        Tensor weights;  // the loss's Mul(y, w)
        for (const ir::Node& n : t.g.nodes)
          if (n.op == "Mul" && n.inputs[0] == y) weights = *t.g.values[n.inputs[1]].data;
        const Tensor x = *t.g.values[p].data;
        const Tensor before = runOne(t.g, y, {});
        passes::DecomposeOps pass;
        auto changed = pass.run(t.g);
        REQUIRE(changed.ok());
        REQUIRE(*changed);
        CHECK(liveOps(t.g) == std::vector<std::string>{"Mul", "ReduceSum", "Sqrt", "Mul", "ReduceSum"});
        const Tensor after = runOne(t.g, y, {});
        REQUIRE(after.shape() == before.shape());
        for (int64_t j = 0; j < 4; ++j) {
          double sq = 0;
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t k = 0; k < 5; ++k) sq += x.at((i * 4 + j) * 5 + k) * x.at((i * 4 + j) * 5 + k);
          CHECK(before.at(j) == Approx(std::sqrt(sq)).epsilon(1e-6));
          CHECK(after.at(j) == Approx(std::sqrt(sq)).epsilon(1e-6));
        }
        // d loss / d x = w_j x / ||x_j||, through the decomposition's gradient rules.
        const Tensor grad = gradientOf(t.g, "p");
        for (int64_t e = 0; e < x.numel(); ++e) {
          const int64_t j = e / 5 % 4;
          CHECK(grad.at(e) == Approx(weights.at(j) * x.at(e) / after.at(j)).epsilon(1e-5).margin(1e-7));
        }
      }
}

TEST_CASE("a 1-D Conv is the 2-D Conv of height 1, by its reference kernel and decomposed, and trains",
          "[passes][decompose]") {
  // x [2, 4, 11], w [6, 2, 3] (2 groups), stride 2, dilation 2, pads 3 and 1, a bias.
  const int64_t N = 2, C = 4, L = 11, M = 6, G = 2, K = 3, S = 2, D = 2, P0 = 3, P1 = 1;
  GraphBuilder t = GraphBuilder::inferring();
  const ValueId x = t.input("x", DType::F32, {N, C, L});
  const ValueId w = t.randomParam("w", {M, C / G, K});
  const ValueId b = t.randomParam("b", {M});
  const ValueId y = t.op("Conv", {x, w, b},
                         {{"group", G}, {"strides", std::vector<int64_t>{S}}, {"dilations", std::vector<int64_t>{D}},
                          {"pads", std::vector<int64_t>{P0, P1}}, {"kernel_shape", std::vector<int64_t>{K}}});
  const int64_t T = (L + P0 + P1 - D * (K - 1) - 1) / S + 1;
  REQUIRE(t.g.values[y].shape == ir::Shape{N, M, T});
  t.weightedSumLoss(y);
  const Tensor xs = t.randomTensor({N, C, L}, -1, 1), ws = *t.g.values[w].data, bs = *t.g.values[b].data;
  Tensor dy;  // the loss's weights: d loss / d y
  for (const ir::Node& n : t.g.nodes)
    if (n.op == "Mul" && n.inputs[0] == y) dy = *t.g.values[n.inputs[1]].data;
  auto xAt = [&](int64_t n, int64_t c, int64_t i) { return i < 0 || i >= L ? 0.0 : double(xs.at((n * C + c) * L + i)); };
  // Naive: y[n, m, o] = b[m] + sum over the group's channels c and taps k of w[m, c, k] x[n, c, o S + k D - P0].
  const Tensor got = runOne(t.g, y, {{x, xs}});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o = 0; o < T; ++o) {
        double want = bs.at(m);
        for (int64_t c = 0; c < C / G; ++c)
          for (int64_t k = 0; k < K; ++k)
            want += ws.at((m * (C / G) + c) * K + k) * xAt(n, m / (M / G) * (C / G) + c, o * S + k * D - P0);
        REQUIRE(got.at((n * M + m) * T + o) == Approx(want).epsilon(1e-5).margin(1e-6));
      }
  decomposesExactly(t, y, {{x, xs}}, {"Unsqueeze", "Unsqueeze", "Conv", "Squeeze", "Mul", "ReduceSum"});
  // d loss / d w through the 2-D Conv's gradient rule, against the naive sum.
  const Tensor dw = gradientOf(t.g, "w", {{"x", xs}});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C / G; ++c)
      for (int64_t k = 0; k < K; ++k) {
        double want = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t o = 0; o < T; ++o)
            want += dy.at((n * M + m) * T + o) * xAt(n, m / (M / G) * (C / G) + c, o * S + k * D - P0);
        CHECK(dw.at((m * (C / G) + c) * K + k) == Approx(want).epsilon(1e-5).margin(1e-6));
      }
}

TEST_CASE("Resize, by its reference kernel and decomposed, gives ONNX's reference outputs", "[passes][decompose]") {
  // tests/data/resize/make_cases.py: linear and nearest, every supported coordinate mode and
  // nearest_mode, scales and sizes, up and down, axes.
  namespace fs = std::filesystem;
  int cases = 0;
  for (const auto& e : fs::directory_iterator(std::string(FBL_TEST_DATA_DIR) + "/resize")) {
    if (!e.is_directory()) continue;
    const std::string dir = e.path().string();
    INFO(dir);
    auto g = onnx::importModel(dir + "/model.onnx", {});
    INFO((g.ok() ? "" : g.error().message));
    REQUIRE(g.ok());
    REQUIRE(passes::FoldAndInfer().run(*g).ok());
    auto x = onnx::readTensorProtoFile(dir + "/input_0.pb");
    auto want = onnx::readTensorProtoFile(dir + "/output_0.pb");
    REQUIRE(x.ok());
    REQUIRE(want.ok());
    const ValueId y = g->outputs[0];
    auto agrees = [&](const Tensor& got) {
      REQUIRE(got.shape() == want->tensor.shape());
      for (int64_t i = 0; i < got.numel(); ++i) REQUIRE(std::abs(got.at(i) - want->tensor.at(i)) <= 1e-5);
    };
    agrees(runOne(*g, y, {{g->inputs[0], x->tensor}}));
    passes::DecomposeOps pass;
    REQUIRE(pass.run(*g).ok());
    CHECK(pass.rewritten() == 1);
    for (const auto& n : g->nodes) CHECK(n.op != "Resize");
    agrees(runOne(*g, y, {{g->inputs[0], x->tensor}}));
    ++cases;
  }
  CHECK(cases == 10);
}

TEST_CASE("a Resize fbl cannot run is refused in one line naming the node", "[passes][decompose]") {
  for (const auto& [attr, value, says] :
       {std::tuple<std::string, std::string, std::string>{"mode", "cubic", "mode 'cubic' is not supported"},
        {"coordinate_transformation_mode", "tf_crop_and_resize", "'tf_crop_and_resize' is not supported"},
        {"keep_aspect_ratio_policy", "not_larger", "'not_larger' is not supported"},
        {"mode", "nearest", "longer than 16777216"}}) {  // scales of 2^30: refused before any table is built
    GraphBuilder t;
    ValueId x = t.input("x", DType::F32, {1, 1, 2, 2});
    const float up = value == "nearest" ? 1073741824.0f : 2.0f;
    t.node("Resize", {x, ir::kNoValue, t.constant(Tensor::fromVector<float>({4}, {1, 1, up, 2}))}, {{attr, value}});
    Status st = ops::inferNode(t.g, t.g.nodes.back());
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.error().message, Catch::Contains("(Resize)") && Catch::Contains(says));
    CHECK(st.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("decompose-ops leaves a graph without Tile or Clip alone", "[passes][decompose]") {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId x = t.input("x", DType::F32, {2, 3});
  t.op("Neg", {x});
  passes::DecomposeOps pass;
  auto changed = pass.run(t.g);
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
  CHECK(pass.rewritten() == 0);
}


// The reference kernel and the decomposition of `out` agree within fp32 rounding (the
// decompositions reorder sums and divide where the kernels multiply by an inverse).
void decomposesClosely(GraphBuilder& t, ValueId out, const std::map<ValueId, Tensor>& feeds,
                       const std::vector<std::string>& want) {
  const Tensor before = runOne(t.g, out, feeds);
  passes::DecomposeOps pass;
  auto changed = pass.run(t.g);
  INFO((changed.ok() ? "" : changed.error().message));
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(liveOps(t.g) == want);
  const Tensor after = runOne(t.g, out, feeds);
  REQUIRE(after.shape() == before.shape());
  for (int64_t i = 0; i < before.numel(); ++i) REQUIRE(after.at(i) == Approx(before.at(i)).epsilon(1e-5).margin(1e-6));
}

// Naive per-channel normalization of x [N, C, D] (D the flattened spatial axes): statistics per
// (n, c) for an instance norm, per c over n and D for a batch norm; biased variance.
std::vector<double> channelNormalized(const Tensor& x, const Tensor& scale, const Tensor& bias, bool perSample,
                                      double eps) {
  const int64_t N = x.shape()[0], C = x.shape()[1], D = x.numel() / (N * C);
  std::vector<double> y(static_cast<size_t>(x.numel()));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t n0 = 0; n0 < N; n0 += perSample ? 1 : N) {
      const int64_t n1 = perSample ? n0 + 1 : N;
      double sum = 0, sq = 0, count = double((n1 - n0) * D);
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = 0; k < D; ++k) sum += x.at((n * C + c) * D + k);
      const double mu = sum / count;
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = 0; k < D; ++k) sq += (x.at((n * C + c) * D + k) - mu) * (x.at((n * C + c) * D + k) - mu);
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t k = 0; k < D; ++k) {
          const int64_t e = (n * C + c) * D + k;
          y[e] = (x.at(e) - mu) / std::sqrt(sq / count + eps) * scale.at(c) + bias.at(c);
        }
    }
  return y;
}

TEST_CASE("InstanceNormalization is LayerNormalization over the spatial axes, then the channel affine",
          "[passes][decompose]") {
  GraphBuilder t = GraphBuilder::inferring();
  const ValueId x = t.input("x", DType::F32, {2, 3, 4, 5});
  const ValueId s = t.randomParam("scale", {3}), b = t.randomParam("bias", {3});
  const ValueId y = t.op("InstanceNormalization", {x, s, b}, {{"epsilon", 1e-3f}});
  const Tensor xs = t.randomTensor({2, 3, 4, 5}, -2, 3);
  const Tensor got = runOne(t.g, y, {{x, xs}});
  const std::vector<double> want = channelNormalized(xs, *t.g.values[s].data, *t.g.values[b].data, true, 1e-3);
  for (int64_t e = 0; e < xs.numel(); ++e) REQUIRE(got.at(e) == Approx(want[e]).epsilon(1e-5).margin(1e-6));
  decomposesClosely(t, y, {{x, xs}}, {"LayerNormalization", "Reshape", "Mul", "Reshape", "Add"});
}

TEST_CASE("a GroupNorm as exported: unit InstanceNormalization of the groups has no affine left",
          "[passes][decompose]") {
  // torch's group_norm: Reshape to [N, G, -1], InstanceNormalization with constant ones and
  // zeros, Reshape back, then the per-channel weight and bias.
  GraphBuilder t = GraphBuilder::inferring();
  const ValueId x = t.input("x", DType::F32, {2, 2, 6});
  const ValueId ones = t.constant("ones", Tensor::fromVector<float>({2}, {1, 1}));
  const ValueId zeros = t.constant("zeros", Tensor::fromVector<float>({2}, {0, 0}));
  const ValueId y = t.op("InstanceNormalization", {x, ones, zeros});
  const Tensor xs = t.randomTensor({2, 2, 6}, -1, 1);
  decomposesClosely(t, y, {{x, xs}}, {"LayerNormalization", "Identity"});
}

TEST_CASE("BatchNormalization: batch statistics in training mode, the inputs' in inference mode",
          "[passes][decompose]") {
  for (int64_t training : {1, 0})
    DYNAMIC_SECTION("training_mode " << training) {
      GraphBuilder t = GraphBuilder::inferring();
      const ValueId x = t.input("x", DType::F32, {3, 2, 2, 3});
      const ValueId s = t.randomParam("scale", {2}), b = t.randomParam("bias", {2});
      const ValueId mean = t.randomParam("running_mean", {2});
      const ValueId var = t.randomParam("running_var", {2}, 0.5f, 2.0f);
      const int outputs = training ? 3 : 1;
      const std::vector<ValueId> ys = t.node("BatchNormalization", {x, s, b, mean, var},
                                             {{"epsilon", 1e-5f}, {"momentum", 0.9f}, {"training_mode", training}}, outputs);
      const Tensor xs = t.randomTensor({3, 2, 2, 3}, -2, 3);
      const Tensor got = runOne(t.g, ys[0], {{x, xs}});
      const Tensor &sv = *t.g.values[s].data, &bv = *t.g.values[b].data, &mv = *t.g.values[mean].data,
                   &vv = *t.g.values[var].data;
      if (training) {
        const std::vector<double> want = channelNormalized(xs, sv, bv, false, 1e-5);
        for (int64_t e = 0; e < xs.numel(); ++e) REQUIRE(got.at(e) == Approx(want[e]).epsilon(1e-5).margin(1e-6));
        const Tensor runMean = runOne(t.g, ys[1], {{x, xs}}), runVar = runOne(t.g, ys[2], {{x, xs}});
        std::vector<double> mu(2), biased(2);
        for (int64_t c = 0; c < 2; ++c) {
          double sum = 0, sq = 0;
          for (int64_t n = 0; n < 3; ++n)
            for (int64_t k = 0; k < 6; ++k) sum += xs.at((n * 2 + c) * 6 + k);
          mu[c] = sum / 18;
          for (int64_t n = 0; n < 3; ++n)
            for (int64_t k = 0; k < 6; ++k) sq += (xs.at((n * 2 + c) * 6 + k) - mu[c]) * (xs.at((n * 2 + c) * 6 + k) - mu[c]);
          biased[c] = sq / 18;
          // ONNX's running-statistics outputs: input * momentum + batch * (1 - momentum), biased variance.
          CHECK(runMean.at(c) == Approx(mv.at(c) * 0.9 + mu[c] * 0.1).epsilon(1e-5));
          CHECK(runVar.at(c) == Approx(vv.at(c) * 0.9 + biased[c] * 0.1).epsilon(1e-5));
        }
        decomposesClosely(t, ys[0], {{x, xs}},
                          {"Transpose", "LayerNormalization", "Transpose", "Reshape", "Mul", "Reshape", "Add",
                           "ReduceMean", "Sub", "Mul", "ReduceMean", "Reshape", "Reshape", "Mul", "Mul", "Add", "Mul",
                           "Mul", "Add", "Mul", "Mul", "Add", "Mul", "Mul", "Mul", "Add"});
        for (int i : {1, 2}) {
          const Tensor again = runOne(t.g, ys[i], {{x, xs}});
          CHECK(again.at(0) == Approx((i == 1 ? runMean : runVar).at(0)).epsilon(1e-6));
        }
        // The initializers are PyTorch's buffers, updated as PyTorch does: the unbiased variance.
        REQUIRE(t.g.stateUpdates.size() == 2);
        CHECK(t.g.stateUpdates[0].state == mean);
        CHECK(t.g.stateUpdates[1].state == var);
        const Tensor newMean = runOne(t.g, t.g.stateUpdates[0].updated, {{x, xs}});
        const Tensor newVar = runOne(t.g, t.g.stateUpdates[1].updated, {{x, xs}});
        for (int64_t c = 0; c < 2; ++c) {
          CHECK(newMean.at(c) == Approx(mv.at(c) * 0.9 + mu[c] * 0.1).epsilon(1e-5));
          CHECK(newVar.at(c) == Approx(vv.at(c) * 0.9 + biased[c] * 18 / 17 * 0.1).epsilon(1e-5));
        }
      } else {
        for (int64_t e = 0; e < xs.numel(); ++e) {
          const int64_t c = e / 6 % 2;
          const double want = (xs.at(e) - mv.at(c)) / std::sqrt(vv.at(c) + 1e-5) * sv.at(c) + bv.at(c);
          REQUIRE(got.at(e) == Approx(want).epsilon(1e-5).margin(1e-6));
        }
        decomposesClosely(t, ys[0], {{x, xs}}, {"Add", "Sqrt", "Div", "Mul", "Sub", "Reshape", "Mul", "Reshape", "Add"});
        CHECK(t.g.stateUpdates.empty());
      }
    }
}

// A module called twice updates its buffers twice, the second update from the first's result;
// one value per channel is refused, as PyTorch refuses it.
TEST_CASE("BatchNormalization: a buffer two calls share is updated in order, and n = 1 is refused",
          "[passes][decompose]") {
  GraphBuilder t = GraphBuilder::inferring();
  const ValueId x = t.input("x", DType::F32, {2, 2, 3});
  const ValueId s = t.randomParam("scale", {2}), b = t.randomParam("bias", {2});
  const ValueId mean = t.randomParam("running_mean", {2}), var = t.randomParam("running_var", {2}, 0.5f, 2.0f);
  const std::map<std::string, ir::AttrValue> attrs{{"epsilon", 1e-5f}, {"momentum", 0.9f}, {"training_mode", int64_t{1}}};
  const ValueId y1 = t.node("BatchNormalization", {x, s, b, mean, var}, attrs)[0];
  t.node("BatchNormalization", {y1, s, b, mean, var}, attrs);
  const Tensor xs = t.randomTensor({2, 2, 3}, -2, 3);
  const Tensor first = runOne(t.g, y1, {{x, xs}});
  passes::DecomposeOps pass;
  REQUIRE(pass.run(t.g).ok());
  REQUIRE(t.g.stateUpdates.size() == 2);
  const Tensor newMean = runOne(t.g, t.g.stateUpdates[0].updated, {{x, xs}});
  const Tensor& mv = *t.g.values[mean].data;
  for (int64_t c = 0; c < 2; ++c) {
    double m1 = 0, m2 = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t k = 0; k < 3; ++k) {
        m1 += xs.at((n * 2 + c) * 3 + k) / 6;
        m2 += first.at((n * 2 + c) * 3 + k) / 6;
      }
    CHECK(newMean.at(c) == Approx((mv.at(c) * 0.9 + m1 * 0.1) * 0.9 + m2 * 0.1).epsilon(1e-5).margin(1e-6));
  }

  GraphBuilder one = GraphBuilder::inferring();
  const ValueId x1 = one.input("x", DType::F32, {1, 2, 1});
  one.node("BatchNormalization", {x1, one.randomParam("scale", {2}), one.randomParam("bias", {2}),
                                  one.randomParam("running_mean", {2}), one.randomParam("running_var", {2}, 0.5f, 2.0f)},
           attrs);
  auto refused = passes::DecomposeOps().run(one.g);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Matchers::Contains("more than one value per channel"));
}

// auto_pad SAME_*: the explicit pads ONNX defines (the odd one at the end for UPPER, at the
// beginning for LOWER), which the Conv's kernels and gradient rule read.
TEST_CASE("Conv with auto_pad SAME_UPPER / SAME_LOWER gets explicit pads", "[passes][decompose]") {
  for (const std::string mode : {"SAME_UPPER", "SAME_LOWER"})
    DYNAMIC_SECTION(mode) {
      GraphBuilder t = GraphBuilder::inferring();
      const ValueId x = t.input("x", DType::F32, {1, 2, 5, 6});
      const ValueId w = t.randomParam("w", {3, 2, 3, 3});
      const ValueId y = t.op("Conv", {x, w}, {{"auto_pad", mode}, {"strides", std::vector<int64_t>{2, 2}}});
      CHECK(t.g.values[y].shape == ir::Shape{1, 3, 3, 3});
      REQUIRE(passes::DecomposeOps().run(t.g).ok());
      const ir::Node& conv = t.g.nodes[t.g.values[y].producer];
      CHECK(conv.attrString("auto_pad", "") == "NOTSET");
      // Height 5: 3 outputs need 2 pads, one each side; width 6: 3 outputs need 1.
      CHECK(conv.attrInts("pads") == (mode == "SAME_UPPER" ? std::vector<int64_t>{1, 0, 1, 1} : std::vector<int64_t>{1, 1, 1, 0}));
    }
}

// ceil_mode lets a window run past the input; one wider than the whole axis (EfficientNet's
// AvgPool2d(hidden_dim, ceil_mode=True) on a 1x1 map) is a global pool over the clipped window.
TEST_CASE("a ceil_mode pool window wider than the input is a global pool", "[passes][decompose]") {
  for (const std::string op : {"AveragePool", "MaxPool"})
    DYNAMIC_SECTION(op) {
      GraphBuilder t = GraphBuilder::inferring();
      const ValueId x = t.input("x", DType::F32, {2, 3, 2, 3});
      const ValueId y = t.op(op, {x}, {{"kernel_shape", std::vector<int64_t>{7, 7}}, {"strides", std::vector<int64_t>{7, 7}},
                                       {"ceil_mode", int64_t{1}}});
      REQUIRE(t.g.values[y].shape == ir::Shape{2, 3, 1, 1});
      const Tensor xs = t.randomTensor({2, 3, 2, 3}, -2, 3);
      REQUIRE(passes::DecomposeOps().run(t.g).ok());
      const Tensor got = runOne(t.g, y, {{x, xs}});
      for (int64_t c = 0; c < 6; ++c) {
        double sum = 0, max = -1e30;
        for (int64_t k = 0; k < 6; ++k) {
          sum += xs.at(c * 6 + k);
          max = std::max<double>(max, xs.at(c * 6 + k));
        }
        CHECK(got.at(c) == Approx(op == "MaxPool" ? max : sum / 6).epsilon(1e-6));
      }
    }
}

// Naive pooling of x [N, C, H, W] by explicit window loops, independent of ops/pooling.h.
struct Pool2d {
  int64_t kh, kw, sh, sw, ph0, pw0, ph1, pw1, dh = 1, dw = 1;
  bool ceil = false, countPad = false;
  int64_t outLen(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d) const {
    const int64_t room = in + p0 + p1 - (d * (k - 1) + 1);
    int64_t o = (ceil ? (room + s - 1) / s : room / s) + 1;
    if (ceil && (o - 1) * s >= in + p0) --o;
    return o;
  }
  // The value and, for a max, the input index that attains it (the first in window order).
  std::vector<std::pair<double, int64_t>> run(const Tensor& x, bool max) const {
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
    const int64_t OH = outLen(H, kh, sh, ph0, ph1, dh), OW = outLen(W, kw, sw, pw0, pw1, dw);
    std::vector<std::pair<double, int64_t>> y;
    for (int64_t p = 0; p < N * C; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = max ? -INFINITY : 0;
          int64_t arg = -1, count = 0;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t h = oh * sh + i * dh - ph0, w = ow * sw + j * dw - pw0;
              const bool inPad = h < H + ph1 && w < W + pw1;
              if (h < 0 || w < 0 || h >= H || w >= W) {
                count += countPad && inPad;
                continue;
              }
              ++count;
              const double v = x.at(p * H * W + h * W + w);
              if (max && v > acc) acc = v, arg = p * H * W + h * W + w;
              if (!max) acc += v;
            }
          y.emplace_back(max ? acc : acc / count, arg);
        }
    return y;
  }
};

TEST_CASE("MaxPool and AveragePool: windows as naive loops take them, Pad, strided Slices, Max or Adds",
          "[passes][decompose]") {
  struct Case {
    const char* name;
    Pool2d p;
  };
  const std::vector<Case> cases = {
      {"ResNet's stem pool: 3x3, stride 2, pads 1", {3, 3, 2, 2, 1, 1, 1, 1}},
      {"2x2 stride 2, no padding", {2, 2, 2, 2, 0, 0, 0, 0}},
      {"ceil_mode, asymmetric pads, dilation 2", {3, 2, 2, 3, 1, 0, 0, 1, 2, 1, true}},
      {"count_include_pad, ceil_mode", {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true}},
  };
  for (const Case& k : cases)
    for (bool max : {true, false})
      DYNAMIC_SECTION(k.name << (max ? ", MaxPool" : ", AveragePool")) {
        GraphBuilder t = GraphBuilder::inferring();
        const ir::Shape xs{2, 2, 7, 8};
        Tensor in = t.randomTensor(xs, -1, 1);
        if (max)  // post-ReLU data: ties of zeros, which PyTorch resolves to the first in the window
          for (int64_t e = 0; e < in.numel(); e += 3) in.data<float>()[e] = 0;
        const ValueId x = t.init("px", in);
        std::map<std::string, ir::AttrValue> attrs{
            {"kernel_shape", std::vector<int64_t>{k.p.kh, k.p.kw}}, {"strides", std::vector<int64_t>{k.p.sh, k.p.sw}},
            {"pads", std::vector<int64_t>{k.p.ph0, k.p.pw0, k.p.ph1, k.p.pw1}}, {"ceil_mode", int64_t{k.p.ceil}}};
        if (k.p.dh != 1 || k.p.dw != 1) attrs["dilations"] = std::vector<int64_t>{k.p.dh, k.p.dw};
        if (!max) attrs["count_include_pad"] = int64_t{k.p.countPad};
        const ValueId y = t.op(max ? "MaxPool" : "AveragePool", {x}, attrs);
        const auto want = k.p.run(in, max);
        const Tensor got = runOne(t.g, y, {});
        REQUIRE(static_cast<size_t>(got.numel()) == want.size());
        for (size_t e = 0; e < want.size(); ++e) REQUIRE(got.at(e) == Approx(want[e].first).epsilon(1e-6).margin(1e-7));
        const bool padded = k.p.ph0 + k.p.pw0 + k.p.ph1 + k.p.pw1 > 0 || k.p.ceil;
        std::vector<std::string> ops;
        if (padded) ops.push_back("Pad");
        for (int64_t tap = 0; tap < k.p.kh * k.p.kw; ++tap) ops.push_back("Slice");
        if (max) ops.push_back("Max");
        for (int64_t tap = 1; !max && tap < k.p.kh * k.p.kw; ++tap) ops.push_back("Add");
        if (!max) ops.push_back("Mul");
        decomposesClosely(t, y, {}, ops);
        // d loss / d x through Pad, Slice and Max or Sum: for a max each window's dy goes to the
        // first element attaining it; for an average, dy / divisor to each element it covers.
        t.weightedSumLoss(y);
        Tensor dy;
        for (const ir::Node& n : t.g.nodes)
          if (n.op == "Mul" && n.inputs[0] == y) dy = *t.g.values[n.inputs[1]].data;
        std::vector<double> wantGrad(static_cast<size_t>(in.numel()), 0.0);
        if (max) {
          for (size_t e = 0; e < want.size(); ++e) wantGrad[static_cast<size_t>(want[e].second)] += dy.at(e);
        } else {  // y is linear in x: column e of the Jacobian is y of the unit vector
          for (int64_t e = 0; e < in.numel(); ++e) {
            Tensor unit(DType::F32, xs);
            unit.data<float>()[e] = 1;
            const auto col = k.p.run(unit, false);
            for (size_t o = 0; o < col.size(); ++o) wantGrad[e] += col[o].first * dy.at(o);
          }
        }
        const Tensor grad = gradientOf(t.g, "px");
        for (int64_t e = 0; e < in.numel(); ++e) REQUIRE(grad.at(e) == Approx(wantGrad[e]).epsilon(1e-5).margin(1e-6));
      }
}

TEST_CASE("GlobalAveragePool and GlobalMaxPool are ReduceMean and ReduceMax over the spatial axes",
          "[passes][decompose]") {
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    DYNAMIC_SECTION(op) {
      GraphBuilder t = GraphBuilder::inferring();
      const ValueId x = t.input("x", DType::F32, {2, 3, 4, 5});
      const ValueId y = t.op(op, {x});
      REQUIRE(t.g.values[y].shape == ir::Shape{2, 3, 1, 1});
      const Tensor in = t.randomTensor({2, 3, 4, 5}, -1, 1);
      const Tensor got = runOne(t.g, y, {{x, in}});
      for (int64_t p = 0; p < 6; ++p) {
        double sum = 0, mx = -INFINITY;
        for (int64_t k = 0; k < 20; ++k) sum += in.at(p * 20 + k), mx = std::max<double>(mx, in.at(p * 20 + k));
        CHECK(got.at(p) == Approx(std::string(op) == "GlobalMaxPool" ? mx : sum / 20).epsilon(1e-6));
      }
      decomposesClosely(t, y, {{x, in}}, {std::string(op) == "GlobalMaxPool" ? "ReduceMax" : "ReduceMean"});
    }
}

}  // namespace
}  // namespace fbl
