// R-Tile (paper §4.2, supplement Algorithm 1): one unified tile layout for a tensor that several
// reductions read along different axes. Pure functions of (tensor extent, the consuming
// reductions with their directions and weights, hardware profile) -> RTileChoice.
//
//  1. Pool: tile_h x tile_w over the powers of two in RTileOptions::tileSizes (elements).
//  2. C1 computation alignment: tile_w a multiple of the RGBA texel (ISA: a texel read yields 4
//     lanes) and the tile's texel count a multiple of the wave size (no idle SIMD lanes).
//  3. Intra-tile mapping (from the shape, as the paper prescribes): row strips when
//     tile_w/4 <= C_w texels, otherwise 2D blocks whose width (4 or 8 texels) the profile's
//     block4/block8 benchmark prefers, folded square-ish into the texture cache block.
//  4. C2 memory alignment: the tile's texels fit the L1 texture cache and cover whole texture
//     cache blocks (no partially fetched blocks).
//  5. C3 shape compatibility: padding ratio (padded - logical) / logical <= 10%.
//  6. The laid-out texture must fit the profile's image2d limits.
//  7. Eq. 2 over the survivors with the profile's cost (scoreRTile: the paper's walk table,
//     rtile_cost.h, or the kernel's wave footprint, rtile_wave_cost.h); scores within
//     kScoreTieTolerance tie and are broken by less padding, larger tile, squarer tile, lower h.
//  8. Inter-tile order: tiles row-major, the dimension the reductions traverse more tiles of
//     placed horizontally (weighted tiles walked per reduction; ties keep columns along x).
// Every candidate's verdict (the first constraint it broke, and why) is kept in the choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/tensor.h"
#include "compiler/layout/rtile_cost.h"
#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::layout {

enum class InterOrder {
  kColsAlongX,  // tile (i, j) at grid (x=j, y=i): walks along rows stay horizontal
  kRowsAlongX,  // tile (i, j) at grid (x=i, y=j): walks along columns become horizontal
};
const char* interOrderName(InterOrder o);

enum class Constraint { kNone, kC1Isa, kC1Wave, kC2Cache, kC2Align, kC3Padding, kImageLimits };

struct CandidateVerdict {
  int64_t tileH = 0, tileW = 0;
  Constraint failed = Constraint::kNone;  // kNone: survived all constraints
  std::string reason;                     // one line, empty when kNone
};

struct RTileOptions {
  double maxPaddingRatio = 0.10;  // C3; the paper's threshold
  std::vector<int64_t> tileSizes = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
};

struct RTileProblem {
  std::string tensor;  // named in errors and reports
  TensorExtent extent;
  std::vector<ReductionUse> uses;
};

// Texel coordinates of one element: image2d (x, y) and the RGBA lane.
struct TexelCoord {
  int64_t x = 0, y = 0;
  int lane = 0;
  bool operator==(const TexelCoord&) const = default;
};

// The physical layout of a chosen R-Tile: an index map from the padded logical extent onto an
// image2d of textureWidth() x textureHeight() RGBA texels (a bijection; tests check it).
struct RTileLayout {
  TensorExtent extent;
  TileGeometry tile;
  InterOrder inter = InterOrder::kColsAlongX;

  int64_t tilesR() const;  // per batch matrix
  int64_t tilesC() const;
  int64_t paddedRows() const { return tilesR() * tile.tileH; }
  int64_t paddedCols() const { return tilesC() * tile.tileW; }
  int64_t textureWidth() const;
  int64_t textureHeight() const;
  // b < batch, r < paddedRows(), c < paddedCols().
  TexelCoord map(int64_t b, int64_t r, int64_t c) const;
};

struct RTileChoice {
  std::string tensor;
  RTileLayout layout;
  double paddingRatio = 0;
  RTileCost cost;  // modeled Eq. 2 score of the chosen tile
  std::vector<CandidateVerdict> verdicts;
};

// Step 7's score of one laid-out tile: the profile's "rtile_cost" model (wave-footprint) where it
// names one, else tile-traversal-performance.
RTileCost scoreRTile(const RTileLayout& l, const std::vector<ReductionUse>& uses, const profile::HardwareProfile& p);
// Whether scoreRTile can score on `p`: it has a wave-footprint block or a measured access table.
bool canScoreRTiles(const profile::HardwareProfile& p);

// Throughput of a row-major stream (a conversion kernel's) in the score's units: the table's
// row over column-major, or 1 (every fetched byte used) under the wave footprint.
double streamThroughput(const profile::HardwareProfile& p);

// Resolves the intra-tile mapping and texel rectangle of a tile shape (step 3); no pruning.
TileGeometry tileGeometry(int64_t tileH, int64_t tileW, const profile::HardwareProfile& p);

double paddingRatio(int64_t tileH, int64_t tileW, const TensorExtent& e);

// Steps 1-6: every candidate with its verdict, in pool order (tile_h major).
std::vector<CandidateVerdict> pruneCandidates(const RTileProblem& problem, const profile::HardwareProfile& p,
                                              const RTileOptions& opts = {});

// Step 8.
InterOrder chooseInterOrder(const TileGeometry& t, const TensorExtent& e,
                            const std::vector<ReductionUse>& uses);

// Steps 1-8. Errors (one line naming the tensor and profile): no consuming reduction, a profile
// whose access table is pending measurement, or no candidate surviving C1-C3 (the caller then
// keeps the tensor's linear layout, as the paper falls back to an explicit conversion).
Result<RTileChoice> selectRTile(const RTileProblem& problem, const profile::HardwareProfile& p,
                                const RTileOptions& opts = {});

// The 2D view of an n-D tensor: the last axis is cols, the one before rows, the rest batch
// (1-D tensors are one row). `axis` of a consuming reduction becomes a direction; reducing over
// a batch axis is not a tile reduction and is an error.
TensorExtent matrixView(const ir::Shape& shape);
Result<ReductionDir> reductionDirForAxis(const std::string& tensor, int64_t axis, size_t rank);

}  // namespace fbl::layout
