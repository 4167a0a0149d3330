// decompose-ops: Tile and Clip left to run time become ops with kernels (Reshape, Expand, Max,
// Min), which compute what the originals' reference kernels do; Tile's reference kernel is
// checked against a naive loop here.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "compiler/passes/decompose_ops.h"
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

TEST_CASE("Tile becomes Reshape, Expand, Reshape; repeats of 1 only an Identity", "[passes][decompose]") {
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

}  // namespace
}  // namespace fbl
