// ops::reductionAxis: the axis each reducing op reads its input along, for the ops the layout
// passes and the fusion planner ask about, and none for an op that does not reduce.
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/ops/reduction_axis.h"

using namespace fbl;

TEST_CASE("reductionAxis: products, reductions, normalizations and the loss", "[ops]") {
  auto g = ir::parseGraph(R"(graph "t" opset 20
  input %x : f32[4,8,16]
  input %w : f32[16,32]
  input %a : f32[16,8]
  input %labels : i64[4]
  input %s : f32[4,10]
  %y : f32[4,8,32] = MatMul(%x, %w) @mm
  %g : f32[8,32] = Gemm(%a, %w) {transA=1} @gemm
  %r : f32[4,1,16] = ReduceSum(%x) {axes=[-2], keepdims=1} @sum
  %m : f32[4,8,16] = Softmax(%x) {axis=1} @softmax
  %l : f32[] = SoftmaxCrossEntropyLoss(%s, %labels) @loss
  %e : f32[4,8,16] = Relu(%x) @relu
  output %y
  output %g
  output %r
  output %m
  output %l
  output %e
)");
  REQUIRE(g.ok());
  auto axis = [&](const char* node, int slot) {
    for (const ir::Node& n : g->nodes)
      if (n.name == node) return ops::reductionAxis(*g, n, slot);
    FAIL("no node " << node);
    return std::optional<int64_t>{};
  };
  CHECK(axis("mm", 0) == 2);       // x's K, its last axis
  CHECK(axis("mm", 1) == 0);       // w's K, the one before
  CHECK(axis("gemm", 0) == 0);     // transA: a's K is its rows
  CHECK(axis("gemm", 1) == 0);
  CHECK(axis("sum", 0) == 1);      // a negative axis, normalized
  CHECK(axis("softmax", 0) == 1);
  CHECK(axis("loss", 0) == 1);     // the classes
  CHECK(!axis("loss", 1));         // labels are not reduced
  CHECK(!axis("relu", 0));
  CHECK(!axis("mm", 2));           // no such input
}
