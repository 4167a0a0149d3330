// chunk-loss and schedule-loss-chunks (compiler/passes/chunk_loss.h) on a small language-model
// head: the chunked loss and every gradient match the whole head's on the reference executor; the
// moved gradient nodes leave at most one chunk's logits alive at any point; heads the pass must
// leave whole are left whole.
#include <catch2/catch.hpp>

#include <random>

#include "compiler/autodiff/recompute.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/passes/chunk_loss.h"
#include "compiler/passes/verify.h"
#include "compiler/ref/executor.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using ir::ValueId;
using testing::GraphBuilder;

constexpr int64_t kBatch = 2, kSeq = 5, kWidth = 8, kVocab = 12;

struct HeadOptions {
  std::string reduction = "mean";
  bool ignoreIndex = true;
  bool softcap = true;
  bool bias = false;  // an MLM head's per-class bias
  bool trainableHead = false;
  bool logitsOutput = false;
};

// tokens -> embedding -> h + h A^T B^T (LoRA) -> [B, S, V] logits through a frozen head W^T,
// Gemma's softcap 3 * tanh(x / 3), reshaped to [B*S, V], and a cross-entropy.
GraphBuilder head(const HeadOptions& o) {
  GraphBuilder t = GraphBuilder::inferring(3);
  const std::vector<int64_t> perm{1, 0};
  ValueId h = t.op("Gather", {t.randomParam("m.embed.weight", {kVocab, kWidth}), t.input("ids", ir::DType::I64, {kBatch, kSeq})});
  ValueId a = t.randomParam("m.fc.lora_A.default.weight", {4, kWidth});
  ValueId b = t.randomParam("m.fc.lora_B.default.weight", {kWidth, 4});
  h = t.op("Add", {h, t.op("MatMul", {t.op("MatMul", {h, t.op("Transpose", {a}, {{"perm", perm}})}),
                                      t.op("Transpose", {b}, {{"perm", perm}})})});
  ValueId w = t.randomParam(o.trainableHead ? "m.lm_head.lora_A.default.weight" : "m.lm_head.weight", {kVocab, kWidth});
  ValueId logits = t.op("MatMul", {h, t.op("Transpose", {w}, {{"perm", perm}})});
  ValueId x = logits;
  if (o.bias) x = t.op("Add", {x, t.randomParam("m.lm_head.bias", {kVocab})});
  if (o.softcap) x = t.op("Mul", {t.op("Tanh", {t.op("Div", {x, t.scalar(3.0f)})}), t.scalar(3.0f)});
  ValueId scores = t.op("Reshape", {x, t.ints({kBatch * kSeq, kVocab})});
  ValueId labels = t.input("labels", ir::DType::I64, {kBatch * kSeq});
  std::map<std::string, ir::AttrValue> attrs{{"reduction", o.reduction}};
  if (o.ignoreIndex) attrs["ignore_index"] = int64_t{-100};
  t.output(t.op("SoftmaxCrossEntropyLoss", {scores, labels}, attrs));
  t.g.values[t.g.outputs[0]].name = "loss";
  if (o.logitsOutput) t.output(logits);
  return t;
}

// The loss and every trainable's gradient, with a few labels ignored where the loss has an
// ignore_index.
std::vector<ir::Tensor> lossAndGradients(const autodiff::TrainingGraph& tg, bool ignored = true) {
  std::mt19937 rng(11);
  std::map<ValueId, ir::Tensor> feeds;
  for (ValueId v : tg.graph.inputs) {
    const ir::Value& val = tg.graph.values[v];
    ir::Tensor t(val.dtype, val.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(rng() % kVocab));
    if (val.name == "labels" && ignored)
      for (int64_t i : {1, 6, 7}) t.set(i, -100.0);
    feeds.emplace(v, std::move(t));
  }
  std::vector<ValueId> fetch{tg.loss};
  for (const auto& p : tg.trainables) fetch.push_back(p.grad);
  auto out = ref::Executor(tg.graph).run(feeds, fetch);
  INFO((out.ok() ? "" : out.error().message));
  REQUIRE(out.ok());
  return *out;
}

autodiff::TrainingGraph train(const ir::Graph& g) {
  auto tg = autodiff::buildTrainingGraph(g, {});
  INFO((tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  return *tg;
}

void requireClose(const std::vector<ir::Tensor>& got, const std::vector<ir::Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("output " << i);
    REQUIRE(got[i].numel() == want[i].numel());
    double scale = 0;
    for (int64_t k = 0; k < want[i].numel(); ++k) scale = std::max(scale, std::abs(want[i].at(k)));
    for (int64_t k = 0; k < want[i].numel(); ++k) CHECK(std::abs(got[i].at(k) - want[i].at(k)) <= 1e-6 * scale);
  }
}

TEST_CASE("chunk-loss runs the head in chunks of rows and gives the whole head's loss and gradients",
          "[passes][chunk-loss]") {
  std::vector<HeadOptions> cases;
  for (const std::string reduction : {"mean", "sum"})
    for (bool ignoreIndex : {true, false})
      for (bool softcap : {true, false})
        for (bool bias : {false, true}) {
          HeadOptions o;
          o.reduction = reduction;
          o.ignoreIndex = ignoreIndex;
          o.softcap = softcap;
          o.bias = bias;
          cases.push_back(o);
        }
  for (const HeadOptions& o : cases) {
    const bool ignoreIndex = o.ignoreIndex, softcap = o.softcap, bias = o.bias;
    INFO("reduction " << o.reduction << ", ignore_index " << ignoreIndex << ", softcap " << softcap << ", bias " << bias);
    GraphBuilder t = head(o);
    const std::vector<ir::Tensor> whole = lossAndGradients(train(t.g), ignoreIndex);

    ir::Graph g = t.g;
    passes::ChunkLoss pass;
    pass.rows = 4;  // 10 rows: 4, 4, 2
    auto changed = pass.run(g);
    REQUIRE(changed.ok());
    REQUIRE(*changed);
    REQUIRE(pass.chunked().size() == 1);
    CHECK(pass.chunked()[0].chunks == 3);
    CHECK(pass.chunked()[0].tokens == kBatch * kSeq);
    CHECK(pass.chunked()[0].vocab == kVocab);
    CHECK(pass.summary() == "SoftmaxCrossEntropyLoss_" + std::to_string(t.g.values[t.g.outputs[0]].producer) +
                                " in 3 chunks of 4 rows (10 x 12 logits)");
    const Status verified = passes::verifyGraph(g);
    INFO((verified.ok() ? "" : verified.error().message));
    REQUIRE(verified.ok());
    int64_t losses = 0, products = 0;
    for (const ir::Node& n : g.nodes) {
      losses += !n.dead && n.op == "SoftmaxCrossEntropyLoss";
      if (!n.dead && n.op == "SoftmaxCrossEntropyLoss") CHECK(n.attrString("reduction", "") == "sum");
      products += !n.dead && n.op == "MatMul" && g.values[n.outputs[0]].shape.back() == kVocab;
    }
    CHECK(losses == 3);
    CHECK(products == 3);
    CHECK(g.values[g.outputs[0]].name == "loss");

    autodiff::TrainingGraph tg = train(g);
    requireClose(lossAndGradients(tg, ignoreIndex), whole);

    // Scheduled, the backward nodes that read a chunk's logits run in the forward pass, and
    // no two chunks' logits are ever alive together.
    passes::ScheduleLossChunks schedule(pass);
    auto moved = schedule.run(tg.graph);
    REQUIRE(moved.ok());
    REQUIRE(*moved);
    CHECK(schedule.moved() >= 6);  // per chunk the loss gradient and the product's, and the scale
    REQUIRE(passes::verifyGraph(tg.graph).ok());
    std::vector<bool> wide(tg.graph.values.size(), false);
    for (ValueId v : pass.chunked()[0].wide) wide[v] = true;
    const auto consumers = tg.graph.consumers();
    std::vector<int64_t> lastRead(tg.graph.values.size(), -1);
    for (size_t v = 0; v < tg.graph.values.size(); ++v)
      for (ir::NodeId c : consumers[v]) lastRead[v] = std::max<int64_t>(lastRead[v], c);
    int previousPhase = 0;
    for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(tg.graph.nodes.size()); ++id) {
      const ir::Node& n = tg.graph.nodes[id];
      CHECK(static_cast<int>(n.phase) >= previousPhase);
      previousPhase = static_cast<int>(n.phase);
      int64_t alive = 0;
      for (size_t v = 0; v < wide.size(); ++v)
        if (wide[v] && tg.graph.values[v].producer <= id && lastRead[v] >= id) ++alive;
      CHECK(alive <= (softcap ? 3 : 1) + (bias ? 1 : 0));  // one chunk's product and its chain
    }
    requireClose(lossAndGradients(tg, ignoreIndex), whole);
  }
}

TEST_CASE("chunk-loss leaves a head whole where chunks would change what it computes or keeps",
          "[passes][chunk-loss]") {
  auto unchanged = [](const HeadOptions& o, int64_t rows, std::vector<std::string> trainable = {}) {
    GraphBuilder t = head(o);
    passes::ChunkLoss pass;
    pass.rows = rows;
    pass.trainableGlobs = std::move(trainable);
    auto changed = pass.run(t.g);
    REQUIRE(changed.ok());
    return !*changed && pass.chunked().empty() && t.count("SoftmaxCrossEntropyLoss") == 1;
  };
  CHECK(unchanged({}, 0));                  // --loss-chunk-rows 0
  CHECK(unchanged({}, kBatch * kSeq));      // one chunk would be the whole
  CHECK(unchanged({}, -1));                 // auto: 10 x 12 logits are far under a chunk's bytes
  HeadOptions kept;
  kept.logitsOutput = true;                 // --outputs: the app reads the whole logits
  CHECK(unchanged(kept, 4));
  HeadOptions trained;
  trained.trainableHead = true;             // its gradient would need every chunk's logits
  CHECK(unchanged(trained, 4, {"*lora_*"}));
}

TEST_CASE("recompute keeps a chunked loss's segment, whose gradient the forward pass takes", "[passes][chunk-loss]") {
  GraphBuilder t = head({});
  passes::ChunkLoss pass;
  pass.rows = 4;
  REQUIRE(pass.run(t.g).ok());
  autodiff::TrainingGraph tg = train(t.g);
  const std::vector<ValueId>& wide = pass.chunked()[0].wide;
  auto computesWide = [&](const std::vector<autodiff::RecomputeSegment>& segments) {
    bool any = false;
    for (const autodiff::RecomputeSegment& s : segments)
      for (ir::NodeId id = s.first; id <= s.last; ++id)
        for (ValueId out : tg.graph.nodes[id].outputs) any = any || std::find(wide.begin(), wide.end(), out) != wide.end();
    return any;
  };
  CHECK(computesWide(autodiff::recomputeSegments(tg.graph)));
  CHECK_FALSE(computesWide(autodiff::recomputeSegments(tg.graph, wide)));
}

TEST_CASE("chunk-loss: --loss-chunk-rows takes auto, 0 or a row count", "[passes][chunk-loss]") {
  CHECK(passes::parseLossChunkRows("auto").value() == -1);
  CHECK(passes::parseLossChunkRows("0").value() == 0);
  CHECK(passes::parseLossChunkRows("64").value() == 64);
  for (const char* bad : {"", "-1", "12rows", "all"}) {
    auto r = passes::parseLossChunkRows(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("--loss-chunk-rows") != std::string::npos);
  }
}

}  // namespace
}  // namespace fbl
