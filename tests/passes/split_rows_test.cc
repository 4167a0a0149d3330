// split-rows (compiler/passes/split_rows.h): a tied embedding larger than the largest allocation
// becomes row blocks; the loss and every gradient are the whole table's on the reference
// executor (to 1e-6 where the blocks' products are added in another order), the ids keep their
// bound, and matrices the pass cannot rewrite are left whole.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "compiler/autodiff/training_graph.h"
#include "compiler/passes/split_rows.h"
#include "compiler/passes/verify.h"
#include "compiler/ref/executor.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using ir::ValueId;
using testing::GraphBuilder;

constexpr int64_t kTokens = 6, kWidth = 8, kVocab = 10;

// ids -> a tied embedding [10, 8] -> h + h A^T B^T -> logits through the same table -> loss.
GraphBuilder tied(bool extraReader = false) {
  GraphBuilder t = GraphBuilder::inferring(5);
  const std::vector<int64_t> perm{1, 0};
  ValueId table = t.randomParam("m.embed.weight", {kVocab, kWidth});
  ValueId h = t.op("Gather", {table, t.input("ids", ir::DType::I64, {kTokens})});
  ValueId a = t.randomParam("m.fc.lora_A.default.weight", {2, kWidth});
  ValueId b = t.randomParam("m.fc.lora_B.default.weight", {kWidth, 2});
  h = t.op("Add", {h, t.op("MatMul", {t.op("MatMul", {h, t.op("Transpose", {a}, {{"perm", perm}})}),
                                      t.op("Transpose", {b}, {{"perm", perm}})})});
  ValueId logits = t.op("MatMul", {h, t.op("Transpose", {table}, {{"perm", perm}})});
  if (extraReader) logits = t.op("Add", {logits, t.op("ReduceSum", {table}, {{"keepdims", int64_t{0}}})});
  t.output(t.op("SoftmaxCrossEntropyLoss", {logits, t.input("labels", ir::DType::I64, {kTokens})},
                {{"reduction", std::string("mean")}}));
  t.g.values[t.g.outputs[0]].name = "loss";
  return t;
}

std::vector<ir::Tensor> lossAndGradients(const ir::Graph& g) {
  auto tg = autodiff::buildTrainingGraph(g, {});
  INFO((tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  std::mt19937 rng(3);
  std::map<ValueId, ir::Tensor> feeds;
  for (ValueId v : tg->graph.inputs) {
    ir::Tensor x(ir::DType::I64, tg->graph.values[v].shape);
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(rng() % kVocab));  // ids in every block
    feeds.emplace(v, std::move(x));
  }
  std::vector<ValueId> fetch{tg->loss};
  for (const auto& p : tg->trainables) fetch.push_back(p.grad);
  auto out = ref::Executor(tg->graph).run(feeds, fetch);
  INFO((out.ok() ? "" : out.error().message));
  REQUIRE(out.ok());
  return *out;
}

TEST_CASE("split-rows stores a tied embedding in row blocks and computes the whole table's loss and gradients",
          "[passes][split-rows]") {
  GraphBuilder t = tied();
  const std::vector<ir::Tensor> whole = lossAndGradients(t.g);
  ir::Graph g = t.g;
  passes::ChunkLoss chunks;
  passes::SplitRows pass(chunks);
  pass.maxBytes = 4 * kWidth * 4;  // four rows of fp32
  auto changed = pass.run(g);
  REQUIRE(changed.ok());
  REQUIRE(*changed);
  REQUIRE(passes::verifyGraph(g).ok());
  // 10 rows in blocks of at most 4: three of 4, 3 and 3 rows... as equal as the count allows.
  const std::vector<passes::SplitRows::Block>& blocks = pass.blocks();
  REQUIRE(blocks.size() == 3);
  int64_t next = 0;
  for (const auto& b : blocks) {
    CHECK(b.of == "m.embed.weight");
    CHECK(b.row == next);
    CHECK(b.rows <= 4);
    next += b.rows;
    // Each block holds its rows of the table.
    const ir::Value& v = g.values[g.findValue(b.name)];
    REQUIRE(v.data);
    const ir::Value& table = t.g.values[t.g.findValue("m.embed.weight")];
    CHECK(std::memcmp(v.data->raw(), table.data->raw() + b.row * kWidth * 4, static_cast<size_t>(b.rows * kWidth * 4)) == 0);
  }
  CHECK(next == kVocab);
  // Nothing reads the whole table any more, and the ids keep the bound it gave them.
  const ValueId table = g.findValue("m.embed.weight");
  CHECK(g.consumers()[table].empty());
  const ValueId ids = g.findValue("ids");
  REQUIRE(pass.lostBounds().count(ids) == 1);
  REQUIRE(pass.lostBounds().at(ids).size() == 1);
  CHECK(pass.lostBounds().at(ids)[0].lo == 0);
  CHECK(pass.lostBounds().at(ids)[0].hi == kVocab);
  CHECK(pass.lostBounds().at(ids)[0].table == "m.embed.weight");

  const std::vector<ir::Tensor> blocked = lossAndGradients(g);
  REQUIRE(blocked.size() == whole.size());
  // The loss is the same bit for bit; the head's input gradient adds the blocks' products in
  // another order.
  CHECK(blocked[0].at(0) == whole[0].at(0));
  for (size_t i = 1; i < whole.size(); ++i) {
    double scale = 0;
    for (int64_t k = 0; k < whole[i].numel(); ++k) scale = std::max(scale, std::abs(whole[i].at(k)));
    for (int64_t k = 0; k < whole[i].numel(); ++k) CHECK(std::abs(blocked[i].at(k) - whole[i].at(k)) <= 1e-6 * scale);
  }
}

TEST_CASE("split-rows leaves a matrix whole that fits, that the base stores small enough, or that others read",
          "[passes][split-rows]") {
  auto splits = [](GraphBuilder t, int64_t maxBytes, int bits) {
    passes::ChunkLoss chunks;
    passes::SplitRows pass(chunks);
    pass.maxBytes = maxBytes;
    pass.base.bits = bits;
    pass.base.group = 8;
    pass.trainableGlobs = {"*lora_*"};
    auto changed = pass.run(t.g);
    REQUIRE(changed.ok());
    return *changed;
  };
  CHECK_FALSE(splits(tied(), kVocab * kWidth * 4, 32));  // exactly fits
  CHECK(splits(tied(), kVocab * kWidth * 4 - 1, 32));
  // int4 in groups of 8: 40 bytes of elements padded to 48, and 10 fp16 scales: 80 in all.
  CHECK_FALSE(splits(tied(), 80, 4));
  CHECK(splits(tied(), 79, 4));
  CHECK_FALSE(splits(tied(/*extraReader=*/true), 16, 32));  // a ReduceSum reads it whole
  CHECK_FALSE(splits(tied(), 0, 32));                        // no limit
}

}  // namespace
}  // namespace fbl
