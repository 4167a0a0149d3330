// The memory planner: places every plan tensor in one arena so that tensors whose lifetimes
// overlap never share bytes, and the arena (the planned peak) stays small.
#pragma once

#include <cstdint>
#include <vector>

namespace fbl::plan {

struct Interval {
  int64_t bytes = 0;
  int64_t first = 0;  // first launch that touches it
  int64_t last = 0;   // last launch that touches it (inclusive)
  bool persistent = false;  // weights, trainables, state, inputs: alive across steps
};

// Where planMemory put each tensor: its byte offset in the arena (by tensor index).
struct ArenaPlacement {
  std::vector<int64_t> offsets;
  int64_t peakBytes = 0;
  int64_t persistentBytes = 0;  // the bottom of the arena, holding the persistent tensors
};

// Offsets aligned to `alignment`; a zero-byte tensor still gets its own aligned slot, because
// OpenCL sub-buffers cannot be empty.
ArenaPlacement planMemory(const std::vector<Interval>& tensors, int64_t alignment);

}  // namespace fbl::plan
