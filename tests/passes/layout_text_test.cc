// The layout text form (compiler/passes/layout_text.h): the pipeline's decisions printed into
// the IR, read back to the same text and the same lowering on the corpus, layout passes run on a
// graph stated as text, and one-line errors for texts the graph or the profile contradict.
#include <catch2/catch.hpp>

#include <random>

#include "compiler/passes/layout_pipeline.h"
#include "compiler/passes/layout_text.h"
#include "compiler/plan/layout_lowering.h"
#include "compiler/plan/lowering_printer.h"
#include "compiler/profile/profile.h"
#include "tests/passes/test_graphs.h"

using namespace fbl;

namespace {

profile::HardwareProfile adreno830() {
  auto p = profile::loadProfile(FBL_SOURCE_DIR "/profiles/adreno-830.json");
  REQUIRE(p.ok());
  return *p;
}

passes::LayoutGraph parsed(const std::string& text, const profile::HardwareProfile& p) {
  auto lg = passes::parseLayoutGraph(text, p, "layout.ir");
  INFO((lg.ok() ? std::string() : lg.error().message));
  REQUIRE(lg.ok());
  return std::move(lg).value();
}

std::string parseError(const std::string& text, const profile::HardwareProfile& p) {
  auto lg = passes::parseLayoutGraph(text, p, "layout.ir");
  return lg.ok() ? std::string("(read without error)") : lg.error().message;
}

// The lowering passes over a copy of g under assignment a, as their dumps print it.
std::string lowered(const ir::Graph& g, const passes::LayoutAssignment& a) {
  ir::Graph copy = g;
  const std::vector<ir::ValueId> mustExist;
  plan::LoweringOptions options;
  options.storage.images = true;
  plan::LoweringPasses lowering(a, mustExist, options);
  passes::PassManager pm;
  lowering.addTo(pm);
  auto runs = pm.run(copy);
  INFO((runs.ok() ? std::string() : runs.error().message));
  REQUIRE(runs.ok());
  const plan::LayoutLowering& l = lowering.result();
  return plan::formatLoweredReads(copy, l) + plan::formatFusion(copy, l) + plan::formatStorage(copy, l);
}

const std::string kProduct = fbl::testing::kProductAndGradient;

}  // namespace

TEST_CASE("layout text: the pipeline's decisions written into the IR", "[passes][layout-text]") {
  auto p = adreno830();
  ir::Graph g = fbl::testing::parsedGraph(kProduct.c_str());
  auto res = passes::runLayoutPipeline(g, p);
  REQUIRE(res.ok());
  // One R-Tile of x serves both products: the forward walks its rows, dW reads its transpose
  // tile by tile; the Transpose runs nothing. Each product's output is written in the tile its
  // operands give it.
  CHECK(passes::printLayoutGraph(g, res->assignment) == R"(graph "t" opset 20
  input %x : f32[64,128] <rtile 16x32 strips cols-along-x anchor written>
  input %dy : f32[64,256] <rtile 16x32 strips rows-along-x anchor written>
  init %w : f32[128,256] <rtile 16x32 strips rows-along-x anchor written>
  %y : f32[64,256] <rtile 16x32 strips cols-along-x written> = MatMul(%x, %w) @fwd <FTD-D>
  bwd %xt : f32[128,64] = Transpose(%x) {perm=[1,0]} @xt <FTI-D eliminated>
  bwd %dw : f32[128,256] <rtile 32x32 strips cols-along-x written> = MatMul(%xt <tile-map 16x32 transposed>, %dy) @dw <FTD-D>
  output %y
  output %dw
)");
}

TEST_CASE("layout text: corpus assignments read back to the same text and the same lowering",
          "[passes][layout-text]") {
  auto p = adreno830();
  for (const char* model : {"llama-tiny", "bert-tiny", "vit-tiny"}) {
    INFO(model);
    autodiff::TrainingGraph tg = fbl::testing::jointGraph(model);
    auto res = passes::runLayoutPipeline(tg.graph, p);
    REQUIRE(res.ok());
    // Initializer data too: a Mul by a frozen parameter is a Scale (FTI-C) only when its data is known.
    ir::PrintOptions full;
    full.maxInlineElements = -1;
    full.initializerData = true;
    const std::string text = passes::printLayoutGraph(tg.graph, res->assignment, full);
    CHECK(text.find("tile-map") != std::string::npos);
    passes::LayoutGraph back = parsed(text, p);
    CHECK(passes::printLayoutGraph(back.graph, back.assignment, full) == text);
    CHECK(lowered(back.graph, back.assignment) == lowered(tg.graph, res->assignment));
  }
}

TEST_CASE("layout text: tile-index-elimination and layout-assignment on a stated assignment",
          "[passes][layout-text]") {
  auto p = adreno830();
  // The state after assign-rtile, stated: x's R-Tile serves the forward product, and d reads x
  // through a Reshape that moves half rows across tile rows.
  passes::LayoutGraph lg = parsed(R"(graph "t" opset 20
  input %x : f32[64,128] <rtile 16x32 strips cols-along-x anchor>
  input %v : f32[64,32] <rtile 16x32 strips rows-along-x anchor>
  init %w : f32[128,256] <rtile 16x32 strips rows-along-x anchor>
  const %shape : i64[2] = [128,64]
  %y : f32[64,256] = MatMul(%x, %w) @fwd <FTD-D>
  bwd %xr : f32[128,64] = Reshape(%x, %shape) @xr <FTI-D>
  bwd %d : f32[128,32] = MatMul(%xr, %v) @d <FTD-D>
  output %y
  output %d
)", p);
  passes::TileIndexElimination eliminate(lg.assignment, p);
  passes::GlobalLayoutSelection select(lg.assignment, p);
  passes::LayoutAssignmentPass finish(lg.assignment);
  passes::PassManager pm;
  pm.add(eliminate);
  pm.add(select);
  pm.add(finish);
  auto runs = pm.run(lg.graph);
  INFO((runs.ok() ? std::string() : runs.error().message));
  REQUIRE(runs.ok());
  // No tile map survives the Reshape (a row of xr is half a row of x), so its read is explicit
  // and the Reshape runs as one conversion; the anchors are written tiled, and each product
  // writes its output in its natural tile.
  CHECK(passes::printLayoutGraph(lg.graph, lg.assignment) == R"(graph "t" opset 20
  input %x : f32[64,128] <rtile 16x32 strips cols-along-x anchor written>
  input %v : f32[64,32] <rtile 16x32 strips rows-along-x anchor written>
  init %w : f32[128,256] <rtile 16x32 strips rows-along-x anchor written>
  const %shape : i64[2] = [128,64]
  %y : f32[64,256] <rtile 16x32 strips cols-along-x written> = MatMul(%x, %w) @fwd <FTD-D>
  bwd %xr : f32[128,64] = Reshape(%x, %shape) @xr <FTI-D explicit "read by d: dimension-dependency with tile 16x32: the tile's rows is split by a division or modulo: i0 * 8 + i1 / 2">
  bwd %d : f32[128,32] <rtile 16x32 strips cols-along-x written> = MatMul(%xr <explicit "dimension-dependency with tile 16x32: the tile's rows is split by a division or modulo: i0 * 8 + i1 / 2" convert>, %v) @d <FTD-D>
  output %y
  output %d
)");
}

TEST_CASE("layout text: texts the graph or the profile contradict are refused in one line",
          "[passes][layout-text]") {
  auto p = adreno830();
  // kProduct with each (from, to) edit made at the first place `from` stands, and the error.
  struct Case {
    std::vector<std::pair<std::string, std::string>> edits;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{{"@fwd", "@fwd <FTI-C>"}}, "layout.ir:5: <FTI-C>: node fwd (MatMul) is FTD-D, not FTI-C"},
      {{{"f32[64,128]", "f32[64,128] <rtile 16x32 blocks 4x8:1x8 cols-along-x>"}},
       "layout.ir:2: <rtile 16x32 blocks 4x8:1x8 cols-along-x>: on profile 'adreno-830' a 16x32 tile of %x is 16x32 "
       "strips cols-along-x"},
      {{{"f32[64,128]", "f32[64,128] <rtile 16x32 strips rows-along-x>"}},
       "layout.ir:2: <rtile 16x32 strips rows-along-x>: on profile 'adreno-830' a 16x32 tile of %x is 16x32 strips "
       "cols-along-x"},
      {{{"f32[64,128]", "f32[64,128] <rtile 16by32 strips>"}},
       "layout.ir:2: <rtile 16by32 strips>: '16by32' is not a tile (HxW)"},
      {{{"f32[64,128]", "f32[64,128] <tiled>"}},
       "layout.ir:2: <tiled>: expected rtile, anchor, written or convert but found 'tiled'"},
      {{{"f32[64,128]", "f32[64,128] <written>"}}, "layout.ir:2: <written>: %x is linear: only an R-Tile is written tiled"},
      {{{"f32[128,256] = M", "f32[128,256] <anchor> = M"}},
       "layout.ir:7: <anchor>: %dw is read tile by tile by no FTD-D operator: it is not an anchor"},
      {{{"MatMul(%x, %w)", "MatMul(%x <index-map>, %w)"}},
       "layout.ir:5: <index-map>: input 0 of fwd reads %x directly, through no movement op"},
      {{{"MatMul(%x, %w)", "Pad(%x, _ <index-map>, %w)"}}, "layout.ir:5: <index-map>: input 1 of fwd is omitted"},
      {{{"MatMul(%xt, %dy)", "MatMul(%xt <explicit \"e\">, %dy)"}, {"@xt", "@xt <FTI-D eliminated>"}},
       "layout.ir:6: <FTI-D eliminated>: node xt is not eliminated: it is read by dw: e"},
      {{{"@dw", "@dw <FTD-D eliminated>"}},
       "layout.ir:7: <FTD-D eliminated>: node dw is folded into no read: it cannot be eliminated"},
      {{{"%x : f32[64,128]", "%x : f32[64,128] <rtile 16x32 strips cols-along-x>"},
        {"MatMul(%xt", "MatMul(%xt <tile-map 16x32>"}},
       "layout.ir:7: <tile-map 16x32>: the tile map of input 0 of dw is read transposed"},
      {{{"MatMul(%xt, %dy)", "MatMul(%xt <tile-map 16x32>, %dy)"}},
       "layout.ir:7: <tile-map 16x32>: %x is stored linear, not in 16x32 tiles"}};
  for (const Case& c : cases) {
    std::string text = kProduct;
    for (const auto& [from, to] : c.edits) {
      const size_t at = text.find(from);
      REQUIRE(at != std::string::npos);
      text.replace(at, from.size(), to);
    }
    INFO(text);
    CHECK(parseError(text, p) == c.error);
  }
}

TEST_CASE("layout text: random annotations are read or refused in one line", "[passes][layout-text]") {
  auto p = adreno830();
  // Phrases of the grammar by where they stand, and stray words; tiles the profile folds
  // otherwise, shapes that cannot share, and words out of place are refused.
  const std::vector<std::string> valueWords = {
      "rtile 16x32 strips cols-along-x", "rtile 16x32 strips rows-along-x", "rtile 32x32 strips cols-along-x",
      "rtile 8x64 blocks 8x8:2x8 cols-along-x", "rtile of %x", "rtile of %y", "anchor", "written",
      "convert \"c\""};
  const std::vector<std::string> inputWords = {"tile-map 16x32", "tile-map 16x32 transposed", "tile-map 32x32",
                                               "index-map", "explicit \"e\"", "convert", "convert \"c\""};
  const std::vector<std::string> nodeWords = {"FTD-D", "FTI-D", "FTI-D eliminated", "FTI-D explicit \"e\"",
                                              "FTD-C", "FTD-D eliminated"};
  const std::vector<std::string> stray = {"rtile", "of", "%x", "%nope", "0x4", "3x5", "1000000x4", "4x1000000",
                                          "blocks", ":", "x", "(", "[", "=", "\"s\"", "tile-map", "strips"};
  struct Spot {
    std::string after;
    const std::vector<std::string>* words;
  };
  const std::vector<Spot> spots = {{"%x : f32[64,128]", &valueWords}, {"%dy : f32[64,256]", &valueWords},
                                   {"%w : f32[128,256]", &valueWords}, {"%y : f32[64,256]", &valueWords},
                                   {"%xt : f32[128,64]", &valueWords}, {"%dw : f32[128,256]", &valueWords},
                                   {"MatMul(%x", &inputWords},         {"(%xt", &inputWords},
                                   {"@fwd", &nodeWords},               {"@xt", &nodeWords},
                                   {"@dw", &nodeWords}};
  std::mt19937 rng(7);
  int read = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = kProduct;
    const int notes = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < notes; ++k) {
      const Spot& spot = spots[rng() % spots.size()];
      std::string note;
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) {
        const std::vector<std::string>& from = rng() % 5 == 0 ? stray : *spot.words;
        note += (i ? " " : "") + from[rng() % from.size()];
      }
      const size_t end = text.find(spot.after) + spot.after.size();
      if (text.compare(end, 2, " <") == 0) continue;  // one annotation a place
      text.insert(end, " <" + note + ">");
    }
    auto lg = passes::parseLayoutGraph(text, p, "fuzz.ir");
    if (lg.ok()) {
      ++read;
      // What was read prints and reads back to itself.
      const std::string printed = passes::printLayoutGraph(lg->graph, lg->assignment);
      auto again = passes::parseLayoutGraph(printed, p, "printed.ir");
      INFO(text << "\nprinted:\n" << printed);
      REQUIRE(again.ok());
      CHECK(passes::printLayoutGraph(again->graph, again->assignment) == printed);
    } else {
      ++refused;
      INFO(text);
      CHECK(lg.error().message.find('\n') == std::string::npos);
      CHECK(lg.error().message.rfind("fuzz.ir:", 0) == 0);
    }
  }
  INFO(read << " read, " << refused << " refused");
  CHECK(read > 50);
  CHECK(refused > 1000);
}
