// drop-noops and dead-code on hand-built graphs.
#include <catch2/catch.hpp>

#include "compiler/passes/dead_code.h"
#include "compiler/passes/drop_noops.h"
#include "compiler/passes/fold_and_infer.h"
#include "tests/ops/graph_builder.h"

using fbl::ir::DType;
using fbl::ir::Tensor;
using fbl::testing::GraphBuilder;
namespace ir = fbl::ir;
namespace passes = fbl::passes;

namespace {
void infer(ir::Graph& g) {
  passes::FoldAndInfer fold;
  auto r = fold.run(g);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}
}  // namespace

TEST_CASE("Identity chains and same-dtype casts are dropped, real casts kept", "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {2, 3});
  ir::ValueId i1 = b.op("Identity", {b.op("Identity", {x})});
  ir::ValueId same = b.op("Cast", {i1}, {{"to", int64_t{1}}});
  ir::ValueId like = b.op("CastLike", {same, x});
  ir::ValueId toInt = b.op("Cast", {like}, {{"to", int64_t{7}}});
  ir::ValueId y = b.op("Neg", {toInt});
  b.output(y);
  infer(b.g);
  passes::DropNoops pass;
  auto r = pass.run(b.g);
  REQUIRE(r.ok());
  CHECK(*r);
  CHECK(pass.dropped() == 4);
  CHECK(b.count("Identity") == 0);
  CHECK(b.count("Cast") == 1);
  CHECK(b.count("CastLike") == 0);
  // The kept Cast now reads x directly.
  for (const auto& n : b.g.nodes)
    if (!n.dead && n.op == "Cast") CHECK(n.inputs[0] == x);
}

TEST_CASE("inference Dropout is dropped; a read mask becomes all-true", "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {2, 3});
  ir::ValueId ratio0 = b.constant("r0", Tensor::scalar<float>(0.f));
  ir::ValueId ratio1 = b.constant("r1", Tensor::scalar<float>(0.1f));
  ir::ValueId train = b.constant("train", Tensor::scalar<bool>(true));
  auto d0 = b.node("Dropout", {x, ratio0, train}, {}, 2);          // ratio 0: identity
  auto d1 = b.node("Dropout", {d0[0], ratio1}, {}, 2);             // no training_mode: identity
  auto d2 = b.node("Dropout", {d1[0], ratio1, train}, {}, 1);      // real dropout: kept
  ir::ValueId masked = b.op("Where", {d1[1], d2[0], d2[0]});
  b.output(masked);
  infer(b.g);
  passes::DropNoops pass;
  REQUIRE(pass.run(b.g).ok());
  CHECK(pass.dropped() == 2);
  CHECK(b.count("Dropout") == 1);
  const ir::Value& mask = b.g.values[d1[1]];
  REQUIRE(mask.kind == ir::ValueKind::Constant);
  for (int64_t i = 0; i < mask.data->numel(); ++i) CHECK(mask.data->at(i) == 1.0);
  for (const auto& n : b.g.nodes)
    if (!n.dead && n.op == "Dropout") CHECK(n.inputs[0] == x);
}

TEST_CASE("a no-op that produces a graph output stays, so the output keeps its name",
          "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {2});
  ir::ValueId y = b.op("Identity", {b.op("Relu", {x})});
  b.output(y);
  infer(b.g);
  passes::DropNoops pass;
  REQUIRE(pass.run(b.g).ok());
  CHECK(b.count("Identity") == 1);
  CHECK(b.g.outputs[0] == y);
}

TEST_CASE("dead-code keeps exactly what the outputs need", "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {2, 4});
  ir::ValueId unused = b.op("Exp", {b.op("Neg", {x})});
  (void)unused;
  auto ln = b.node("LayerNormalization", {x, b.input("s", DType::F32, {4})}, {}, 3);
  ir::ValueId y = b.op("Add", {ln[0], x});
  b.output(y);
  passes::DeadCode pass;
  auto r = pass.run(b.g);
  REQUIRE(r.ok());
  CHECK(*r);
  CHECK(pass.removed() == 2);
  REQUIRE(b.g.nodes.size() == 2);
  CHECK(b.g.nodes[0].op == "LayerNormalization");  // its Mean output is unused, Y is not
  CHECK(b.g.nodes[1].op == "Add");
  CHECK(b.g.values[y].producer == 1);
  auto again = pass.run(b.g);
  REQUIRE(again.ok());
  CHECK_FALSE(*again);
}
