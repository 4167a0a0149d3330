#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include <catch2/catch.hpp>

#include "compiler/layout/rtile.h"

using namespace fbl::layout;
using fbl::profile::AccessPattern;
using fbl::profile::AccessTable;
using fbl::profile::HardwareProfile;

namespace {

struct Throughputs {
  double row, column, block4, block8;
};

// A hand-made profile: one table row, the same at every thread count.
HardwareProfile handProfile(int wave, int64_t l1, fbl::profile::TextureBlock block, Throughputs t) {
  HardwareProfile p;
  p.name = "hand";
  p.device = "hand";
  p.waveSize = wave;
  p.image2dMaxWidth = p.image2dMaxHeight = 16384;
  p.texelFormats = {"RGBA/FLOAT"};
  p.l1TextureCacheBytes = l1;
  p.cacheLineBytes = 64;
  p.textureBlock = block;
  p.l2CacheBytes = 1 << 20;
  p.computeUnits = 1;
  AccessTable table;
  table.unit = "relative";
  table.threads = {1, 64};
  table.throughput[AccessPattern::kRow] = {t.row, t.row};
  table.throughput[AccessPattern::kColumn] = {t.column, t.column};
  table.throughput[AccessPattern::kBlock4] = {t.block4, t.block4};
  table.throughput[AccessPattern::kBlock8] = {t.block8, t.block8};
  p.accessTable = table;
  return p;
}

// Rows are cheap, columns expensive, blocks in between but better than the average of the two:
// the regime the paper describes for mobile texture caches.
HardwareProfile mobileLike() { return handProfile(64, 16384, {2, 8}, {3.0, 1.0, 2.5, 2.6}); }

const CandidateVerdict& verdictFor(const std::vector<CandidateVerdict>& vs, int64_t h, int64_t w) {
  auto it = std::find_if(vs.begin(), vs.end(), [&](const auto& v) { return v.tileH == h && v.tileW == w; });
  REQUIRE(it != vs.end());
  return *it;
}

RTileProblem problem(int64_t rows, int64_t cols, std::vector<ReductionDir> dirs, int64_t batch = 1) {
  RTileProblem p{"t", {batch, rows, cols}, {}};
  for (ReductionDir d : dirs) p.uses.push_back({d, 1.0, "op"});
  return p;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Naive: padded positions that hold no logical element, over logical elements.
double naivePadding(int64_t th, int64_t tw, const TensorExtent& e) {
  int64_t pr = ceilDiv(e.rows, th) * th, pc = ceilDiv(e.cols, tw) * tw, empty = 0;
  for (int64_t r = 0; r < pr; ++r)
    for (int64_t c = 0; c < pc; ++c)
      if (r >= e.rows || c >= e.cols) ++empty;
  return static_cast<double>(empty) / static_cast<double>(e.rows * e.cols);
}

// Every padded element maps inside the texture, no two share a texel lane, and the texture has
// exactly as many lanes as padded elements: a bijection.
void requireBijection(const RTileLayout& l) {
  int64_t w = l.textureWidth(), h = l.textureHeight();
  REQUIRE(w * h * 4 == l.extent.batch * l.paddedRows() * l.paddedCols());
  std::vector<char> seen(static_cast<size_t>(w * h * 4), 0);
  for (int64_t b = 0; b < l.extent.batch; ++b)
    for (int64_t r = 0; r < l.paddedRows(); ++r)
      for (int64_t c = 0; c < l.paddedCols(); ++c) {
        TexelCoord t = l.map(b, r, c);
        REQUIRE(t.x >= 0);
        REQUIRE(t.x < w);
        REQUIRE(t.y >= 0);
        REQUIRE(t.y < h);
        REQUIRE(t.lane >= 0);
        REQUIRE(t.lane < 4);
        char& s = seen[static_cast<size_t>((t.y * w + t.x) * 4 + t.lane)];
        REQUIRE(s == 0);
        s = 1;
      }
}

}  // namespace

TEST_CASE("C1 removes tiles that break the RGBA lanes or the wave size", "[rtile]") {
  HardwareProfile p = mobileLike();
  auto vs = pruneCandidates(problem(1024, 1024, {ReductionDir::kAlongRow}), p);
  const auto& isa = verdictFor(vs, 64, 2);
  REQUIRE(isa.failed == Constraint::kC1Isa);
  REQUIRE_FALSE(isa.reason.empty());
  const auto& wave = verdictFor(vs, 4, 32);  // 32 texels, wave 64
  REQUIRE(wave.failed == Constraint::kC1Wave);
  REQUIRE(wave.reason.find("64") != std::string::npos);
  for (const auto& v : vs)
    if (v.failed == Constraint::kNone) REQUIRE((v.tileH * v.tileW / 4) % p.waveSize == 0);
}

TEST_CASE("C2 removes tiles that overflow L1 or cover texture blocks partially", "[rtile]") {
  HardwareProfile p = mobileLike();  // L1 16 KiB, texture block 2x8 texels
  auto vs = pruneCandidates(problem(1024, 1024, {ReductionDir::kAlongRow}), p);
  const auto& big = verdictFor(vs, 128, 64);  // 32 KiB of floats
  REQUIRE(big.failed == Constraint::kC2Cache);
  REQUIRE(big.reason.find("16384") != std::string::npos);
  const auto& narrow = verdictFor(vs, 64, 16);  // 4 texels wide: half a texture block
  REQUIRE(narrow.failed == Constraint::kC2Align);
  REQUIRE_FALSE(narrow.reason.empty());
  for (const auto& v : vs) {
    if (v.failed != Constraint::kNone) continue;
    TileGeometry g = tileGeometry(v.tileH, v.tileW, p);
    REQUIRE(g.rectH * g.rectW * 16 <= p.l1TextureCacheBytes);
    REQUIRE(g.rectH % p.textureBlock.h == 0);
    REQUIRE(g.rectW % p.textureBlock.w == 0);
  }
}

TEST_CASE("C3 removes tiles padding more than 10%", "[rtile]") {
  HardwareProfile p = handProfile(8, 32768, {1, 4}, {3, 1, 2.5, 2.5});
  RTileProblem prob = problem(100, 128, {ReductionDir::kAlongRow});
  auto vs = pruneCandidates(prob, p);
  const auto& padded = verdictFor(vs, 64, 16);  // 100 rows -> 128
  REQUIRE(padded.failed == Constraint::kC3Padding);
  REQUIRE(padded.reason.find("28.0%") != std::string::npos);
  REQUIRE(verdictFor(vs, 4, 16).failed == Constraint::kNone);  // 100 = 25 x 4
  for (const auto& v : vs)
    if (v.failed == Constraint::kNone) REQUIRE(naivePadding(v.tileH, v.tileW, prob.extent) <= 0.10);
}

TEST_CASE("padding ratio matches a naive count", "[rtile]") {
  for (TensorExtent e : {TensorExtent{1, 100, 128}, TensorExtent{1, 7, 33}, TensorExtent{3, 64, 50}})
    for (int64_t th : {1, 4, 8, 64})
      for (int64_t tw : {4, 16, 32, 128}) REQUIRE(paddingRatio(th, tw, e) == Approx(naivePadding(th, tw, e)));
}

TEST_CASE("rows-only consumers get row strips, row+column consumers get a 2D blocked tile", "[rtile]") {
  HardwareProfile p = mobileLike();
  // By the cost's definition (rtile_cost.h): a strip scores row/column for a row walk and 1 for a
  // column walk; a blocked tile scores block8/column for either. With no padding,
  // rows only: strips 3.0 > blocked 2.6 by more than the tie tolerance;
  // rows+columns: strips 3.0 + 1.0 < blocked 2.6 + 2.6.
  REQUIRE(3.0 > 2.6 * (1 + kScoreTieTolerance));
  REQUIRE(3.0 + 1.0 < 2 * 2.6 * (1 - kScoreTieTolerance));

  auto rows = selectRTile(problem(1024, 1024, {ReductionDir::kAlongRow}), p);
  REQUIRE(rows.ok());
  REQUIRE(rows->layout.tile.intra == IntraMapping::kRowStrips);
  REQUIRE(rows->layout.tile.tileW / 4 <= p.textureBlock.w);

  auto both = selectRTile(problem(1024, 1024, {ReductionDir::kAlongRow, ReductionDir::kAlongColumn}), p);
  REQUIRE(both.ok());
  const TileGeometry& t = both->layout.tile;
  REQUIRE(t.intra == IntraMapping::kBlocked);
  REQUIRE(t.tileH > 1);
  REQUIRE(t.tileW / 4 > p.textureBlock.w);
  REQUIRE(std::abs(std::log2(static_cast<double>(t.tileH) / t.tileW)) <= 2);  // square-ish

  // The choice is an argmax: no survivor scores more than the tie tolerance above it.
  for (const auto* c : {&rows.value(), &both.value()}) {
    RTileProblem prob = problem(1024, 1024, c == &rows.value() ? std::vector{ReductionDir::kAlongRow}
                                                               : std::vector{ReductionDir::kAlongRow,
                                                                             ReductionDir::kAlongColumn});
    for (const auto& v : c->verdicts) {
      if (v.failed != Constraint::kNone) continue;
      double s = tileTraversalPerformance(tileGeometry(v.tileH, v.tileW, p), prob.extent, prob.uses, p).score;
      REQUIRE(s <= c->cost.score / (1 - kScoreTieTolerance) + 1e-12);
    }
  }
}

TEST_CASE("inter-tile order puts the more-traversed dimension along x", "[rtile]") {
  HardwareProfile p = mobileLike();
  auto rows = selectRTile(problem(512, 2048, {ReductionDir::kAlongRow}), p);
  REQUIRE(rows.ok());
  REQUIRE(rows->layout.inter == InterOrder::kColsAlongX);
  auto cols = selectRTile(problem(2048, 512, {ReductionDir::kAlongColumn}), p);
  REQUIRE(cols.ok());
  REQUIRE(cols->layout.inter == InterOrder::kRowsAlongX);
  // Direct: a weighted column walk over more tiles than the row walk wins x.
  TileGeometry g = tileGeometry(32, 64, p);
  TensorExtent e{1, 4096, 256};
  REQUIRE(chooseInterOrder(g, e, {{ReductionDir::kAlongRow, 1, ""}, {ReductionDir::kAlongColumn, 1, ""}}) ==
          InterOrder::kRowsAlongX);  // 128 tiles down vs 4 across
  REQUIRE(chooseInterOrder(g, e, {{ReductionDir::kAlongRow, 100, ""}, {ReductionDir::kAlongColumn, 1, ""}}) ==
          InterOrder::kColsAlongX);
}

TEST_CASE("selection is deterministic and stable under small measurement noise", "[rtile]") {
  HardwareProfile p = mobileLike();
  RTileProblem prob = problem(768, 3072, {ReductionDir::kAlongRow, ReductionDir::kAlongColumn});
  auto a = selectRTile(prob, p), b = selectRTile(prob, p);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->layout.tile.tileH == b->layout.tile.tileH);
  REQUIRE(a->layout.tile.tileW == b->layout.tile.tileW);
  REQUIRE(a->cost.score == b->cost.score);
  // +-2% on every entry (below the tie tolerance) leaves the choice alone.
  HardwareProfile noisy = p;
  int i = 0;
  for (auto& [pattern, values] : noisy.accessTable->throughput)
    for (double& v : values) v *= (i++ % 2) ? 1.02 : 0.98;
  auto c = selectRTile(prob, noisy);
  REQUIRE(c.ok());
  REQUIRE(c->layout.tile.tileH == a->layout.tile.tileH);
  REQUIRE(c->layout.tile.tileW == a->layout.tile.tileW);
}

TEST_CASE("selection on the measured pocl-cpu profile is repeatable", "[rtile]") {
  std::string path = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  auto p = fbl::profile::loadProfile(path);
  REQUIRE(p.ok());
  REQUIRE(p->accessTable);  // measured (profiles/pocl-cpu.json's provenance)
  RTileProblem prob = problem(2048, 2048, {ReductionDir::kAlongColumn, ReductionDir::kAlongRow});
  auto a = selectRTile(prob, *p), b = selectRTile(prob, *p);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->layout.tile.tileH == b->layout.tile.tileH);
  REQUIRE(a->layout.tile.tileW == b->layout.tile.tileW);
  REQUIRE(a->layout.inter == b->layout.inter);
}

TEST_CASE("the index map is a bijection onto the padded extent", "[rtile]") {
  HardwareProfile p = mobileLike();
  HardwareProfile cpu = handProfile(8, 32768, {1, 4}, {3, 1, 2.5, 2.5});
  struct Case {
    const HardwareProfile* prof;
    int64_t th, tw;
    TensorExtent e;
  };
  for (const Case& k : {Case{&p, 16, 32, {1, 40, 70}}, Case{&p, 16, 128, {2, 33, 200}}, Case{&p, 32, 64, {1, 64, 64}},
                        Case{&cpu, 8, 16, {3, 17, 31}}, Case{&cpu, 8, 64, {1, 24, 130}}, Case{&cpu, 4, 32, {2, 9, 9}}}) {
    TileGeometry g = tileGeometry(k.th, k.tw, *k.prof);
    for (InterOrder o : {InterOrder::kColsAlongX, InterOrder::kRowsAlongX}) {
      INFO(k.th << "x" << k.tw << " " << intraMappingName(g.intra) << " " << interOrderName(o));
      requireBijection(RTileLayout{k.e, g, o});
    }
  }
}

TEST_CASE("a blocked tile keeps each logical block inside one texture cache block", "[rtile]") {
  HardwareProfile p = mobileLike();
  TileGeometry g = tileGeometry(32, 64, p);
  REQUIRE(g.intra == IntraMapping::kBlocked);
  REQUIRE(g.lh * g.lw == 4 * g.blockH * g.blockW);
  RTileLayout l{{1, 32, 64}, g, InterOrder::kColsAlongX};
  // A logical column walk inside a logical block (the paper's Z path) touches one cache block.
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t c = 0; c < 64; ++c) {
      TexelCoord t = l.map(0, r, c);
      int64_t physical = (t.y / p.textureBlock.h) * 1000 + t.x / p.textureBlock.w;
      TexelCoord anchor = l.map(0, r / g.lh * g.lh, c / g.lw * g.lw);
      int64_t expected = (anchor.y / p.textureBlock.h) * 1000 + anchor.x / p.textureBlock.w;
      REQUIRE(physical == expected);
    }
}

TEST_CASE("R-Tile reports unusable inputs as one-line errors", "[rtile]") {
  HardwareProfile p = mobileLike();
  auto none = selectRTile(RTileProblem{"w_q", {1, 64, 64}, {}}, p);
  REQUIRE_FALSE(none.ok());
  REQUIRE(none.error().message.find("w_q") != std::string::npos);
  HardwareProfile pending = p;
  pending.accessTable.reset();
  auto unmeasured = selectRTile(problem(64, 64, {ReductionDir::kAlongRow}), pending);
  REQUIRE_FALSE(unmeasured.ok());
  REQUIRE(unmeasured.error().message.find("pending measurement") != std::string::npos);
  auto tiny = selectRTile(problem(1, 3, {ReductionDir::kAlongRow}), p);
  REQUIRE_FALSE(tiny.ok());
  REQUIRE(tiny.error().message.find("linear layout") != std::string::npos);
}

TEST_CASE("matrix view and reduction axes", "[rtile]") {
  TensorExtent e = matrixView({2, 12, 128, 64});
  REQUIRE(e.batch == 24);
  REQUIRE(e.rows == 128);
  REQUIRE(e.cols == 64);
  TensorExtent v = matrixView({768});
  REQUIRE((v.batch == 1 && v.rows == 1 && v.cols == 768));
  REQUIRE(reductionDirForAxis("x", -1, 3).value() == ReductionDir::kAlongRow);
  REQUIRE(reductionDirForAxis("x", 1, 3).value() == ReductionDir::kAlongColumn);
  REQUIRE_FALSE(reductionDirForAxis("x", 0, 3).ok());
  REQUIRE_FALSE(reductionDirForAxis("x", 3, 3).ok());
}
