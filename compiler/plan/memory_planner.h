// The memory planner: places every plan tensor in one arena so that tensors whose lifetimes
// overlap never share bytes, and the arena (the planned peak) stays small. The arena is
// allocated as pools no larger than the device's largest allocation, so no tensor may straddle
// a pool boundary.
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
  // The persistent tensors' slots: the bottom of the arena, unless a pooled arena came out
  // smaller with them placed among the others (memory_planner.cc).
  int64_t persistentBytes = 0;
  // The pool size the offsets respect: a multiple of the alignment, every slot within one pool.
  int64_t poolBytes = 0;
  // The largest tensor whose slot exceeds the pool limit, or -1. When there is one, the arena is
  // planned as one pool (poolBytes covers it all) and the caller decides whether that may stand.
  int64_t tooLarge = -1;
};

// Offsets aligned to `alignment`; a zero-byte tensor still gets its own aligned slot, because
// OpenCL buffers cannot be empty. `maxPoolBytes`: the largest pool (the device's largest
// allocation), rounded down to the alignment; 0 for no limit.
ArenaPlacement planMemory(const std::vector<Interval>& tensors, int64_t alignment, int64_t maxPoolBytes = 0);

}  // namespace fbl::plan
