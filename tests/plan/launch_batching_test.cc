// Launch batching (compiler/plan/launch_batching.h) on launch lists written out by hand, as a
// LoRA layer's forward and backward order them, and on random ones against the rule itself: no
// two launches where one writes what the other touches change order or share a launch.
#include <algorithm>
#include <random>

#include <catch2/catch.hpp>

#include "compiler/plan/launch_batching.h"

namespace fbl::plan {
namespace {

using Order = std::vector<std::vector<size_t>>;

LaunchAccess launch(std::vector<int32_t> reads, std::vector<int32_t> writes, std::string key = "") {
  LaunchAccess l;
  l.args = reads;
  l.args.insert(l.args.end(), writes.begin(), writes.end());
  l.writes = std::move(writes);
  l.batchKey = std::move(key);
  return l;
}

BatchLimits upTo(int64_t products, int64_t args = kMaxBatchedArgs) {
  BatchLimits b;
  b.maxProducts = products;
  b.maxArgs = args;
  return b;
}

TEST_CASE("q, k and v's x A run as one launch before the first product that reads one", "[plan][batching]") {
  // Tensors: 0 x; 1-3 A_q, A_k, A_v; 4-6 t_q, t_k, t_v; 7-9 W; 10-12 y.
  const std::vector<LaunchAccess> l = {
      launch({0, 1}, {4}, "xA"), launch({0, 7, 4}, {10}),  // t_q, then y_q = x W_q + t_q B_q
      launch({0, 2}, {5}, "xA"), launch({0, 8, 5}, {11}),
      launch({0, 3}, {6}, "xA"), launch({0, 9, 6}, {12})};
  const std::vector<int64_t> bytes(13, 64);
  CHECK(batchIndependentLaunches(l, bytes, upTo(8)) == Order{{0, 2, 4}, {1}, {3}, {5}});
  CHECK(batchIndependentLaunches(l, bytes, upTo(2)) == Order{{0, 2}, {1}, {3}, {4}, {5}});
  CHECK(batchIndependentLaunches(l, bytes, upTo(1)) == Order{{0}, {1}, {2}, {3}, {4}, {5}});
  // Three arguments a launch: 7 would not fit two.
  CHECK(batchIndependentLaunches(l, bytes, upTo(8, 5)) == Order{{0}, {1}, {2}, {3}, {4}, {5}});
  // Other keys (another shape, another phase) never join.
  std::vector<LaunchAccess> other = l;
  other[2].batchKey = "xA'";
  CHECK(batchIndependentLaunches(other, bytes, upTo(8)) == Order{{0, 4}, {1}, {2}, {3}, {5}});
}

TEST_CASE("the backward's x^T dt wait for the last dt and run before the optimizer reads them", "[plan][batching]") {
  // 0 x; 1-2 dy; 3-4 dt; 5-6 dA; 7-8 B.
  const std::vector<LaunchAccess> l = {
      launch({1, 7}, {3}),       launch({0, 3}, {5}, "xTdt"),  // dt_q = dy_q B_q, dA_q = x^T dt_q
      launch({2, 8}, {4}),       launch({0, 4}, {6}, "xTdt"),
      launch({5, 6}, {5, 6})};  // the optimizer updates both in place
  std::vector<int64_t> bytes(9, 64);
  CHECK(batchIndependentLaunches(l, bytes, upTo(8)) == Order{{0}, {2}, {1, 3}, {4}});
  // Holding x longer is free while nothing else reads it later...
  bytes[0] = 1 << 20;
  CHECK(batchIndependentLaunches(l, bytes, upTo(8)) == Order{{0}, {2}, {1, 3}, {4}});
  // ... but when dA_q is x's last reader, waiting would hold x past it: 1 MB against the 128
  // bytes the two products write.
  std::vector<LaunchAccess> split = l;
  split[3].args = {9, 4, 6};  // dA_k reads another layer's x
  bytes.push_back(64);
  CHECK(batchIndependentLaunches(split, bytes, upTo(8)) == Order{{0}, {1}, {2}, {3}, {4}});
  bytes[0] = 0;  // a tensor that lives through the step anyway
  CHECK(batchIndependentLaunches(split, bytes, upTo(8)) == Order{{0}, {2}, {1, 3}, {4}});
}

TEST_CASE("gate and up's dy B join once their x^T dt have moved after gate's dt", "[plan][batching]") {
  // 0 dy_up; 1 dy_gate; 2, 7 B_up, B_gate (weights: they live through the step); 3, 8 dt;
  // 4 x; 5, 9 dA; 6 what gate's dy is computed from. Up's dy B cannot wait for dy_gate while
  // up's x^T dt reads its dt before dy_gate is written; once the x^T dt have joined after gate's
  // dt, a second pass batches the dy B.
  const std::vector<LaunchAccess> l = {
      launch({0, 2}, {3}, "dyB"), launch({4, 3}, {5}, "xTdt"),  // up
      launch({6}, {1}),                                          // dy_gate
      launch({1, 7}, {8}, "dyB"), launch({4, 8}, {9}, "xTdt"),  // gate
      launch({5, 9}, {5, 9})};
  std::vector<int64_t> bytes(10, 64);
  bytes[2] = bytes[7] = 0;
  CHECK(batchIndependentLaunches(l, bytes, upTo(8)) == Order{{2}, {0, 3}, {1, 4}, {5}});
  // Where that would hold dy_up longer than the launches write, they stay apart.
  bytes[0] = 1 << 20;
  CHECK(batchIndependentLaunches(l, bytes, upTo(8)) == Order{{0}, {2}, {3}, {1, 4}, {5}});
}

TEST_CASE("launches that depend on each other, or on what lies between them, stay apart", "[plan][batching]") {
  const std::vector<int64_t> bytes(8, 64);
  // The second reads the first's output.
  CHECK(batchIndependentLaunches({launch({0}, {1}, "k"), launch({1}, {2}, "k")}, bytes, upTo(8)) ==
        Order{{0}, {1}});
  // A launch between them overwrites what the first reads, and the second reads its result.
  CHECK(batchIndependentLaunches({launch({0}, {1}, "k"), launch({}, {0}), launch({0}, {2}, "k")}, bytes, upTo(8)) ==
        Order{{0}, {1}, {2}});
  // Both write one tensor.
  CHECK(batchIndependentLaunches({launch({0}, {1}, "k"), launch({3}, {1}, "k")}, bytes, upTo(8)) == Order{{0}, {1}});
}

// Does `order` keep every dependent pair of `l` in its order, in different launches, and run
// each launch once?
bool respectsDependencies(const std::vector<LaunchAccess>& l, const Order& order) {
  std::vector<size_t> at(l.size(), SIZE_MAX);
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t x : order[i]) {
      if (at[x] != SIZE_MAX) return false;
      at[x] = i;
    }
  auto touches = [](const LaunchAccess& a, const LaunchAccess& b) {
    for (int32_t w : a.writes)
      if (std::find(b.args.begin(), b.args.end(), w) != b.args.end()) return true;
    return false;
  };
  for (size_t a = 0; a < l.size(); ++a) {
    if (at[a] == SIZE_MAX) return false;
    for (size_t b = a + 1; b < l.size(); ++b)
      if ((touches(l[a], l[b]) || touches(l[b], l[a])) && at[a] >= at[b]) return false;
  }
  return true;
}

TEST_CASE("random launch lists keep every dependency", "[plan][batching]") {
  std::mt19937 rng(7);
  int64_t batched = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int tensors = 4 + static_cast<int>(rng() % 20), n = 2 + static_cast<int>(rng() % 40);
    std::vector<LaunchAccess> l;
    for (int i = 0; i < n; ++i) {
      std::vector<int32_t> reads, writes;
      for (int r = static_cast<int>(rng() % 3); r >= 0; --r) reads.push_back(static_cast<int32_t>(rng() % tensors));
      for (int w = static_cast<int>(rng() % 2); w >= 0; --w) writes.push_back(static_cast<int32_t>(rng() % tensors));
      l.push_back(launch(reads, writes, rng() % 3 ? std::string(1, static_cast<char>('a' + rng() % 2)) : ""));
    }
    std::vector<int64_t> bytes(static_cast<size_t>(tensors));
    for (int64_t& b : bytes) b = static_cast<int64_t>(rng() % 3) * 64;
    const Order order = batchIndependentLaunches(l, bytes, upTo(1 + static_cast<int64_t>(rng() % 4)));
    INFO("trial " << trial);
    REQUIRE(respectsDependencies(l, order));
    for (const auto& item : order) {
      batched += item.size() > 1;
      for (size_t x : item) CHECK(l[x].batchKey == l[item[0]].batchKey);
    }
  }
  CHECK(batched > 50);  // the trials did batch
}

}  // namespace
}  // namespace fbl::plan
