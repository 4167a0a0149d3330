// The memory planner against a brute-force check: no two tensors whose lifetimes overlap share
// a byte, slots are aligned, and the peak is at least the largest live set.
#include <random>

#include <catch2/catch.hpp>

#include "compiler/plan/memory_planner.h"

namespace fbl::plan {
namespace {

TEST_CASE("planned tensors never overlap while both are alive", "[plan][memory]") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
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
    const ArenaPlacement p = planMemory(t, align);
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

}  // namespace
}  // namespace fbl::plan
