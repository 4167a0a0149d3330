// The wave-footprint model of rtile_matmul.cl's staging; the model is stated in wave_footprint.h.
#include "compiler/layout/wave_footprint.h"

#include <algorithm>
#include <iterator>

#include "compiler/support/int_math.h"
#include "compiler/support/result.h"

namespace fbl::layout {

namespace {

// A line of one operand's image: (operand, block row, block column) packed into one key.
using LineKey = uint64_t;
LineKey lineKey(int operand, int64_t blockY, int64_t blockX) {
  return (static_cast<uint64_t>(operand) << 62) | (static_cast<uint64_t>(blockY) << 31) |
         static_cast<uint64_t>(blockX);
}

// A fully associative LRU of `capacity` lines, the most recent at the back. A scan: L1s have
// 8 to 128 lines, where it beats node-based structures.
class LruLines {
 public:
  explicit LruLines(int64_t capacity) : capacity_(static_cast<size_t>(capacity)) { lines_.reserve(capacity_ + 1); }
  // True on a hit.
  bool touch(LineKey k) {
    // Most hits are on lines just used: search from the most recent end.
    auto rit = std::find(lines_.rbegin(), lines_.rend(), k);
    if (rit != lines_.rend()) {
      auto it = std::prev(rit.base());
      std::rotate(it, it + 1, lines_.end());
      return true;
    }
    if (lines_.size() == capacity_) lines_.erase(lines_.begin());
    lines_.push_back(k);
    return false;
  }

 private:
  size_t capacity_;
  std::vector<LineKey> lines_;
};

// One operand's reads in a K step: per read index p, the line each work-item touches (or none).
struct OperandReads {
  const StagedOperand* op = nullptr;
  int id = 0;
  bool left = true;
  int64_t regionRows = 0, regionTexels = 0, perItem = 0;
  std::vector<std::pair<int64_t, int64_t>> staged;  // read e's (row, texel) in the region, once for all K steps
};

// x / d for the line's extent: a shift where d is a power of two, as every profile's is.
struct Divider {
  explicit Divider(int64_t d) : d_(d), shift_((d & (d - 1)) == 0 ? __builtin_ctzll(static_cast<uint64_t>(d)) : -1) {}
  int64_t operator()(int64_t x) const { return shift_ >= 0 ? x >> shift_ : x / d_; }

 private:
  int64_t d_;
  int shift_;
};

}  // namespace

std::pair<int64_t, int64_t> stagedTexel(int64_t t, int64_t regionTexels, StagingOrder o) {
  const int64_t sw = o.texels == 0 ? regionTexels : o.texels;
  const int64_t chunk = t / (o.rows * sw), within = t % (o.rows * sw), perRow = regionTexels / sw;
  return {(chunk / perRow) * o.rows + within / sw, (chunk % perRow) * sw + within % sw};
}

bool fitsRegion(StagingOrder o, int64_t regionRows, int64_t regionTexels) {
  const int64_t sw = o.texels == 0 ? regionTexels : o.texels;
  return o.rows >= 1 && sw >= 1 && regionRows % o.rows == 0 && regionTexels % sw == 0;
}

std::pair<int64_t, int64_t> stagedRegion(bool left, bool transposed, const StagedTiling& t) {
  const int64_t side = left ? t.tm : t.tn;
  return transposed == left ? std::pair{t.tk, side / 4} : std::pair{side, t.tk / 4};
}

FootprintCount textureL1Misses(int64_t m, int64_t n, int64_t k, const StagedOperand& lhs, const StagedOperand& rhs,
                               const StagedTiling& t, const TextureL1& l1, int64_t maxGroups, int64_t maxKSteps) {
  FBL_ASSERT(t.workItems > 0 && t.wave > 0 && t.tk > 0 && l1.lines > 0);
  std::vector<OperandReads> ops;
  for (const StagedOperand* op : {&lhs, &rhs}) {
    const bool left = op == &lhs;
    if (!op->texel) continue;
    OperandReads r;
    r.op = op;
    r.id = left ? 0 : 1;
    r.left = left;
    std::tie(r.regionRows, r.regionTexels) = stagedRegion(left, op->transposed, t);
    r.perItem = ceilDiv(r.regionRows * r.regionTexels, t.workItems);
    FBL_ASSERT(fitsRegion(op->order, r.regionRows, r.regionTexels));
    r.staged.reserve(static_cast<size_t>(r.regionRows * r.regionTexels));
    for (int64_t e = 0; e < r.regionRows * r.regionTexels; ++e) r.staged.push_back(stagedTexel(e, r.regionTexels, op->order));
    ops.push_back(std::move(r));
  }
  FootprintCount count;
  const int64_t groupsM = ceilDiv(m, t.tm), groupsN = ceilDiv(n, t.tn), steps = ceilDiv(k, t.tk);
  const int64_t groups = maxGroups > 0 ? std::min(maxGroups, groupsM * groupsN) : groupsM * groupsN;
  const int64_t kSteps = maxKSteps > 0 ? std::min(maxKSteps, steps) : steps;
  const int64_t waves = ceilDiv(t.workItems, t.wave);
  const Divider lineY(l1.blockH), lineX(l1.blockW);
  // Per work-item, the lines of its reads in one K step, in program order (masked reads make
  // none); a wave's k-th instruction is the k-th read of each of its lanes.
  std::vector<std::vector<LineKey>> reads(static_cast<size_t>(t.workItems));
  std::vector<LineKey> instruction, touched;
  for (int64_t i = 0; i < groups; ++i) {
    // Spread over the product when sampled. The kernel's group (x, y) = (N tile, M tile), x fastest.
    const int64_t g = i * (groupsM * groupsN) / groups;
    const int64_t m0 = (g / groupsN) * t.tm, n0 = (g % groupsN) * t.tn;
    LruLines cache(l1.lines);
    touched.clear();
    for (int64_t s = 0; s < kSteps; ++s) {
      const int64_t kk = s * t.tk;
      for (auto& v : reads) v.clear();
      for (const OperandReads& r : ops) {
        const StagedOperand& op = *r.op;
        const int64_t outer = r.left ? m0 : n0;
        // Stored origin of the region: K runs along stored columns unless the operand is read
        // across its rows (left transposed: K x M; right untransposed: K x N).
        const bool kDown = r.left == op.transposed;
        const int64_t row0 = kDown ? kk : outer, col0 = kDown ? outer : kk;
        for (int64_t p = 0; p < r.perItem; ++p)
          for (int64_t tid = 0; tid < t.workItems; ++tid) {
            const int64_t e = tid + p * t.workItems;
            if (e >= r.regionRows * r.regionTexels) continue;
            const auto [rr, tc] = r.staged[static_cast<size_t>(e)];
            const int64_t row = row0 + rr, col = col0 + tc * 4;
            if (row >= op.rows || col >= op.cols) continue;
            auto [x, y] = op.texel(row, col);
            ++count.texels;
            reads[static_cast<size_t>(tid)].push_back(lineKey(r.id, lineY(y), lineX(x)));
          }
      }
      // The waves take turns, one instruction each.
      size_t longest = 0;
      for (const auto& v : reads) longest = std::max(longest, v.size());
      for (size_t ins = 0; ins < longest; ++ins)
        for (int64_t w = 0; w < waves; ++w) {
          instruction.clear();
          for (int64_t tid = w * t.wave; tid < std::min(t.workItems, (w + 1) * t.wave); ++tid)
            if (ins < reads[static_cast<size_t>(tid)].size()) instruction.push_back(reads[static_cast<size_t>(tid)][ins]);
          std::sort(instruction.begin(), instruction.end());
          instruction.erase(std::unique(instruction.begin(), instruction.end()), instruction.end());
          for (LineKey key : instruction) {
            if (!cache.touch(key)) ++count.misses;
            touched.push_back(key);
          }
        }
    }
    std::sort(touched.begin(), touched.end());
    count.lines += std::unique(touched.begin(), touched.end()) - touched.begin();
  }
  return count;
}

StagingChoice bestStaging(int64_t m, int64_t n, int64_t k, StagedOperand op, bool left, const StagedOperand& partner,
                          const StagedTiling& t, const std::vector<TextureL1>& l1s, int64_t maxGroups,
                          int64_t maxKSteps) {
  FBL_ASSERT(!l1s.empty());
  auto [rows, texels] = stagedRegion(left, op.transposed, t);
  StagingChoice best;
  double bestBytes = 0;
  for (StagingOrder o : stagingCandidates(rows, texels, t.wave)) {
    op.order = o;
    std::vector<FootprintCount> counts;
    double bytes = 0;
    for (const TextureL1& l1 : l1s) {
      counts.push_back(left ? textureL1Misses(m, n, k, op, partner, t, l1, maxGroups, maxKSteps)
                            : textureL1Misses(m, n, k, partner, op, t, l1, maxGroups, maxKSteps));
      bytes += static_cast<double>(counts.back().misses) * l1.lineBytes();
    }
    if (best.counts.empty() || bytes < bestBytes) {
      best = {o, std::move(counts)};
      bestBytes = bytes;
    }
  }
  return best;
}

std::vector<StagingOrder> stagingCandidates(int64_t regionRows, int64_t regionTexels, int64_t wave) {
  std::vector<StagingOrder> out{{1, regionTexels}};
  for (int64_t rows = 1; rows <= regionRows; rows *= 2) {
    StagingOrder o{rows, wave / rows};
    if (o.texels < 1 || rows * o.texels != wave || o.rowMajor(regionTexels) || !fitsRegion(o, regionRows, regionTexels))
      continue;
    out.push_back(o);
  }
  return out;
}

}  // namespace fbl::layout
