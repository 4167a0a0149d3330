#include "runtime/sample_order.h"

#include <numeric>
#include <utility>

namespace fbl::rt {

namespace {

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t below(uint64_t n, uint64_t* state) {
  // 2^64 mod n, computed in 64 bits as (2^64 - n) mod n.
  const uint64_t limit = 0 - ((0 - n) % n);
  while (true) {
    const uint64_t r = splitmix64(state);
    if (limit == 0 || r < limit) return r % n;
  }
}

}  // namespace

uint64_t splitmix64(uint64_t* state) {
  *state += 0x9E3779B97F4A7C15ull;
  return mix(*state);
}

std::vector<int64_t> seededPermutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> a(static_cast<size_t>(n));
  std::iota(a.begin(), a.end(), int64_t{0});
  uint64_t state = seed ^ mix(stream);
  for (int64_t i = n - 1; i >= 1; --i) std::swap(a[i], a[below(static_cast<uint64_t>(i + 1), &state)]);
  return a;
}

SampleOrder::SampleOrder(int64_t samples, int64_t heldOut, std::optional<uint64_t> seed) : seed_(seed) {
  std::vector<int64_t> all(static_cast<size_t>(samples));
  std::iota(all.begin(), all.end(), int64_t{0});
  if (seed_) all = seededPermutation(samples, *seed_, 0);
  train_.assign(all.begin(), all.end() - heldOut);
  heldOut_.assign(all.end() - heldOut, all.end());
}

int64_t SampleOrder::sampleAt(int64_t position) {
  const int64_t n = trainCount();
  const int64_t epoch = position / n, at = position % n;
  if (!seed_) return train_[static_cast<size_t>(at)];
  if (epoch != epoch_) {
    epochOrder_ = seededPermutation(n, *seed_, static_cast<uint64_t>(epoch) + 1);
    epoch_ = epoch;
  }
  return train_[static_cast<size_t>(epochOrder_[static_cast<size_t>(at)])];
}

}  // namespace fbl::rt
