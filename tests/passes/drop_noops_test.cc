// drop-noops on small graphs: text in, printed text out where the result is a graph.
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/passes/dead_code.h"
#include "compiler/passes/drop_noops.h"
#include "compiler/passes/fold_and_infer.h"
#include "tests/ops/graph_builder.h"
#include "tests/passes/test_graphs.h"

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
  ir::Graph g = fbl::testing::parsedGraph(R"(graph "t" opset 20
  input %x : f32[2,3]
  %i0 : f32[2,3] = Identity(%x) @i0
  %i1 : f32[2,3] = Identity(%i0) @i1
  %same : f32[2,3] = Cast(%i1) {to=1} @same
  %like : f32[2,3] = CastLike(%same, %x) @like
  %int : i64[2,3] = Cast(%like) {to=7} @int
  %y : i64[2,3] = Neg(%int) @neg
  output %y
)");
  infer(g);
  passes::DropNoops pass;
  auto r = pass.run(g);
  REQUIRE(r.ok());
  CHECK(*r);
  CHECK(pass.dropped() == 4);
  REQUIRE(passes::DeadCode().run(g).ok());
  // The kept Cast now reads x directly.
  CHECK(ir::printGraph(g) == R"(graph "t" opset 20
  input %x : f32[2,3]
  %int : i64[2,3] = Cast(%x) {to=7} @int
  %y : i64[2,3] = Neg(%int) @neg
  output %y
)");
}

TEST_CASE("inference Dropout is dropped, a read mask becomes all-true", "[passes]") {
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
