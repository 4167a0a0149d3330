// Modelled global-memory bytes read by a MatMul plan's kernels, from their access pattern (not a
// hardware counter): every work-group tile load fetches whole texture cache blocks (images:
// the profile's C_h x C_w texels x 16 B) or whole cache lines (buffers), and nothing is reused
// between work-groups (an upper bound that L2 hits lower). A layout that scatters a tile over more
// blocks reads more bytes: that is the difference between strategies this model shows.
#pragma once

#include "compiler/codegen/rtile_kernels.h"
#include "harness/operator_plans.h"

namespace fbl::harness {

struct PassTraffic {
  double productBytes = 0;     // the product's tile loads
  double conversionBytes = 0;  // explicit's conversions: each reads its source once
  double minimalBytes = 0;     // the operands' own bytes, read once
  double totalBytes() const { return productBytes + conversionBytes; }
};

// `samples` work-group tiles per operand are enumerated exactly; the rest are assumed alike (the
// layouts are periodic in whole tiles).
// tiling.splitK 0 is resolved with chooseSplitK for `computeUnits`, as runMatmulPlan does; a
// split product also reads its partial planes once.
PassTraffic modelPassTraffic(const MatmulPlan& plan, const MatmulStep& step, const codegen::MatmulTiling& tiling,
                             const profile::HardwareProfile& p, int64_t computeUnits, int samples = 48);

}  // namespace fbl::harness
