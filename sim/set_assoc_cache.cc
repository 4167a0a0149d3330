#include "sim/set_assoc_cache.h"

namespace fbl::sim {

SetAssocCache::SetAssocCache(const CacheGeometry& g) : g_(g) {
  sets_ = g.sets();
  ways_ = g.ways == 0 ? g.lines() : g.ways;
  if (ways_ < 1) ways_ = 1;
  ways.assign(static_cast<size_t>(sets_ * ways_), Way{});
}

SetAssocCache::Outcome SetAssocCache::access(uint64_t line, bool dirty) {
  Way* set = &ways[static_cast<size_t>((line & static_cast<uint64_t>(sets_ - 1)) * ways_)];
  ++clock_;
  Way* victim = set;
  for (int64_t w = 0; w < ways_; ++w) {
    Way& way = set[w];
    if (way.age != 0 && way.line == line) {
      if (g_.replacement == Replacement::kLru) way.age = clock_;
      way.dirty = way.dirty || dirty;
      return {true, std::nullopt};
    }
    // The victim: an invalid way if any, else the smallest age.
    if (victim->age != 0 && (way.age == 0 || way.age < victim->age)) victim = &way;
  }
  Outcome o;
  if (victim->age != 0 && victim->dirty) o.writeBack = victim->line;
  *victim = Way{line, clock_, dirty};
  return o;
}

bool SetAssocCache::contains(uint64_t line) const {
  const Way* set = &ways[static_cast<size_t>((line & static_cast<uint64_t>(sets_ - 1)) * ways_)];
  for (int64_t w = 0; w < ways_; ++w)
    if (set[w].age != 0 && set[w].line == line) return true;
  return false;
}

std::vector<uint64_t> SetAssocCache::cleanDirty() {
  std::vector<uint64_t> out;
  for (Way& w : ways)
    if (w.age != 0 && w.dirty) {
      out.push_back(w.line);
      w.dirty = false;
    }
  return out;
}

void SetAssocCache::clear() {
  for (Way& w : ways) w = Way{};
}

}  // namespace fbl::sim
