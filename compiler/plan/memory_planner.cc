// Memory planning by liveness, greedy by size:
//  1. persistent tensors (alive across steps) are laid out first, back to back, in tensor order;
//  2. transient tensors are sorted by size (largest first, ties by first use, then id);
//  3. each takes the lowest aligned offset above the persistent region where it overlaps no
//     already placed transient tensor whose [first, last] launch interval intersects its own;
//  4. the peak is the highest end of any slot.
// With a pool limit, a slot that would straddle a pool boundary moves up to the next pool, in
// steps 1 and 3 alike: first fit stays first fit, among the offsets a pool can hold. A pooled
// arena is also planned with the persistent tensors among the others (alive at every launch, in
// the same order by size), and the smaller arena wins: a tensor that lives only between steps
// (the staging tensor) may then share the first pool with the transient ones instead of taking
// a pool of its own above the persistent region.
// Greedy-by-size is the usual choice (TFLite's arena planner, XLA's heap simulator) and is
// within a few percent of optimal on transformer graphs.
#include "compiler/plan/memory_planner.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "compiler/support/int_math.h"

namespace fbl::plan {

namespace {

ArenaPlacement place(const std::vector<Interval>& tensors, int64_t alignment, int64_t pool, bool persistentFirst) {
  ArenaPlacement p;
  p.offsets.assign(tensors.size(), 0);
  auto slot = [&](const Interval& t) { return roundUp(std::max<int64_t>(t.bytes, 1), alignment); };
  // The lowest offset at or above `at` where `size` bytes lie within one pool.
  auto inPool = [&](int64_t at, int64_t size) { return at / pool == (at + size - 1) / pool ? at : roundUp(at, pool); };
  // A persistent tensor placed among the others is alive at every launch.
  constexpr int64_t kAlways = std::numeric_limits<int64_t>::max() / 4;
  auto first = [&](const Interval& t) { return t.persistent ? -kAlways : t.first; };
  auto last = [&](const Interval& t) { return t.persistent ? kAlways : t.last; };
  int64_t base = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].persistent) continue;
    p.persistentBytes += slot(tensors[i]);
    if (!persistentFirst) continue;
    base = inPool(base, slot(tensors[i]));
    p.offsets[i] = base;
    base += slot(tensors[i]);
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!persistentFirst || !tensors[i].persistent) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (slot(tensors[a]) != slot(tensors[b])) return slot(tensors[a]) > slot(tensors[b]);
    if (first(tensors[a]) != first(tensors[b])) return first(tensors[a]) < first(tensors[b]);
    return a < b;
  });
  struct Placed {
    int64_t offset, end, first, last;
  };
  // Kept in order of (offset, end), so that the live-overlapping ones are walked by offset
  // without sorting them again for every tensor.
  std::vector<Placed> placed;
  auto byRange = [](const Placed& a, const Placed& b) { return a.offset != b.offset ? a.offset < b.offset : a.end < b.end; };
  int64_t peak = base;
  for (size_t i : order) {
    const Interval& t = tensors[i];
    const int64_t size = slot(t);
    // The first gap between the busy ranges of live-overlapping tensors that fits in one pool.
    // `at` only grows, and every range walked past ends at or below it.
    int64_t at = inPool(base, size);
    for (const Placed& q : placed) {
      if (q.first > last(t) || first(t) > q.last) continue;
      if (q.offset >= at + size) break;
      at = inPool(std::max(at, q.end), size);
    }
    p.offsets[i] = at;
    const Placed mine{at, at + size, first(t), last(t)};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), mine, byRange), mine);
    peak = std::max(peak, at + size);
  }
  p.peakBytes = peak;
  return p;
}

}  // namespace

ArenaPlacement planMemory(const std::vector<Interval>& tensors, int64_t alignment, int64_t maxPoolBytes) {
  const int64_t limit = maxPoolBytes / alignment * alignment;
  int64_t tooLarge = -1, largest = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t slot = roundUp(std::max<int64_t>(tensors[i].bytes, 1), alignment);
    if (maxPoolBytes > 0 && slot > limit && slot > largest) {
      tooLarge = static_cast<int64_t>(i);
      largest = slot;
    }
  }
  if (maxPoolBytes > 0 && tooLarge < 0) {
    ArenaPlacement p = place(tensors, alignment, limit, /*persistentFirst=*/true);
    if (p.peakBytes > limit) {
      ArenaPlacement mixed = place(tensors, alignment, limit, /*persistentFirst=*/false);
      if (mixed.peakBytes < p.peakBytes) p = std::move(mixed);
    }
    p.poolBytes = limit;
    return p;
  }
  ArenaPlacement p = place(tensors, alignment, std::numeric_limits<int64_t>::max() / 2, /*persistentFirst=*/true);
  p.poolBytes = roundUp(std::max<int64_t>(p.peakBytes, 1), alignment);
  p.tooLarge = tooLarge;
  return p;
}

}  // namespace fbl::plan
