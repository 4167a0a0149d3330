// The autodiff pass (compiler/passes/differentiate.h) on the tiny Llama: the forward graph
// becomes the joint one, and what the later stages read of it is filled in: the host's side
// (every initializer, each in-place update), the values that must exist, peft's adapter, the
// frozen base's encodings under --base-weights, and the model's outputs under --outputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "compiler/passes/differentiate.h"
#include "compiler/passes/load_model.h"
#include "tests/passes/test_graphs.h"

namespace fbl::passes {
namespace {

bool contains(const std::vector<ir::ValueId>& v, ir::ValueId x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("autodiff pass: the joint graph, the host's side and what must exist", "[passes][autodiff]") {
  ir::Graph g = fbl::testing::forwardGraph("llama-tiny");
  const size_t forwardNodes = g.nodes.size();
  autodiff::TrainingOptions to;
  std::vector<ir::ValueId> mustExist;
  HostInterface host;
  Differentiate pass(to, mustExist, host);
  auto bq = quant::parseBaseWeights("int4", 32);
  REQUIRE(bq.ok());
  pass.baseWeights = *bq;
  pass.keepOutputs = true;
  auto changed = pass.run(g);
  INFO((changed.ok() ? "" : changed.error().message));
  REQUIRE(changed.ok());
  CHECK(*changed);

  // The pipeline's graph is now the joint one.
  CHECK(g.nodes.size() > forwardNodes);
  CHECK(std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.phase == ir::Phase::Backward; }));
  CHECK(std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.phase == ir::Phase::Optimizer; }));

  // The host's side: every initializer, and an in-place update per trainable and state tensor.
  const autodiff::TrainingGraph& tg = pass.tg;
  REQUIRE_FALSE(tg.trainables.empty());
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v)
    CHECK(contains(host.hostValues, v) == (g.values[v].kind == ir::ValueKind::Initializer));
  CHECK(host.inPlaceUpdates.size() == tg.trainables.size() + tg.state.size());
  for (const auto& t : tg.trainables) {
    CHECK(contains(host.hostValues, t.param));
    CHECK(std::count(host.inPlaceUpdates.begin(), host.inPlaceUpdates.end(), std::pair(t.param, t.updated)) == 1);
    CHECK(contains(mustExist, t.grad));
    CHECK(contains(mustExist, t.updated));
  }
  CHECK(contains(mustExist, tg.loss));

  // --outputs: the logits the cross-entropy reads, computed whatever the strategy folds.
  REQUIRE(pass.outputs.size() == 1);
  CHECK(contains(mustExist, pass.outputs[0]));
  CHECK(g.values[pass.outputs[0]].shape.back() == g.values[g.nodes[g.values[tg.loss].producer].inputs[0]].shape.back());

  // LoRA: peft's adapter can be written.
  CHECK(pass.adapter.refusal.empty());
  CHECK(pass.adapter.config.value("peft_type", "") == "LORA");

  // int4: each frozen matrix is encoded or says why not; encodings land on the joint graph's values.
  CHECK(pass.encodings.size() + pass.encodingsSkipped.size() > 0);
  CHECK(host.encodings.size() == pass.encodings.size());
  std::set<std::string> trainable;
  for (const auto& t : tg.trainables) trainable.insert(g.values[t.param].name);
  for (const auto& [v, e] : host.encodings) {
    CHECK(g.values[v].kind == ir::ValueKind::Initializer);
    CHECK(pass.encodings.count(g.values[v].name) == 1);
    CHECK(trainable.count(g.values[v].name) == 0);
  }
}

}  // namespace fbl::passes
