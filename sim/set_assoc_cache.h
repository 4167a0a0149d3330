// One cache level: a set-associative array of line tags with LRU or FIFO replacement and dirty
// bits. It stores no data; `access` says whether a line is present and makes it present.
//
//  1. A line number (address / line size) maps to set `line % sets` (sets are a power of two).
//  2. A hit refreshes the line's age under LRU (FIFO keeps its insertion age).
//  3. A miss fills the set's invalid way, else evicts the oldest line; an evicted dirty line is
//     returned so that the level below can be charged for its write-back.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/memory_model.h"

namespace fbl::sim {

class SetAssocCache {
 public:
  explicit SetAssocCache(const CacheGeometry& g);

  struct Outcome {
    bool hit = false;
    std::optional<uint64_t> writeBack;  // a dirty line this access evicted
  };
  // Looks up `line` (a line number, not a byte address) and makes it present; `dirty` marks it
  // written (a store).
  Outcome access(uint64_t line, bool dirty);
  // Whether `line` is present, without touching ages.
  bool contains(uint64_t line) const;
  // Every dirty line, now clean (end of a launch); they stay present.
  std::vector<uint64_t> cleanDirty();
  void clear();

  const CacheGeometry& geometry() const { return g_; }

 private:
  struct Way {
    uint64_t line = 0;
    uint64_t age = 0;  // last use (LRU) or fill (FIFO); 0: invalid
    bool dirty = false;
  };
  CacheGeometry g_;
  int64_t sets_ = 1, ways_ = 1;
  uint64_t clock_ = 0;
  std::vector<Way> ways;  // sets_ x ways_
};

}  // namespace fbl::sim
