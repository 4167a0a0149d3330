// Tile propagation (paper Sec. 4.3.1): can a consumer that reads its input in R-Tile tiles
// read straight through a chain of movement ops from the producer's R-Tile, with only a
// tile-level index remapping? Pure functions of (producer shape, movement chain, consumer tile);
// the graph pass that calls them lives elsewhere.
//
// Algorithm (checkTilePropagation):
//   1. Split the consumer's last two dims into (tile row tr, row in tile u) and (tile column
//      tc, column in tile v); compose with the chain and simplify: P[k](outer, tr, u, tc, v) is
//      the producer coordinate k each consumer element reads.
//   2. R-Tile dimension dependency: u and v each occur in exactly one producer coordinate, as a
//      plain term (never under / or %), and those are the producer's last two dims, which its
//      R-Tile tiles. Otherwise the chain splits or merges a tiled dim.
//   3. Tile boundary preservation: everything else in the coordinate that receives u (v) is a
//      provable multiple of tile_h (tile_w), so a consumer tile starts on a producer tile
//      boundary (e.g. hidden 768 -> 12 heads x 64: tile_w must divide head_dim 64).
//   4. Intra-tile continuity: v lands in the producer's innermost dim with coefficient 1 and u
//      with coefficient 1 in the other, so tile elements stay stride-1 (a transpose of the two
//      tiled dims, or a strided slice, fails here).
//   5. On success, the tile map: P with u = v = 0, the tiled coordinates divided by the tile
//      extents, simplified: consumer tile grid (outer..., tr, tc) -> producer tile grid (Eq. 3).
// planTilePropagation tries the preferred tile, then each alternative (another R-Tile
// configuration), and otherwise decides on an explicit layout conversion, logging every
// verdict.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "compiler/layout/index_map.h"
#include "compiler/layout/movement.h"

namespace fbl::layout {

struct TileConfig {
  int64_t tileH = 1, tileW = 1;  // on the consumer's last two dims (rows, cols)
  std::string str() const { return std::to_string(tileH) + "x" + std::to_string(tileW); }
  friend bool operator==(const TileConfig&, const TileConfig&) = default;
};

enum class TileCheck { None, DimensionDependency, BoundaryPreservation, IntraTileContinuity };
const char* tileCheckName(TileCheck c);  // "dimension-dependency", ...

struct TileCheckResult {
  bool ok = false;
  TileCheck failed = TileCheck::None;
  std::string reason;  // one line when !ok
  // The element map (consumer split index -> producer index) before and after simplification,
  // and on success the tile map of step 5.
  IndexMap rawElementMap, elementMap, tileMap;
};

TileCheckResult checkTilePropagation(const Shape& producer, std::span<const MovementOp> chain, TileConfig tile);
// The same checks on a view already composed (consumer index -> producer index, producer =
// view.codomain()): for read maps that are not a MovementOp chain (e.g. a roll).
TileCheckResult checkTilePropagation(const IndexMap& view, TileConfig tile);

struct TilePlan {
  enum class Decision { Propagate, Reconfigure, Convert };
  Decision decision = Decision::Convert;
  TileConfig tile;         // the tile the consumer reads with (Propagate, Reconfigure)
  TileCheckResult result;  // of that tile; of the preferred one when converting
  std::vector<std::string> log;  // "32x64: boundary-preservation: ...", one per attempt
};

TilePlan planTilePropagation(const Shape& producer, std::span<const MovementOp> chain, TileConfig preferred,
                             std::span<const TileConfig> alternatives);

}  // namespace fbl::layout
