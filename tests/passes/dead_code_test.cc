// dead-code on a small graph: text in, printed text out.
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/passes/dead_code.h"
#include "tests/passes/test_graphs.h"

namespace ir = fbl::ir;
namespace passes = fbl::passes;

TEST_CASE("dead-code keeps exactly what the outputs need", "[passes]") {
  ir::Graph g = fbl::testing::parsedGraph(R"(graph "t" opset 20
  input %x : f32[2,4]
  input %s : f32[4]
  %n : f32[2,4] = Neg(%x) @neg
  %unused : f32[2,4] = Exp(%n) @exp
  %ln : f32[2,4], %mean : f32[2,1], %inv : f32[2,1] = LayerNormalization(%x, %s) @ln
  %y : f32[2,4] = Add(%ln, %x) @add
  output %y
)");
  passes::DeadCode pass;
  auto r = pass.run(g);
  REQUIRE(r.ok());
  CHECK(*r);
  CHECK(pass.removed() == 2);
  // LayerNormalization stays: its Mean output is unused, Y is not.
  CHECK(ir::printGraph(g) == R"(graph "t" opset 20
  input %x : f32[2,4]
  input %s : f32[4]
  %ln : f32[2,4], %mean : f32[2,1], %inv : f32[2,1] = LayerNormalization(%x, %s) @ln
  %y : f32[2,4] = Add(%ln, %x) @add
  output %y
)");
  CHECK(g.values[g.findValue("y")].producer == 1);
  auto again = pass.run(g);
  REQUIRE(again.ok());
  CHECK_FALSE(*again);
}
