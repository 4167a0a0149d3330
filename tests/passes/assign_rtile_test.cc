// assign-rtile: anchors, the directions of their uses through views, and Eq. 2's choice (checked
// against layout::selectRTile called on the problem the test builds by hand).
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/profile/profile.h"
#include "tests/passes/test_graphs.h"

using namespace fbl;
using layout::ReductionDir;

TEST_CASE("assign-rtile: a tensor read forward and backward gets one tile over both reductions",
          "[passes][layout-pipeline]") {
  auto p = profile::loadProfile(FBL_SOURCE_DIR "/profiles/adreno-830.json");
  REQUIRE(p.ok());
  auto g = ir::parseGraph(fbl::testing::kProductAndGradient);
  REQUIRE(g.ok());
  passes::LayoutAssignment a;
  passes::ClassifyOperators classify(a);
  passes::AssignRTile assign(a, *p);
  REQUIRE(classify.run(*g).ok());
  auto changed = assign.run(*g);
  REQUIRE(changed.ok());
  CHECK(*changed);
  ir::ValueId x = g->findValue("x"), w = g->findValue("w");
  const passes::RTileEntry* ex = a.rtileOf(x);
  const passes::RTileEntry* ew = a.rtileOf(w);
  REQUIRE(ex != nullptr);
  REQUIRE(ew != nullptr);
  REQUIRE(ex->uses.size() == 2);
  CHECK(ex->uses[0].dir == ReductionDir::kAlongRow);     // Y = X W walks X's rows
  CHECK(ex->uses[1].dir == ReductionDir::kAlongColumn);  // X^T dY walks X's columns
  REQUIRE(ew->uses.size() == 1);
  CHECK(ew->uses[0].dir == ReductionDir::kAlongColumn);
  // The same problem handed to selectRTile directly.
  layout::RTileProblem prob{"x", {1, 64, 128}, ex->uses};
  auto direct = layout::selectRTile(prob, *p);
  REQUIRE(direct.ok());
  CHECK(direct->layout.tile.tileH == ex->tile().tileH);
  CHECK(direct->layout.tile.tileW == ex->tile().tileW);
  CHECK(a.values[x].anchor);
  CHECK(a.values[g->findValue("dy")].anchor);
  // The weight of a use: the consumer's work.
  CHECK(passes::reductionWeight(*g, g->nodes[0], 0) == 2.0 * 64 * 256 * 128);
}

TEST_CASE("assign-rtile: no surviving candidate keeps the tensor linear, with the reason", "[passes][layout-pipeline]") {
  auto p = profile::loadProfile(FBL_SOURCE_DIR "/profiles/adreno-830.json");
  REQUIRE(p.ok());
  auto g = ir::parseGraph(R"(graph "t" opset 20
  input %x : f32[3,5]
  input %x2 : f32[3,5]
  init %w : f32[5,7]
  %y : f32[3,7] = MatMul(%x, %w) @mm
  %y2 : f32[3,7] = MatMul(%x2, %w) @mm2
  output %y
  output %y2
)");
  REQUIRE(g.ok());
  passes::LayoutAssignment a;
  passes::ClassifyOperators classify(a);
  passes::AssignRTile assign(a, *p);
  REQUIRE(classify.run(*g).ok());
  REQUIRE(assign.run(*g).ok());
  ir::ValueId x = g->findValue("x");
  CHECK(a.rtileOf(x) == nullptr);
  CHECK(a.values[x].why.find("no R-Tile candidate survives") != std::string::npos);
  // x2 poses the same problem (solved once): its reason names x2, not x.
  const std::string& why2 = a.values[g->findValue("x2")].why;
  CHECK(why2.find("no R-Tile candidate survives") != std::string::npos);
  CHECK(why2.find("tensor 'x2'") != std::string::npos);
  CHECK(a.values[x].why.find("tensor 'x'") != std::string::npos);
}
