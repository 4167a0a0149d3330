// The memory planner against a brute-force check: no two tensors whose lifetimes overlap share
// a byte, slots are aligned and lie within one pool, and the peak is at least the largest live
// set.
#include <random>

#include <catch2/catch.hpp>

#include "compiler/plan/memory_planner.h"

namespace fbl::plan {
namespace {

TEST_CASE("planned tensors never overlap while both are alive, nor straddle a pool", "[plan][memory]") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<Interval> t;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      Interval iv;
      iv.bytes = static_cast<int64_t>(rng() % 5000);
      iv.first = static_cast<int64_t>(rng() % 40);
      iv.last = iv.first + static_cast<int64_t>(rng() % 10);
      iv.persistent = rng() % 5 == 0;
      t.push_back(iv);
    }
    const int64_t align = 256;
    // Half the trials without a limit, half with pools between the largest slot and 4x it
    // (not a multiple of the alignment: the planner rounds it down).
    int64_t largest = 0;
    for (const Interval& x : t) largest = std::max(largest, (std::max<int64_t>(x.bytes, 1) + align - 1) / align * align);
    const int64_t limit = trial % 2 == 0 ? 0 : largest + static_cast<int64_t>(rng() % (3 * largest + 1));
    const ArenaPlacement p = planMemory(t, align, limit);
    REQUIRE(p.tooLarge == -1);
    CHECK(p.poolBytes % align == 0);
    if (limit > 0) CHECK(p.poolBytes <= limit);
    auto size = [&](const Interval& x) { return std::max<int64_t>(x.bytes, 1); };
    int64_t liveMax = 0;
    for (int64_t step = 0; step < 50; ++step) {
      int64_t live = 0;
      for (const Interval& x : t)
        if (x.persistent || (x.first <= step && step <= x.last)) live += size(x);
      liveMax = std::max(liveMax, live);
    }
    CHECK(p.peakBytes >= liveMax);
    for (int i = 0; i < n; ++i) {
      CHECK(p.offsets[i] % align == 0);
      CHECK(p.offsets[i] + size(t[i]) <= p.peakBytes);
      CHECK(p.offsets[i] / p.poolBytes == (p.offsets[i] + size(t[i]) - 1) / p.poolBytes);
      for (int j = i + 1; j < n; ++j) {
        const bool together = t[i].persistent || t[j].persistent ||
                              (t[i].first <= t[j].last && t[j].first <= t[i].last);
        const bool disjoint = p.offsets[i] + size(t[i]) <= p.offsets[j] || p.offsets[j] + size(t[j]) <= p.offsets[i];
        if (together) CHECK(disjoint);
      }
    }
  }
}

TEST_CASE("tensors with disjoint lifetimes share memory", "[plan][memory]") {
  const ArenaPlacement p = planMemory({{1024, 0, 1, false}, {1024, 2, 3, false}, {1024, 4, 5, false}}, 256);
  CHECK(p.peakBytes == 1024);
}

TEST_CASE("an arena that fits one pool is planned as without a limit", "[plan][memory]") {
  const std::vector<Interval> t = {{3000, 0, 4, false}, {1000, 1, 2, false}, {500, 0, 9, true}, {2000, 3, 6, false}};
  const ArenaPlacement free = planMemory(t, 256), pooled = planMemory(t, 256, 1 << 20);
  CHECK(pooled.offsets == free.offsets);
  CHECK(pooled.peakBytes == free.peakBytes);
  CHECK(pooled.poolBytes == 1 << 20);
  CHECK(free.poolBytes == free.peakBytes);
}

TEST_CASE("a slot that would straddle a pool moves up to the next one", "[plan][memory]") {
  // Pools of 1024 (the limit rounded down): the persistent 768 and 512 cannot share the first
  // pool; the transient 512 goes above the persistent region, in the second.
  const ArenaPlacement p = planMemory({{768, 0, 9, true}, {512, 0, 9, true}, {512, 0, 9, false}}, 256, 1024 + 100);
  CHECK(p.poolBytes == 1024);
  CHECK(p.offsets == std::vector<int64_t>{0, 1024, 1536});
  CHECK(p.persistentBytes == 768 + 512);  // their slots; the gap below the second pool is not theirs
  CHECK(p.peakBytes == 2048);
}

TEST_CASE("a pooled arena places persistent tensors among the others where that is smaller", "[plan][memory]") {
  // Pools of 1024: a 256-byte weight, a 1024-byte staging tensor alive only after the step
  // (launch 2), a 512-byte activation. Persistent first, the staging tensor cannot share the
  // weight's pool and takes a pool of its own (2048 bytes); among the others, it takes the first
  // pool whole, the weight the second, and the activation the staging tensor's bytes.
  const std::vector<Interval> t = {{256, 0, 2, true}, {1024, 2, 2, false}, {512, 0, 1, false}};
  const ArenaPlacement p = planMemory(t, 256, 1024);
  CHECK(p.peakBytes == 1280);
  CHECK(p.offsets == std::vector<int64_t>{1024, 0, 0});
  CHECK(p.persistentBytes == 256);
  // Without a limit, persistent tensors stay at the bottom.
  CHECK(planMemory(t, 256).offsets == std::vector<int64_t>{0, 256, 256});
}

TEST_CASE("a tensor larger than a pool leaves the arena in one pool and is named", "[plan][memory]") {
  const ArenaPlacement p = planMemory({{300, 0, 1, false}, {5000, 0, 1, true}, {9000, 1, 2, false}}, 256, 4096);
  CHECK(p.tooLarge == 2);
  CHECK(p.poolBytes >= p.peakBytes);
}

}  // namespace
}  // namespace fbl::plan
