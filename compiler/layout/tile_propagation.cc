#include "compiler/layout/tile_propagation.h"

#include "compiler/layout/range_analysis.h"
#include "compiler/layout/simplify.h"

namespace fbl::layout {

const char* tileCheckName(TileCheck c) {
  switch (c) {
    case TileCheck::None: return "none";
    case TileCheck::DimensionDependency: return "dimension-dependency";
    case TileCheck::BoundaryPreservation: return "boundary-preservation";
    case TileCheck::IntraTileContinuity: return "intra-tile-continuity";
  }
  return "?";
}

namespace {

std::vector<Expr> termsOf(const Expr& e) {
  return e.kind() == ExprKind::Add ? e.terms() : std::vector<Expr>{e};
}

// Where one intra-tile variable lands: the producer coordinate, its coefficient there, and the
// rest of that coordinate.
struct Landing {
  int dim = -1;
  int64_t coef = 0;
  Expr rest;
};

// Fails unless `var` occurs in exactly one coordinate as a plain term var * k.
Result<Landing> land(const std::vector<Expr>& coords, int var, const char* what) {
  Landing l;
  for (size_t k = 0; k < coords.size(); ++k) {
    if (!usesVar(coords[k], var)) continue;
    if (l.dim >= 0) return makeError("{} feeds producer dims {} and {}", what, l.dim, k);
    l.dim = static_cast<int>(k);
    std::vector<Expr> rest;
    for (const Expr& t : termsOf(coords[k])) {
      Expr atom = t.kind() == ExprKind::Mul ? t.operand() : t;
      if (!usesVar(t, var)) rest.push_back(t);
      else if (atom.kind() == ExprKind::Var) l.coef = t.kind() == ExprKind::Mul ? t.factor() : 1;
      else return makeError("{} is split by a division or modulo: {}", what, coords[k].str());
    }
    l.rest = sum(rest);
  }
  return l;
}

TileCheckResult fail(TileCheckResult r, TileCheck c, std::string why) {
  r.ok = false;
  r.failed = c;
  r.reason = std::move(why);
  return r;
}

}  // namespace

TileCheckResult checkTilePropagation(const Shape& producer, std::span<const MovementOp> chain, TileConfig tile) {
  TileCheckResult res;
  auto chainOr = chainMap(producer, chain);
  if (!chainOr.ok()) return fail(res, TileCheck::DimensionDependency, chainOr.error().message);
  return checkTilePropagation(*chainOr, tile);
}

TileCheckResult checkTilePropagation(const IndexMap& view, TileConfig tile) {
  TileCheckResult res;
  const Shape& producer = view.codomain();
  const Shape& consumer = view.domain();
  const size_t n = consumer.size(), pn = producer.size();
  if (n < 2 || pn < 2)
    return fail(res, TileCheck::DimensionDependency, "R-Tile needs rank >= 2 on both sides");
  int64_t rows = consumer[n - 2], cols = consumer[n - 1];
  if (tile.tileH < 1 || tile.tileW < 1 || rows % tile.tileH != 0 || cols % tile.tileW != 0)
    return fail(res, TileCheck::DimensionDependency,
                "tile " + tile.str() + " does not divide the consumer's " + std::to_string(rows) + "x" +
                    std::to_string(cols));

  // Step 1: consumer index (outer..., tr, u, tc, v) -> consumer index -> producer index.
  Shape split(consumer.begin(), consumer.end() - 2);
  split.insert(split.end(), {rows / tile.tileH, tile.tileH, cols / tile.tileW, tile.tileW});
  std::vector<Expr> sv = IndexMap::vars(split);
  const int tr = static_cast<int>(n - 2), u = tr + 1, tc = tr + 2, v = tr + 3;
  std::vector<Expr> toConsumer(sv.begin(), sv.begin() + tr);
  toConsumer.push_back(sv[tr] * tile.tileH + sv[u]);
  toConsumer.push_back(sv[tc] * tile.tileW + sv[v]);
  auto raw = compose(view, IndexMap(split, toConsumer, consumer));
  FBL_ASSERT(raw.ok());
  res.rawElementMap = *raw;
  res.elementMap = raw->simplified();
  const std::vector<Expr>& P = res.elementMap.outputs();

  // Step 2: dimension dependency (a unit tile extent has no intra-tile variable to follow).
  Landing lu{static_cast<int>(pn - 2), 1, P[pn - 2]}, lv{static_cast<int>(pn - 1), 1, P[pn - 1]};
  if (tile.tileH > 1) {
    auto l = land(P, u, "the tile's rows");
    if (!l.ok()) return fail(res, TileCheck::DimensionDependency, l.error().message);
    lu = *l;
  }
  if (tile.tileW > 1) {
    auto l = land(P, v, "the tile's columns");
    if (!l.ok()) return fail(res, TileCheck::DimensionDependency, l.error().message);
    lv = *l;
  }
  auto tiled = [&](int d) { return d == static_cast<int>(pn - 2) || d == static_cast<int>(pn - 1); };
  if (lu.dim < 0 || lv.dim < 0 || lu.dim == lv.dim || !tiled(lu.dim) || !tiled(lv.dim))
    return fail(res, TileCheck::DimensionDependency,
                "the tile lands in producer dims (" + std::to_string(lu.dim) + ", " + std::to_string(lv.dim) +
                    "), not the two tiled dims of " + ir::shapeToString(producer));

  // Step 3: boundary preservation.
  int64_t extentAtU = tile.tileH, extentAtV = tile.tileW;
  if (!provablyDivisible(lu.rest, extentAtU))
    return fail(res, TileCheck::BoundaryPreservation,
                "producer dim " + std::to_string(lu.dim) + " offset " + lu.rest.str() + " is not a multiple of " +
                    std::to_string(extentAtU));
  if (!provablyDivisible(lv.rest, extentAtV))
    return fail(res, TileCheck::BoundaryPreservation,
                "producer dim " + std::to_string(lv.dim) + " offset " + lv.rest.str() + " is not a multiple of " +
                    std::to_string(extentAtV));

  // Step 4: intra-tile continuity.
  if (lv.dim != static_cast<int>(pn - 1))
    return fail(res, TileCheck::IntraTileContinuity,
                "the tile's columns land in producer dim " + std::to_string(lv.dim) +
                    ", not the innermost: stride 1 is lost (transposed tile)");
  if (lv.coef != 1 || lu.coef != 1)
    return fail(res, TileCheck::IntraTileContinuity,
                "the tile is strided in the producer (row step " + std::to_string(lu.coef) + ", column step " +
                    std::to_string(lv.coef) + ")");

  // Step 5: the tile map over (outer..., tr, tc).
  Shape grid(consumer.begin(), consumer.end() - 2);
  grid.insert(grid.end(), {rows / tile.tileH, cols / tile.tileW});
  std::vector<Expr> gv = IndexMap::vars(grid);
  std::vector<Expr> fromSplit(gv.begin(), gv.begin() + tr);
  fromSplit.insert(fromSplit.end(), {gv[tr], Expr::constant(0), gv[tr + 1], Expr::constant(0)});
  std::vector<Expr> outs;
  Shape pgrid = producer;
  for (size_t k = 0; k < pn; ++k) {
    Expr e = substitute(P[k], fromSplit);
    if (k == pn - 2) { e = floorDiv(e, tile.tileH); pgrid[k] = (producer[k] + tile.tileH - 1) / tile.tileH; }
    if (k == pn - 1) { e = floorDiv(e, tile.tileW); pgrid[k] = (producer[k] + tile.tileW - 1) / tile.tileW; }
    outs.push_back(simplify(e));
  }
  res.tileMap = IndexMap(grid, std::move(outs), pgrid);
  res.ok = true;
  return res;
}

TilePlan planTilePropagation(const Shape& producer, std::span<const MovementOp> chain, TileConfig preferred,
                             std::span<const TileConfig> alternatives) {
  TilePlan plan;
  auto attempt = [&](TileConfig t) {
    TileCheckResult r = checkTilePropagation(producer, chain, t);
    plan.log.push_back(t.str() + ": " + (r.ok ? std::string("passes") : std::string(tileCheckName(r.failed)) + ": " + r.reason));
    return r;
  };
  TileCheckResult first = attempt(preferred);
  if (first.ok) {
    plan.decision = TilePlan::Decision::Propagate;
    plan.tile = preferred;
    plan.result = std::move(first);
    return plan;
  }
  for (const TileConfig& alt : alternatives) {
    if (alt == preferred) continue;
    TileCheckResult r = attempt(alt);
    if (r.ok) {
      plan.decision = TilePlan::Decision::Reconfigure;
      plan.tile = alt;
      plan.result = std::move(r);
      return plan;
    }
  }
  plan.decision = TilePlan::Decision::Convert;
  plan.tile = preferred;
  plan.result = std::move(first);
  plan.log.push_back("convert: no tile configuration survives " + chainToString(chain));
  return plan;
}

}  // namespace fbl::layout
