// global-layout-selection: propagation through flexible operators, FTD-D chains and the greedy
// search's cost terms.
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/global_layout_selection.h"
#include "compiler/passes/layout_pipeline.h"
#include "compiler/passes/layout_text.h"
#include "compiler/profile/profile.h"
#include "tests/passes/paper_profile.h"

using namespace fbl;

namespace {

profile::HardwareProfile adreno() { return fbl::testing::paperAdreno(); }

// One attention head: S = Q K^T, P = softmax(S * c), O = P V.
const char* kAttention = R"(graph "t" opset 20
  input %q : f32[128,64]
  input %k : f32[128,64]
  input %v : f32[128,64]
  const %c : f32[] = [0.125]
  %kt : f32[64,128] = Transpose(%k) {perm=[1,0]} @kt
  %s : f32[128,128] = MatMul(%q, %kt) @qk
  %sc : f32[128,128] = Mul(%s, %c) @scale
  %p : f32[128,128] = Softmax(%sc) {axis=-1} @softmax
  %o : f32[128,64] = MatMul(%p, %v) @pv
  %r : f32[128,64] = Relu(%o) @relu
  output %r
)";

}  // namespace

TEST_CASE("global-layout-selection: Q*K^T and P*V form one chain, layouts propagate",
          "[passes][layout-pipeline]") {
  auto p = adreno();
  auto g = ir::parseGraph(kAttention);
  REQUIRE(g.ok());
  auto res = passes::runLayoutPipeline(*g, p);
  REQUIRE(res.ok());
  const auto& a = res->assignment;
  REQUIRE(a.chains.size() == 1);
  CHECK(a.chains[0].ops.size() == 2);
  CHECK(a.chains[0].costAfter <= a.chains[0].costBefore);
  // P is the anchor, and Softmax writes it tiled; each product's output tile propagates through
  // the flexible op after it (Mul, Relu); K^T is read through a transposed tile map.
  CHECK(passes::printLayoutGraph(*g, a) == R"(graph "t" opset 20
  input %q : f32[128,64] <rtile 16x32 strips cols-along-x anchor written>
  input %k : f32[128,64] <rtile 16x32 strips cols-along-x anchor written>
  input %v : f32[128,64] <rtile 8x64 blocks 8x8:2x8 rows-along-x anchor written>
  const %c : f32[] = [0.125]
  %kt : f32[64,128] = Transpose(%k) {perm=[1,0]} @kt <FTI-D eliminated>
  %s : f32[128,128] <rtile 16x16 strips cols-along-x written> = MatMul(%q, %kt <tile-map 16x32 transposed>) @qk <FTD-D>
  %sc : f32[128,128] <rtile of %s written> = Mul(%s, %c) @scale <FTI-C>
  %p : f32[128,128] <rtile 16x32 strips cols-along-x anchor written> = Softmax(%sc) {axis=-1} @softmax <FTD-C>
  %o : f32[128,64] <rtile 16x64 blocks 8x8:2x8 cols-along-x written> = MatMul(%p, %v) @pv <FTD-D>
  %r : f32[128,64] <rtile of %o written> = Relu(%o) @relu <FTD-C>
  output %r
)");
}

TEST_CASE("global-layout-selection: cost terms", "[passes][layout-pipeline]") {
  auto p = adreno();
  CHECK(passes::conversionCost(2048, p) == Approx(2 * passes::conversionCost(1024, p)));
  layout::TensorExtent e{1, 512, 2048};
  std::vector<layout::ReductionUse> rows = {{layout::ReductionDir::kAlongRow, 1, "a"}};
  std::vector<layout::ReductionUse> both = {{layout::ReductionDir::kAlongRow, 1, "a"},
                                            {layout::ReductionDir::kAlongColumn, 1, "b"}};
  auto best = layout::selectRTile({"t", e, rows}, p);
  REQUIRE(best.ok());
  // With one use the time model is bytes / performance, so Eq. 2's winner is (up to its tie
  // tolerance) the cheapest survivor.
  double bestCost = passes::tensorCost(*best, rows, p);
  for (const auto& t : passes::survivingTiles(*best, rows, p)) {
    auto c = passes::choiceForTile("t", e, rows, t.tileH, t.tileW, p);
    CHECK(passes::tensorCost(c, rows, p) >= bestCost * (1 - 2 * layout::kScoreTieTolerance));
  }
  // Two directions cost more than one.
  auto two = passes::choiceForTile("t", e, both, best->layout.tile.tileH, best->layout.tile.tileW, p);
  CHECK(passes::tensorCost(two, both, p) > 0);
  // A conversion costs more than streaming the tensor once in its best layout.
  CHECK(passes::conversionCost(4 * e.rows * e.cols, p) > passes::tensorCost(*best, rows, p) * 0.5);
}
