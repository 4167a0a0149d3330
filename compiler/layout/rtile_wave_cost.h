// The R-Tile cost "wave-footprint": Eq. 2 with the kernel that reads the tile in place of the
// paper's per-thread walk table,
//
//   Performance(tile, use) = weight(use) * WaveEfficiency(tile, use) * MemEfficiency(tile)
//
// where WaveEfficiency is the bytes rtile_matmul.cl's waves use over the bytes the texture L1
// fetches for them (wave_footprint.h), for the profile's kernel tiling (its "rtile_cost" block)
// and L1 (l1_texture_cache_bytes of texture_block lines), in the best staging order the kernel
// can take for that tile (codegen chooses the same way). A use along rows is the slab a K step
// reads of an operand stored along K (TN x TK), a use along columns the strip it reads of one
// stored across K (TK x TN): the tensor is scored as a right operand, the role of the weights
// R-Tile serves, with the partner operand a buffer (it does not share the texture L1).
// MemEfficiency is rtile_cost.h's. docs/rtile.md derives it.
#pragma once

#include <vector>

#include "compiler/layout/rtile.h"
#include "compiler/layout/wave_footprint.h"
#include "compiler/profile/profile.h"

namespace fbl::layout {

// The texture L1 of a profile (l1_texture_cache_bytes in texture_block lines of 16-byte texels)
// at every combination of the bracket's sizes and line shapes, the profile's own first.
std::vector<TextureL1> bracketedTextureL1s(const profile::HardwareProfile& p);
StagedTiling stagedTilingOf(const profile::HardwareProfile& p);  // requires p.waveFootprint

// Used bytes over fetched bytes of `l` read along `dir`, in its best staging order.
double waveEfficiency(const RTileLayout& l, ReductionDir dir, const profile::HardwareProfile& p);

// Requires p.waveFootprint.
RTileCost waveFootprintPerformance(const RTileLayout& l, const std::vector<ReductionUse>& uses,
                                   const profile::HardwareProfile& p);

}  // namespace fbl::layout
