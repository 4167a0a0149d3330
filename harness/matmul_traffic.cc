// Modelled bytes read (see matmul_traffic.h):
//  1. an operand's tile loads are regions of its stored matrix: (TM or TN) x TK, transposed when
//     the operand is read transposed; the grid of regions is loaded once per work-group column
//     (lhs) or row (rhs) of the output;
//  2. for a sample of regions spread over the grid, the texels of the region are mapped through
//     the layout and the distinct cache blocks counted (images: C_h x C_w texels; buffers: lines);
//  3. bytes = mean blocks per region x regions x reloads x block bytes; conversions read their
//     source's blocks once.
#include "harness/matmul_traffic.h"

#include <algorithm>
#include <set>

namespace fbl::harness {

using layout::Layout;

namespace {

struct Region {
  int64_t r0, c0, rows, cols;  // stored coordinates
};

int64_t blocksTouched(const Layout& l, const Region& g, const profile::HardwareProfile& p) {
  const int64_t R = l.shape()[0], C = l.shape()[1];
  std::set<std::pair<int64_t, int64_t>> blocks;
  const bool image = l.storage() == layout::Storage::Image2D;
  const int64_t line = std::max(1, p.cacheLineBytes / 4);
  for (int64_t r = g.r0; r < std::min(R, g.r0 + g.rows); ++r)
    for (int64_t c = g.c0; c < std::min(C, g.c0 + g.cols); c += image ? 4 : 1) {
      const int64_t idx[2] = {r, c};
      auto at = l.locate(idx);
      if (image)
        blocks.insert({at[0] / p.textureBlock.w, at[1] / p.textureBlock.h});
      else
        blocks.insert({at[0] / line, 0});
    }
  return static_cast<int64_t>(blocks.size());
}

int64_t blockBytes(const Layout& l, const profile::HardwareProfile& p) {
  return l.storage() == layout::Storage::Image2D ? int64_t{16} * p.textureBlock.w * p.textureBlock.h
                                                 : std::max(4, p.cacheLineBytes);
}

// Bytes of all tile loads of one operand: stored region rowsPer x colsPer, grid gr x gc,
// each region loaded `reloads` times.
double operandBytes(const Layout& l, int64_t rowsPer, int64_t colsPer, int64_t reloads,
                    const profile::HardwareProfile& p, int samples) {
  const int64_t R = l.shape()[0], C = l.shape()[1];
  const int64_t gr = (R + rowsPer - 1) / rowsPer, gc = (C + colsPer - 1) / colsPer;
  const int64_t regions = gr * gc;
  const int64_t step = std::max<int64_t>(1, regions / samples);
  double blocks = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < regions; i += step, ++n)
    blocks += static_cast<double>(blocksTouched(l, {(i / gc) * rowsPer, (i % gc) * colsPer, rowsPer, colsPer}, p));
  return blocks / static_cast<double>(n) * static_cast<double>(regions * reloads * blockBytes(l, p));
}

}  // namespace

PassTraffic modelPassTraffic(const MatmulPlan& plan, const MatmulStep& step, const codegen::MatmulTiling& t,
                             const profile::HardwareProfile& p, int64_t computeUnits, int samples) {
  const auto [m, k, n] = productShape(plan.shape, step.pass);
  const Layout& lhs = plan.tensors.at(step.lhs).layout;
  const Layout& rhs = plan.tensors.at(step.rhs).layout;
  const int64_t gridM = (m + t.tm - 1) / t.tm, gridN = (n + t.tn - 1) / t.tn;
  PassTraffic out;
  out.productBytes =
      operandBytes(lhs, step.lhsT ? t.tk : t.tm, step.lhsT ? t.tm : t.tk, gridN, p, samples) +
      operandBytes(rhs, step.rhsT ? t.tn : t.tk, step.rhsT ? t.tk : t.tn, gridM, p, samples);
  const int64_t split = t.splitK ? t.splitK : codegen::chooseSplitK(m, n, k, t, computeUnits);
  if (split > 1) out.productBytes += 4.0 * static_cast<double>(split * m * n);
  out.minimalBytes = 4.0 * static_cast<double>(m * k + k * n);
  for (const Conversion& c : step.before) {
    const Layout& src = plan.tensors.at(c.src).layout;
    // The whole source, each cache block once.
    out.conversionBytes += operandBytes(src, 64, 64, 1, p, samples);
  }
  return out;
}

}  // namespace fbl::harness
