// Tile propagation through the attention chains, and the div/mod counts the simplifier saves
// on them (docs/index-simplification.md quotes the table this test prints).
#include <catch2/catch.hpp>

#include <random>
#include <sstream>
#include <vector>

#include "compiler/layout/layout.h"
#include "compiler/layout/simplify.h"
#include "compiler/layout/tile_propagation.h"

using namespace fbl::layout;
using fbl::ir::Shape;

namespace {

// Attention dims of a model config: batch, sequence, heads, kv heads, head dim.
struct Attn {
  const char* name;
  int64_t B, S, H, KVH, D;
};
// llama-tiny and llama-full (Llama-3.2-1B) from tests/data/*/meta.json's config.
const Attn kTiny{"llama-tiny", 1, 16, 4, 2, 16};
const Attn kFull{"llama-full", 1, 512, 32, 8, 64};

struct Chain {
  std::string name;
  Shape producer;
  std::vector<MovementOp> ops;
};

std::vector<Chain> attentionChains(const Attn& a) {
  const int64_t B = a.B, S = a.S, H = a.H, K = a.KVH, D = a.D, rep = a.H / a.KVH;
  std::vector<MovementOp> heads = {MovementOp::reshape({B, S, H, D}), MovementOp::permute({0, 2, 1, 3})};
  std::vector<MovementOp> kvHeads = {MovementOp::reshape({B, S, K, D}), MovementOp::permute({0, 2, 1, 3})};
  // HF repeat_kv: x[:, :, None].expand(B, K, rep, S, D).reshape(B, H, S, D).
  std::vector<MovementOp> gqa = kvHeads;
  gqa.insert(gqa.end(), {MovementOp::unsqueeze({2}), MovementOp::expand({B, K, rep, S, D}),
                         MovementOp::reshape({B, H, S, D})});
  std::vector<MovementOp> ropeLo = heads, ropeHi = heads;
  ropeLo.push_back(MovementOp::slice({3}, {0}, {D / 2}));
  ropeHi.push_back(MovementOp::slice({3}, {D / 2}, {D}));
  std::vector<MovementOp> merge = {MovementOp::permute({0, 2, 1, 3}), MovementOp::reshape({B, S, H * D})};
  return {
      {"Q heads: Reshape+Transpose", {B, S, H * D}, heads},
      {"K/V GQA: Reshape+Transpose+Unsqueeze+Expand+Reshape", {B, S, K * D}, gqa},
      {"RoPE low half: heads+Slice", {B, S, H * D}, ropeLo},
      {"RoPE high half: heads+Slice", {B, S, H * D}, ropeHi},
      {"output merge: Transpose+Reshape", {B, H, S, D}, merge},
  };
}

// Raw (layout composed with every op's naive index computation) vs simplified div/mod count.
std::pair<int, int> counts(const Layout& producer, const std::vector<MovementOp>& ops) {
  auto view = chainMap(producer.shape(), ops);
  REQUIRE(view.ok());
  auto raw = compose(producer.map(), *view);
  REQUIRE(raw.ok());
  return {raw->countDivMod(), raw->simplified().countDivMod()};
}

}  // namespace

TEST_CASE("attention chains: div/mod per read before and after simplification", "[layout]") {
  std::ostringstream table;
  table << "\n| model | chain | buffer row-major | image2d | R-Tile 16 x head_dim image |\n|---|---|---|---|---|\n";
  // What is left is inherent: GQA's head / rep, and the merge's column / D and column % D.
  const int kMinimal[] = {0, 1, 0, 0, 2};
  for (const Attn& a : {kTiny, kFull}) {
    auto chains = attentionChains(a);
    for (size_t k = 0; k < chains.size(); ++k) {
      const Chain& c = chains[k];
      Layout rm = Layout::rowMajor(c.producer), img = Layout::image(c.producer);
      auto rt = Layout::rtile(c.producer, TileSpec::rowStrips(16, a.D));
      REQUIRE(rt.ok());
      auto [rmBefore, rmAfter] = counts(rm, c.ops);
      auto [imBefore, imAfter] = counts(img, c.ops);
      auto [rtBefore, rtAfter] = counts(*rt, c.ops);
      INFO(a.name << " " << c.name);
      CHECK(rmAfter < rmBefore);
      CHECK(imAfter < imBefore);
      CHECK(rtAfter < rtBefore);
      CHECK(rmAfter == kMinimal[k]);
      table << "| " << a.name << " | " << c.name << " | " << rmBefore << " -> " << rmAfter << " | " << imBefore
            << " -> " << imAfter << " | " << rtBefore << " -> " << rtAfter << " |\n";
    }
  }
  WARN(table.str());
}

TEST_CASE("the simplified attention reads are the expected affine maps", "[layout]") {
  const Attn& a = kTiny;
  auto chains = attentionChains(a);
  auto read = [&](size_t k) {
    auto l = Layout::rowMajor(chains[k].producer).apply(chains[k].ops);
    REQUIRE(l.ok());
    return l->map().outputs()[0].str();
  };
  // [B,H,S,D] index (i0, i1, i2, i3) into the [B,S,H*D] buffer; B = 1, so i0 is 0.
  CHECK(read(0) == "i2 * 64 + i1 * 16 + i3");
  // GQA: head i1 reads kv head i1 / 2 (rep = 2).
  CHECK(read(1) == "i2 * 32 + i1 / 2 * 16 + i3");
  CHECK(read(3) == "i2 * 64 + i1 * 16 + i3 + 8");
}

namespace {

// Every element of every consumer tile lands in the tile-map's producer tile at the same
// intra-tile offset: the tile invariance the checks claim, verified element by element.
void requireTileInvariance(const Shape& producer, const std::vector<MovementOp>& ops, TileConfig t,
                           const TileCheckResult& r) {
  auto view = chainMap(producer, ops);
  REQUIRE(view.ok());
  const Shape& cs = view->domain();
  const size_t n = cs.size(), pn = producer.size();
  std::vector<int64_t> idx(n, 0);
  for (int64_t f = 0, total = fbl::ir::numElements(cs); f < total; ++f) {
    int64_t rem = f;
    for (size_t d = n; d-- > 0;) idx[d] = rem % cs[d], rem /= cs[d];
    std::vector<int64_t> p = view->apply(idx);
    std::vector<int64_t> tileIdx(idx.begin(), idx.end() - 2);
    tileIdx.push_back(idx[n - 2] / t.tileH);
    tileIdx.push_back(idx[n - 1] / t.tileW);
    std::vector<int64_t> pt = r.tileMap.apply(tileIdx);
    for (size_t k = 0; k + 2 < pn; ++k) REQUIRE(p[k] == pt[k]);
    REQUIRE(p[pn - 2] == pt[pn - 2] * t.tileH + idx[n - 2] % t.tileH);
    REQUIRE(p[pn - 1] == pt[pn - 1] * t.tileW + idx[n - 1] % t.tileW);
  }
}

}  // namespace

TEST_CASE("tile propagation passes the attention chains with tile-level maps", "[layout]") {
  for (const Attn& a : {kTiny, kFull}) {
    auto chains = attentionChains(a);
    TileConfig t{a.S / 4, a.D / 2};
    for (const Chain& c : chains) {
      INFO(a.name << " " << c.name << " tile " << t.str());
      TileCheckResult r = checkTilePropagation(c.producer, c.ops, t);
      INFO(r.reason);
      REQUIRE(r.ok);
      CHECK(r.elementMap.countDivMod() <= r.rawElementMap.countDivMod());
      if (a.S <= 64) requireTileInvariance(c.producer, c.ops, t, r);
    }
  }
  // The tile map of Q heads: consumer tile (b, h, tr, tc) reads producer tile (b, tr, h*2 + tc).
  auto chains = attentionChains(kTiny);
  TileCheckResult q = checkTilePropagation(chains[0].producer, chains[0].ops, {4, 8});
  REQUIRE(q.ok);
  CHECK(q.tileMap.str() == "[1,4,4,2] -> [1,4,8]: (0, i2, i1 * 2 + i3)");
  CHECK(q.tileMap.countDivMod() == 0);
  // GQA: head h reads kv head h / 2.
  TileCheckResult g = checkTilePropagation(chains[1].producer, chains[1].ops, {4, 8});
  REQUIRE(g.ok);
  CHECK(g.tileMap.str() == "[1,4,4,2] -> [1,4,4]: (0, i2, i1 / 2 * 2 + i3)");
}

TEST_CASE("each tile check fails where the paper says it must", "[layout]") {
  const Attn& a = kTiny;  // D = 16
  auto chains = attentionChains(a);
  const Shape& qProducer = chains[0].producer;
  // Dimension dependency: a tile wider than head_dim splits across heads.
  TileCheckResult wide = checkTilePropagation(qProducer, chains[0].ops, {4, 32});
  CHECK(wide.failed == TileCheck::DimensionDependency);
  // Dimension dependency: splitting each S row in two puts the tile's rows under a division.
  std::vector<MovementOp> merge = {MovementOp::reshape({1, 32, 32})};
  CHECK(checkTilePropagation(qProducer, merge, {4, 16}).failed == TileCheck::DimensionDependency);
  // Boundary preservation: a slice starting mid-tile (hidden 16..48 of 64, tile_w 32).
  std::vector<MovementOp> mid = {MovementOp::slice({2}, {16}, {48})};
  TileCheckResult midR = checkTilePropagation(qProducer, mid, {4, 32});
  CHECK(midR.failed == TileCheck::BoundaryPreservation);
  CHECK(checkTilePropagation(qProducer, mid, {4, 16}).ok);  // 16 divides the offset
  // Intra-tile continuity: transposing the two tiled dims (K^T materialized).
  std::vector<MovementOp> kt = chains[0].ops;
  kt.push_back(MovementOp::permute({0, 1, 3, 2}));
  CHECK(checkTilePropagation(qProducer, kt, {8, 8}).failed == TileCheck::IntraTileContinuity);
  // Intra-tile continuity: a strided slice.
  std::vector<MovementOp> strided = {MovementOp::slice({2}, {0}, {64}, {2})};
  CHECK(checkTilePropagation(qProducer, strided, {4, 8}).failed == TileCheck::IntraTileContinuity);
}

TEST_CASE("planning tries other tiles, then falls back to a conversion with reasons", "[layout]") {
  auto chains = attentionChains(kTiny);
  const Chain& q = chains[0];
  std::vector<TileConfig> alts = {{8, 32}, {8, 16}, {4, 8}};
  TilePlan p = planTilePropagation(q.producer, q.ops, {8, 16}, alts);
  CHECK(p.decision == TilePlan::Decision::Propagate);
  CHECK(p.log.size() == 1);

  TilePlan re = planTilePropagation(q.producer, q.ops, {8, 64}, alts);
  CHECK(re.decision == TilePlan::Decision::Reconfigure);
  CHECK(re.tile == TileConfig{8, 16});
  REQUIRE(re.log.size() == 3);
  CHECK(re.log[0].rfind("8x64: dimension-dependency", 0) == 0);

  std::vector<MovementOp> kt = q.ops;
  kt.push_back(MovementOp::permute({0, 1, 3, 2}));
  TilePlan conv = planTilePropagation(q.producer, kt, {8, 8}, alts);
  CHECK(conv.decision == TilePlan::Decision::Convert);
  CHECK(conv.log.back().rfind("convert:", 0) == 0);
  CHECK(conv.result.failed == TileCheck::IntraTileContinuity);
}

TEST_CASE("tile checks are sound on random chains: a pass implies tile invariance", "[layout]") {
  // Chains built from the attention vocabulary (split or merge dims, permute, slice, broadcast);
  // whenever the checks pass, every element of every consumer tile must land in the tile map's
  // producer tile at its own intra-tile offset.
  std::mt19937 rng(43);
  const int64_t dims[] = {2, 4, 8, 16};
  int passed = 0, failed = 0;
  for (int n = 0; n < 300; ++n) {
    Shape producer;
    size_t rank = 2 + rng() % 2;
    for (size_t d = 0; d < rank; ++d) producer.push_back(dims[rng() % 4] * (d == rank - 1 ? 2 : 1));
    std::vector<MovementOp> ops;
    Shape cur = producer;
    for (int k = 0, len = 1 + static_cast<int>(rng() % 4); k < len; ++k) {
      MovementOp op = MovementOp::reshape(cur);
      switch (rng() % 5) {
        case 0: {  // split a dim in two
          size_t d = rng() % cur.size();
          if (cur[d] % 2 != 0 || cur.size() >= 5) continue;
          Shape s = cur;
          int64_t f = cur[d] % 4 == 0 && rng() % 2 ? 4 : 2;
          s[d] /= f;
          s.insert(s.begin() + d + 1, f);
          op = MovementOp::reshape(s);
          break;
        }
        case 1: {  // merge two adjacent dims
          if (cur.size() < 3) continue;
          size_t d = rng() % (cur.size() - 1);
          Shape s = cur;
          s[d] *= s[d + 1];
          s.erase(s.begin() + d + 1);
          op = MovementOp::reshape(s);
          break;
        }
        case 2: {
          std::vector<int64_t> perm(cur.size());
          for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int64_t>(d);
          std::shuffle(perm.begin(), perm.end(), rng);
          op = MovementOp::permute(perm);
          break;
        }
        case 3: {
          int64_t a = rng() % cur.size();
          if (cur[a] < 4) continue;
          int64_t half = cur[a] / 2;
          op = rng() % 2 ? MovementOp::slice({a}, {half}, {cur[a]}) : MovementOp::slice({a}, {0}, {half});
          break;
        }
        default: {  // GQA-style broadcast of a new axis
          if (cur.size() >= 5) continue;
          int64_t a = rng() % cur.size();
          MovementOp un = MovementOp::unsqueeze({a});
          auto unsqueezed = outputShape(cur, un);
          REQUIRE(unsqueezed.ok());
          ops.push_back(un);
          cur = *unsqueezed;
          Shape s = cur;
          s[a] = 2;
          op = MovementOp::expand(s);
          break;
        }
      }
      auto next = outputShape(cur, op);
      REQUIRE(next.ok());
      ops.push_back(op);
      cur = *next;
    }
    auto view = chainMap(producer, ops);
    REQUIRE(view.ok());
    const Shape& cs = view->domain();
    if (cs.size() < 2) continue;
    TileConfig t{std::min<int64_t>(cs[cs.size() - 2], 1 + rng() % 2 * 3), std::min<int64_t>(cs.back(), 4)};
    if (cs[cs.size() - 2] % t.tileH != 0 || cs.back() % t.tileW != 0) continue;
    INFO(fbl::ir::shapeToString(producer) << " " << chainToString(ops) << " tile " << t.str());
    TileCheckResult r = checkTilePropagation(producer, ops, t);
    if (!r.ok) { ++failed; continue; }
    ++passed;
    requireTileInvariance(producer, ops, t, r);
  }
  CHECK(passed > 30);
  CHECK(failed > 30);
  WARN("random tile checks: " << passed << " passed (tile invariance verified), " << failed << " refused");
}
