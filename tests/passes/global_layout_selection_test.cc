// global-layout-selection: propagation through flexible operators, FTD-D chains and the greedy
// search's cost terms.
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/global_layout_selection.h"
#include "compiler/passes/layout_assignment_printer.h"
#include "compiler/passes/layout_pipeline.h"
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

// The lines of `text` from the one starting with `from` up to the one starting with `to`.
std::string section(const std::string& text, const std::string& from, const std::string& to) {
  size_t b = text.find("\n" + from), e = text.find("\n" + to);
  if (b == std::string::npos || e == std::string::npos || e < b) return "";
  return text.substr(b + 1, e - b);
}

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
  CHECK(section(passes::formatAssignment(*g, a), "R-Tiles (", "FTD-D chains (") == R"(R-Tiles (6):
  q [128,64]: 16x32 strips cols-along-x [Eq. 2 over 1 reductions]  anchor: read tile by tile by qk; packed at load
  k [128,64]: 16x32 strips cols-along-x [Eq. 2 over 1 reductions]  anchor: read tile by tile by qk; packed at load
  v [128,64]: 8x64 blocks 8x8->2x8 rows-along-x rows-along-x [Eq. 2 over 1 reductions]  anchor: read tile by tile by pv; packed at load
  s [128,128]: 16x16 strips cols-along-x [natural output tile of qk]  natural output tile of qk
  sc [128,128]: 16x16 strips cols-along-x [natural output tile of qk]  propagated from s through Mul
  p [128,128]: 16x32 strips cols-along-x [Eq. 2 over 1 reductions]  anchor: read tile by tile by pv; written tiled by softmax
  o [128,64]: 16x64 blocks 8x8->2x8 cols-along-x [natural output tile of pv]  natural output tile of pv
  r [128,64]: 16x64 blocks 8x8->2x8 cols-along-x [natural output tile of pv]  propagated from o through Relu
reads through transformations (1):
  qk#1 <- k: [128,64] | Permute(1,0): tile-map (transposed): tile map, read transposed (3 checks pass on the transpose)
      tile map [8,2] -> [8,2]: (i0, i1)
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
