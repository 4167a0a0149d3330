// tile-index-elimination: every eliminated read of the corpus joint graphs is checked element by
// element -- the consumer reading the source through the composed map (and, for tile maps, the
// tile it lands in through Eq. 3's tile map) equals materialising the chain with the reference
// executor.
#include <catch2/catch.hpp>

#include <random>
#include <set>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/parser.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/passes/layout_pipeline.h"
#include "compiler/passes/load_model.h"
#include "compiler/passes/tile_index_elimination.h"
#include "compiler/profile/profile.h"
#include "compiler/ref/executor.h"
#include "tests/passes/paper_profile.h"
#include "tests/passes/test_graphs.h"

using namespace fbl;

namespace {

profile::HardwareProfile adreno() { return fbl::testing::paperAdreno(); }

ir::Tensor randomLike(const ir::Value& v, std::mt19937& rng) {
  ir::Tensor t(v.dtype, v.shape);
  std::uniform_real_distribution<double> f(-1, 1);
  std::uniform_int_distribution<int> i(0, 3);
  for (int64_t k = 0; k < t.numel(); ++k) t.set(k, ir::isFloat(v.dtype) ? f(rng) : i(rng));
  return t;
}

int64_t flatten(const std::vector<int64_t>& idx, const ir::Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

std::vector<int64_t> unflatten(int64_t f, const ir::Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = f % s[d];
    f /= s[d];
  }
  return idx;
}

struct Verified {
  int tileMaps = 0, indexMaps = 0, explicitReads = 0, transposed = 0;
};

// Materialises each read's chain with the executor and compares every element (or, with
// `sample`, that many random elements, and one read per distinct chain: llama-full's layers
// repeat).
Verified verifyReads(const ir::Graph& g, const passes::LayoutAssignment& a, int64_t sample = 0) {
  Verified out;
  std::mt19937 rng(11);
  ref::Executor ex(g);
  std::set<std::string> seen;
  for (const passes::ReadThrough& r : a.reads) {
    if (r.decision == passes::ReadThrough::Decision::kExplicit) {
      ++out.explicitReads;
      continue;
    }
    if (sample > 0 && !seen.insert(r.chainText + "#" + g.nodes[r.consumer].op + std::to_string(r.slot)).second) continue;
    const ir::Value& src = g.values[r.source];
    ir::Tensor s = randomLike(src, rng);
    ir::ValueId read = g.nodes[r.consumer].inputs[r.slot];
    auto got = ex.run({{r.source, s}}, {read});
    INFO(g.nodes[r.consumer].name << " input " << r.slot << " via " << r.chainText);
    REQUIRE(got.ok());
    const ir::Tensor& ref = (*got)[0];
    const ir::Shape& cs = g.values[read].shape;
    bool tiles = r.decision == passes::ReadThrough::Decision::kTileMap;
    bool allEqual = true;
    std::uniform_int_distribution<int64_t> pick(0, ref.numel() - 1);
    const int64_t count = sample > 0 ? std::min(sample, ref.numel()) : ref.numel();
    for (int64_t k = 0; k < count; ++k) {
      const int64_t f = sample > 0 ? pick(rng) : k;
      std::vector<int64_t> idx = unflatten(f, cs);
      std::vector<int64_t> at = r.view.apply(idx);
      double sign = r.sign ? static_cast<double>(layout::eval(*r.sign, idx)) : 1.0;
      allEqual = allEqual && ref.at(f) == sign * s.at(flatten(at, src.shape));
      if (!tiles) continue;
      // Eq. 3: the consumer's tile (of the operand's transpose for a transposed read) maps to
      // the source tile that holds the element.
      std::vector<int64_t> c = idx;
      if (r.transposedRead) std::swap(c[c.size() - 1], c[c.size() - 2]);
      c[c.size() - 2] /= r.tile.tileH;
      c[c.size() - 1] /= r.tile.tileW;
      std::vector<int64_t> want = at;
      want[want.size() - 2] /= r.tile.tileH;
      want[want.size() - 1] /= r.tile.tileW;
      allEqual = allEqual && r.tileMap.apply(c) == want;
    }
    CHECK(allEqual);
    (tiles ? out.tileMaps : out.indexMaps)++;
    out.transposed += r.transposedRead;
  }
  return out;
}

}  // namespace

TEST_CASE("tile-index-elimination: corpus reads equal their materialised chains", "[passes][layout-pipeline]") {
  auto p = adreno();
  for (const char* model : {"llama-tiny", "bert-tiny", "vit-tiny"}) {
    autodiff::TrainingGraph tg = fbl::testing::jointGraph(model);
    auto res = passes::runLayoutPipeline(tg.graph, p);
    INFO(model << ": " << (res.ok() ? "" : res.error().message));
    REQUIRE(res.ok());
    Verified v = verifyReads(tg.graph, res->assignment);
    WARN(model << ": reads verified element by element: " << v.tileMaps << " tile maps (" << v.transposed
               << " transposed), " << v.indexMaps << " index maps; " << v.explicitReads << " explicit");
    CHECK(v.tileMaps > 0);
  }
}

TEST_CASE("tile-index-elimination: llama-full's attention chains are tile maps", "[passes][layout-pipeline]") {
  auto p = adreno();
  autodiff::TrainingGraph tg = fbl::testing::jointGraph("llama-full");
  auto res = passes::runLayoutPipeline(tg.graph, p);
  REQUIRE(res.ok());
  const auto& a = res->assignment;
  const ir::Graph& g = tg.graph;
  bool gqa = false, heads = false, rope = false, ropeMirror = false, weightT = false;
  for (const auto& r : a.reads) {
    bool bwd = g.nodes[r.consumer].phase == ir::Phase::Backward;
    // The backward mirror reads gradients whose tiles are as wide as a head (64), which the
    // roll by 32 splits: eliminated as an element index map, not at tile granularity.
    ropeMirror = ropeMirror || (bwd && r.chainText.find("Roll") != std::string::npos &&
                                r.decision == passes::ReadThrough::Decision::kIndexMap);
    if (r.decision != passes::ReadThrough::Decision::kTileMap) continue;
    gqa = gqa || r.chainText.find("Expand") != std::string::npos;
    heads = heads || (r.chainText.find("Permute(0,2,1,3)") != std::string::npos && g.nodes[r.consumer].op == "MatMul");
    rope = rope || (!bwd && r.chainText.find("Roll") != std::string::npos);
    weightT = weightT || (r.transposedRead && g.values[r.source].kind == ir::ValueKind::Initializer);
  }
  CHECK(gqa);         // Unsqueeze . Expand . Reshape of K and V
  CHECK(heads);       // Reshape . Transpose into heads, read by the attention products
  CHECK(rope);        // Slice/Neg/Concat as one roll
  CHECK(ropeMirror);  // its backward mirror (SliceGrad/Neg/Add), one element index map
  CHECK(weightT);     // W^T read tile by tile from W
  Verified v = verifyReads(g, a, 2048);
  WARN("llama-full: distinct chains verified on 2048 random elements each: " << v.tileMaps << " tile maps ("
       << v.transposed << " transposed), " << v.indexMaps << " index maps; " << v.explicitReads << " explicit reads");
}

TEST_CASE("tile-index-elimination: a broken tile boundary falls back with its reason", "[passes][layout-pipeline]") {
  // hidden 48 split into 3 heads of 16, read by a product whose R-Tile is wider than a head:
  // boundary preservation fails for every tile wider than 16, so the source is reconfigured.
  auto p = adreno();
  auto g = ir::parseGraph(R"(graph "t" opset 20
  input %x : f32[64,128]
  init %w : f32[128,128]
  init %v : f32[64,64]
  const %s3 : i64[3] = [64,2,64]
  %h : f32[64,128] = MatMul(%x, %w) @proj
  %r : f32[64,2,64] = Reshape(%h, %s3) @split_heads
  %t : f32[2,64,64] = Transpose(%r) {perm=[1,0,2]} @heads
  %y : f32[2,64,64] = MatMul(%t, %v) @attn
  output %y
)");
  REQUIRE(g.ok());
  auto res = passes::runLayoutPipeline(*g, p);
  REQUIRE(res.ok());
  const auto& a = res->assignment;
  ir::NodeId attn = 3;
  REQUIRE(g->nodes[attn].name == "attn");
  const passes::ReadThrough* r = a.readAt(attn, 0);
  REQUIRE(r != nullptr);
  const passes::RTileEntry* e = a.rtileOf(r->source);
  REQUIRE(e != nullptr);
  if (r->decision == passes::ReadThrough::Decision::kTileMap) {
    CHECK(64 % e->tile().tileW == 0);
  } else {
    CHECK(r->decision == passes::ReadThrough::Decision::kExplicit);
    CHECK(r->reason.find("boundary") != std::string::npos);
  }
  // The checks themselves: a 128-wide tile breaks the head boundary.
  auto bad = layout::checkTilePropagation(r->view, {16, 128});
  CHECK_FALSE(bad.ok);
}

TEST_CASE("tile-index-elimination: a failing R-Tile is reconfigured to one the chain preserves",
          "[passes][layout-pipeline]") {
  // hidden 128 = 4 heads x 32. The source's tile is forced to 16x64 (as Eq. 2 might pick for the
  // projection alone): a head is 32 wide, so boundary preservation fails, and step 2 must move
  // the source to a surviving tile whose width divides 32.
  auto p = adreno();
  auto g = ir::parseGraph(R"(graph "t" opset 20
  input %x : f32[256,128]
  init %w : f32[128,128]
  init %v : f32[32,64]
  const %s3 : i64[3] = [256,4,32]
  %h : f32[256,128] = MatMul(%x, %w) @proj
  %r : f32[256,4,32] = Reshape(%h, %s3) @split_heads
  %t : f32[4,256,32] = Transpose(%r) {perm=[1,0,2]} @heads
  %y : f32[4,256,64] = MatMul(%t, %v) @attn
  output %y
)");
  REQUIRE(g.ok());
  passes::LayoutAssignment a;
  passes::ClassifyOperators classify(a);
  passes::AssignRTile assign(a, p);
  passes::TileIndexElimination eliminate(a, p);
  REQUIRE(classify.run(*g).ok());
  REQUIRE(assign.run(*g).ok());
  ir::ValueId h = g->findValue("h");
  REQUIRE(a.rtileOf(h) != nullptr);
  passes::RTileEntry& e = a.rtiles[a.values[h].rtile];
  auto verdicts = e.choice.verdicts;
  e.choice = passes::choiceForTile("h", e.choice.layout.extent, e.uses, 16, 64, p);
  e.choice.verdicts = verdicts;
  REQUIRE(eliminate.run(*g).ok());
  const passes::ReadThrough* r = a.readAt(3, 0);
  REQUIRE(r != nullptr);
  INFO(e.note << " / " << r->reason);
  CHECK(e.note.find("reconfigured from 16x64") != std::string::npos);
  CHECK(32 % e.tile().tileW == 0);
  CHECK(r->decision == passes::ReadThrough::Decision::kTileMap);
  // What the forced tile would have said.
  auto bad = layout::checkTilePropagation(r->view, {16, 64});
  CHECK_FALSE(bad.ok);
}
