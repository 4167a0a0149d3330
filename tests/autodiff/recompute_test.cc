// Recomputation (compiler/autodiff/recompute.h) on a stack of residual LoRA blocks: the cuts fall
// on the residual stream, the clones run in the backward pass in topological order, the backward
// no longer reads the forward's activations, and the reference executor gives the same loss and
// gradients bit for bit.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "compiler/autodiff/recompute.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/ref/executor.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using ir::ValueId;
using testing::GraphBuilder;

const std::vector<int64_t> kT{1, 0};

// 16 token ids embedded to [16, 32], then through `layers` blocks h = h + relu(h W^T + h A^T B^T * 2 + bias),
// then a cross-entropy over 32 classes.
GraphBuilder residualStack(int layers) {
  GraphBuilder t = GraphBuilder::inferring();
  // The stream starts as an activation: token ids through an embedding table.
  ValueId h = t.op("Gather", {t.randomParam("m.embed.weight", {32, 32}), t.input("ids", ir::DType::I64, {16})});
  ValueId mask = t.input("mask", ir::DType::F32, {16, 32});
  ValueId bias = ir::kNoValue;
  for (int l = 0; l < layers; ++l) {
    // An activation the first block computes and every block reads (an input through a weight,
    // as DeBERTa's mask is): long-lived, so kept; the first block's clones compute it again for
    // themselves, and the other blocks' clones read it as the forward computed it.

    const std::string p = "m.layers." + std::to_string(l) + ".fc.";
    ValueId w = t.randomParam(p + "base_layer.weight", {32, 32});
    ValueId a = t.randomParam(p + "lora_A.default.weight", {4, 32});
    ValueId b = t.randomParam(p + "lora_B.default.weight", {32, 4});
    ValueId base = t.op("MatMul", {h, t.op("Transpose", {w}, {{"perm", kT}})});
    if (l == 0) bias = t.op("Mul", {mask, t.randomParam("m.mask_scale", {32})});
    ValueId low = t.op("MatMul", {t.op("MatMul", {h, t.op("Transpose", {a}, {{"perm", kT}})}), t.op("Transpose", {b}, {{"perm", kT}})});
    ValueId y = t.op("Relu", {t.op("Add", {t.op("Add", {base, t.op("Mul", {low, t.scalar(2.0f)})}), bias})});
    h = t.op("Add", {h, y});
  }
  ValueId labels = t.input("labels", ir::DType::I64, {16});
  t.output(t.op("SoftmaxCrossEntropyLoss", {h, labels}, {{"reduction", std::string("mean")}}));
  t.g.values[t.g.outputs[0]].name = "loss";
  return t;
}

// The loss and every trainable's gradient on fixed inputs.
std::vector<ir::Tensor> lossAndGradients(const autodiff::TrainingGraph& tg) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::map<ValueId, ir::Tensor> feeds;
  for (ValueId v : tg.graph.inputs) {
    const ir::Value& val = tg.graph.values[v];
    ir::Tensor t(val.dtype, val.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, val.dtype == ir::DType::F32 ? u(rng) : static_cast<double>(rng() % 32));
    feeds.emplace(v, std::move(t));
  }
  std::vector<ValueId> fetch{tg.loss};
  for (const auto& p : tg.trainables) fetch.push_back(p.grad);
  ref::Executor exec(tg.graph);
  auto out = exec.run(feeds, fetch);
  INFO((out.ok() ? "" : out.error().message));
  REQUIRE(out.ok());
  return *out;
}

TEST_CASE("recompute cuts on the residual stream and gives the same gradients bit for bit", "[autodiff][recompute]") {
  GraphBuilder t = residualStack(8);
  auto tg = autodiff::buildTrainingGraph(t.g, {});
  INFO((tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  const std::vector<ir::Tensor> kept = lossAndGradients(*tg);
  // Every block is a segment; the loss after the last cut is not one.
  const std::vector<autodiff::RecomputeSegment> segments = autodiff::recomputeSegments(tg->graph);
  REQUIRE(segments.size() == 8);
  for (const auto& s : segments) CHECK(s.savedBytes > 0);

  for (int64_t count : {int64_t{1}, int64_t{-1}}) {
    autodiff::TrainingGraph r = *tg;
    const autodiff::RecomputeSummary sum = autodiff::recompute(r.graph, count);
    CHECK(sum.segments == (count < 0 ? 8 : 1));
    CHECK(sum.clonedNodes > 0);
    // Topological order, and every clone in the backward pass.
    std::vector<bool> ready(r.graph.values.size(), false);
    for (size_t v = 0; v < r.graph.values.size(); ++v) ready[v] = r.graph.values[v].producer == ir::kNoNode;
    int64_t clones = 0;
    for (const ir::Node& n : r.graph.nodes) {
      for (ValueId in : n.inputs) CHECK((in == ir::kNoValue || ready[in]));
      for (ValueId out : n.outputs)
        if (out != ir::kNoValue) ready[out] = true;
      if (n.name.find("/recompute") != std::string::npos) {
        ++clones;
        CHECK(n.phase == ir::Phase::Backward);
      }
    }
    CHECK(clones == sum.clonedNodes);
    const std::vector<ir::Tensor> recomputed = lossAndGradients(r);
    REQUIRE(recomputed.size() == kept.size());
    for (size_t i = 0; i < kept.size(); ++i) {
      INFO("output " << i);
      REQUIRE(recomputed[i].nbytes() == kept[i].nbytes());
      CHECK(std::memcmp(recomputed[i].raw(), kept[i].raw(), kept[i].nbytes()) == 0);
    }
  }

  // With everything recomputed, the backward reads of the forward are the residual stream at the
  // cuts, the inputs, the weights and what is not an activation (weight views, the bias): no
  // product or Relu output is kept for it any more.
  auto keptProducts = [](const ir::Graph& g) {
    int64_t n = 0;
    for (const ir::Value& v : g.values)
      if (v.reusedByBackward && v.producer != ir::kNoNode)
        if (g.nodes[v.producer].op == "MatMul" || g.nodes[v.producer].op == "Relu") {
          UNSCOPED_INFO("kept for the backward: " << v.name << " of " << g.nodes[v.producer].name);
          ++n;
        }
    return n;
  };
  autodiff::TrainingGraph all = *tg;
  autodiff::recompute(all.graph, -1);
  CHECK(keptProducts(tg->graph) > 0);
  CHECK(keptProducts(all.graph) == 0);
}

}  // namespace
}  // namespace fbl
