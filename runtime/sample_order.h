// The order in which a training run visits a dataset's samples: which are held out for
// evaluation, and the permutation of the rest in every epoch. A pure function of the sample
// count, the held-out count, the seed and the epoch, computed the same way on every platform
// (no std::shuffle or std::uniform_int_distribution, whose output differs between standard
// libraries), so that a resumed run and a run on a phone see the samples a desktop run saw.
//
// The algorithm (docs/runtime.md, "Datasets"):
//  1. random numbers: splitmix64 (Steele, Lea, Flood 2014): state += 0x9E3779B97F4A7C15, then
//     z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB;
//     z ^ z>>31. Stream k of seed S starts from state S ^ mix(k), mix being the last three lines
//     applied to k, so that streams of one seed are unrelated;
//  2. a number below n: draw r until r < 2^64 - (2^64 mod n), return r mod n (no bias);
//  3. a permutation of 0..n-1: Fisher-Yates from the top: for i = n-1 down to 1, swap a[i] with
//     a[below(i+1)];
//  4. the split: the permutation of all N samples from stream 0; its last M entries are the
//     held-out samples, the first N-M the training samples (in that order);
//  5. epoch e (0-based) visits the training samples in the order of the permutation of 0..N-M-1
//     from stream e+1 applied to that list.
// Without a seed every permutation is the identity: the held-out samples are the last M, and
// every epoch visits the rest in file order.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace fbl::rt {

uint64_t splitmix64(uint64_t* state);
// Steps 1-3: the permutation of 0..n-1 of stream `stream` of `seed`.
std::vector<int64_t> seededPermutation(int64_t n, uint64_t seed, uint64_t stream);

class SampleOrder {
 public:
  // `heldOut` < `samples`; no seed: file order.
  SampleOrder(int64_t samples, int64_t heldOut, std::optional<uint64_t> seed);

  int64_t trainCount() const { return static_cast<int64_t>(train_.size()); }
  const std::vector<int64_t>& heldOut() const { return heldOut_; }
  // The sample that training position `position` (0-based, over all epochs) visits; its epoch
  // is position / trainCount() and its place in that epoch position % trainCount().
  int64_t sampleAt(int64_t position);

 private:
  std::vector<int64_t> train_, heldOut_;
  std::optional<uint64_t> seed_;
  int64_t epoch_ = -1;             // the epoch whose order is in `epochOrder_`
  std::vector<int64_t> epochOrder_;
};

}  // namespace fbl::rt
