// The wave footprint of rtile_matmul.cl's staging: which texture-L1 lines each wave instruction
// of a work-group touches while the group copies its K tiles into local memory, and how many of
// them miss. This is the access pattern an R-Tile actually meets on a GPU, as opposed to the
// paper's per-thread walk table (rtile_cost.h), and it is what R-Tile candidates and the kernel's
// staging order are scored against where a profile says so ("rtile_cost": "wave-footprint").
//
// The model, which is the simulator's (sim/, docs/cache.md) restricted to one kernel:
//  1. Per K step a group of W work-items reads a stored region of each operand, a texel (4
//     stored columns) per read: an operand read along its stored rows gives a T x TK region
//     (T = TM or TN), one read across them a TK x T region. Work-item `tid`'s p-th read is
//     element t = tid + p W of the region, in the staging order (StagingOrder).
//  2. Work-items tid / wave form a wave. A work-item's reads of a K step come in program order,
//     the left operand's before the right's (the kernel's FETCH), masked ones skipped; a wave's
//     k-th instruction is its lanes' k-th reads, and the waves of a group take turns, one
//     instruction each. (Where no read is masked, instruction k is read p = k of every lane.)
//  3. A wave instruction requests each distinct texture-L1 line its lanes touch once; a line is
//     a blockH x blockW texel block of the image; the L1 holds `lines` of them, fully
//     associative and LRU, per compute unit, and starts empty for each group.
//  4. Buffers bypass the texture L1 (Adreno; Mali's buffer L1 is another cache): a buffer
//     operand adds no line.
// It reproduces the simulator's texture-L1 miss counts of Figure 16 exactly
// (tests/layout/wave_footprint_test.cc), and runs a full-size product in well under a second.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace fbl::layout {

// The texture L1 of one compute unit.
struct TextureL1 {
  int64_t lines = 0;
  int blockH = 1, blockW = 1;  // texels per line
  int64_t lineBytes() const { return int64_t{16} * blockH * blockW; }
};

// The tiling rtile_matmul.cl runs with: TM x TN outputs per group, K in steps of TK, `workItems`
// per group in waves of `wave`.
struct StagedTiling {
  int64_t tm = 0, tn = 0, tk = 0, workItems = 0, wave = 0;
};

// The order a group's reads cover one K step's stored region of `regionRows` rows of
// `regionTexels` texels: read t fills chunks of `rows` x `texels` (row-major inside a chunk), the
// chunks row-major over the region. {1, regionTexels} is the plain row-major walk; `texels` = 0
// stands for it.
struct StagingOrder {
  int64_t rows = 1, texels = 0;
  bool rowMajor(int64_t regionTexels) const { return rows == 1 && (texels == 0 || texels == regionTexels); }
  bool operator==(const StagingOrder&) const = default;
};

// Read t's (row, texel column) inside the region; the kernel's STAGED_R / STAGED_C.
std::pair<int64_t, int64_t> stagedTexel(int64_t t, int64_t regionTexels, StagingOrder o);

// Whether `o` tiles a region of `regionRows` x `regionTexels` (chunks divide both sides).
bool fitsRegion(StagingOrder o, int64_t regionRows, int64_t regionTexels);

// Where stored element (row, col) lies on the image: texel (x, y). Empty: a buffer.
using TexelOf = std::function<std::pair<int64_t, int64_t>(int64_t row, int64_t col)>;

struct StagedOperand {
  TexelOf texel;
  int64_t rows = 0, cols = 0;  // stored extent
  bool transposed = false;     // read across its stored rows (K runs down the stored rows)
  StagingOrder order;
};

struct FootprintCount {
  int64_t misses = 0;  // texture-L1 misses, i.e. lines fetched from L2
  int64_t lines = 0;   // distinct lines each group touches, summed over groups: the fewest misses possible
  int64_t texels = 0;  // texels read through the texture L1 (masked reads not counted)
};

// The texture-L1 misses of C[M x N] = L[M x K] R[K x N] (a transposed operand stored the other
// way round) over maxGroups groups spread evenly over the kernel's order (group i * G / maxGroups
// of G; 0: all of them) and the first maxKSteps K steps of each (0: all). Reads outside the
// stored extent are masked: no access.
FootprintCount textureL1Misses(int64_t m, int64_t n, int64_t k, const StagedOperand& lhs, const StagedOperand& rhs,
                               const StagedTiling& t, const TextureL1& l1, int64_t maxGroups = 0,
                               int64_t maxKSteps = 0);

// The staging orders worth trying for a region: the row-major walk first, then every chunk of
// power-of-two sides that is exactly one wave and tiles the region (each wave instruction then
// reads one chunk, whatever shape the lines have).
std::vector<StagingOrder> stagingCandidates(int64_t regionRows, int64_t regionTexels, int64_t wave);

// Groups and K steps a staging choice or an R-Tile score simulates: the staging repeats per group
// and K step, so a few show its footprint.
inline constexpr int64_t kScoredGroups = 2;
inline constexpr int64_t kScoredKSteps = 4;

// The staging order of `op`, read as the left operand if `left` beside `partner` (an empty one: a
// buffer), whose reads fetch the fewest bytes summed over `l1s`: the texture L1 as the profile
// states it and as its bracket allows, since one order must serve whichever is real. Row-major
// wins ties. `counts` holds each L1's count in that order.
struct StagingChoice {
  StagingOrder order;
  std::vector<FootprintCount> counts;
};
StagingChoice bestStaging(int64_t m, int64_t n, int64_t k, StagedOperand op, bool left, const StagedOperand& partner,
                          const StagedTiling& t, const std::vector<TextureL1>& l1s,
                          int64_t maxGroups = kScoredGroups, int64_t maxKSteps = kScoredKSteps);

// The region one K step reads of an operand (rows, texels).
std::pair<int64_t, int64_t> stagedRegion(bool left, bool transposed, const StagedTiling& t);

}  // namespace fbl::layout
