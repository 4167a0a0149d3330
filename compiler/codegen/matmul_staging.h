// The staging order of rtile_matmul.cl's image operands on a GPU whose texture cache the profile
// describes: for each image operand, the chunk (layout::StagingOrder) whose wave footprint
// fetches the fewest texture-L1 bytes, found by the lane model of compiler/layout/wave_footprint.h
// over kScoredGroups groups and kScoredKSteps K steps of the product (the staging repeats per
// group and step) and summed over the L1s given (the profile's, and its bracket's sizes and line
// shapes: one order must serve whichever is real). The left operand is chosen first with the
// right as a buffer, then the right beside the left's choice, as both share the cache. Buffers keep row-major: they do not go
// through the texture cache (Adreno), and their reads coalesce best along rows.
//
// Why: a wave of 64 work-items reading a K tile row-major covers 2 rows x 128 columns of an
// operand read across its rows. An R-Tile of 8 x 8-element blocks stores those in 16 blocks, a
// quarter of each used, and the group's 4 waves each fetch all 16 again from an 8-line L1: 4x
// the lines of a plain image (docs/rtile.md, "Which tile the kernel reads well"). Reading
// 8 x 32-element chunks instead fetches each block once.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/codegen/matmul_tiling.h"
#include "compiler/codegen/rtile_kernels.h"
#include "compiler/layout/wave_footprint.h"

namespace fbl::codegen {

// Sets lhs.staging and rhs.staging for C[M x N] = L[M x K] R[K x N] (operands as for
// emitRTileMatmul, batch dims read at batch 0) with tiling `t` on waves of `wave` work-items.
void chooseStaging(int64_t m, int64_t k, int64_t n, MatmulOperand& lhs, MatmulOperand& rhs, const MatmulTiling& t,
                   int64_t wave, const std::vector<layout::TextureL1>& l1s);

// The lane model's texel map of a stored operand: (row, col) of its last two dims at batch 0 ->
// image texel (x, y); empty for a buffer.
layout::TexelOf texelMap(const layout::Layout& stored);

}  // namespace fbl::codegen
