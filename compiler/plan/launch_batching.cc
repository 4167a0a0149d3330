#include "compiler/plan/launch_batching.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <unordered_map>

namespace fbl::plan {

namespace {

bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Does one of a, b write a tensor the other reads or writes?
bool conflict(const LaunchAccess& a, const LaunchAccess& b) {
  for (int32_t w : a.writes)
    if (contains(b.args, w)) return true;
  for (int32_t w : b.writes)
    if (contains(a.args, w)) return true;
  return false;
}

class Batcher {
 public:
  Batcher(const std::vector<LaunchAccess>& launches, const std::vector<int64_t>& bytes, const BatchLimits& limits)
      : launches_(launches), bytes_(bytes), limits_(limits) {
    for (size_t i = 0; i < launches.size(); ++i) items_.push_back({i});
    // Keys as numbers: the scan for a launch's partners compares one against every later launch.
    std::unordered_map<std::string, int64_t> ids;
    for (const LaunchAccess& l : launches)
      keys_.push_back(l.batchKey.empty() ? -1 : ids.emplace(l.batchKey, static_cast<int64_t>(ids.size())).first->second);
  }

  std::vector<std::vector<size_t>> run() {
    if (limits_.maxProducts < 2) return std::move(items_);
    indexAccesses();
    // Passes until none forms a group: one that moves a launch later (up's x^T dt, after gate's
    // dt) can open the room an earlier launch lacked (up's dy B, to join gate's).
    for (bool formed = true; formed;) {
      formed = false;
      for (size_t pos = 0; pos < items_.size();)
        if (items_[pos].size() == 1 && keys_[items_[pos][0]] >= 0 && tryGroupFrom(pos))
          formed = true;
        else
          ++pos;
    }
    return std::move(items_);
  }

 private:
  // Per tensor, the items that touch it and those that write it, in order, on the current order:
  // a launch's nearest conflicts either side are then a binary search per argument, not a walk
  // over every item between (the walk was most of the batching's time on full-depth models).
  void indexAccesses() {
    touchedAt_.assign(bytes_.size(), {});
    writtenAt_.assign(bytes_.size(), {});
    auto note = [](std::vector<size_t>& at, size_t i) {
      if (at.empty() || at.back() != i) at.push_back(i);
    };
    for (size_t i = 0; i < items_.size(); ++i)
      for (size_t l : items_[i]) {
        for (int32_t t : launches_[l].args) note(touchedAt_[t], i);
        for (int32_t t : launches_[l].writes) note(writtenAt_[t], i);
      }
  }

  // The items that conflict with `launch` (conflict()): those writing a tensor it touches, and
  // those touching a tensor it writes. `visit(list)` sees each of their position lists.
  template <typename Visit>
  void forConflictLists(size_t launch, Visit visit) const {
    for (int32_t t : launches_[launch].args) visit(writtenAt_[t]);
    for (int32_t t : launches_[launch].writes) visit(touchedAt_[t]);
  }

  // The first item after position `at` that conflicts with `launch`, or `none`.
  size_t firstConflictAfter(size_t launch, size_t at, size_t none) const {
    size_t first = none;
    forConflictLists(launch, [&](const std::vector<size_t>& list) {
      auto it = std::upper_bound(list.begin(), list.end(), at);
      if (it != list.end()) first = std::min(first, *it);
    });
    return first;
  }

  // One past the last item in [from, at) that conflicts with `launch`; `from` if none does.
  size_t pastLastConflictBefore(size_t launch, size_t at, size_t from) const {
    size_t past = from;
    forConflictLists(launch, [&](const std::vector<size_t>& list) {
      auto it = std::lower_bound(list.begin(), list.end(), at);
      if (it != list.begin()) past = std::max(past, *std::prev(it) + 1);
    });
    return past;
  }

  // First and last item touching tensor `t`, on the current order (items_.size() and 0: none).
  size_t firstTouch(int32_t t) const { return touchedAt_[t].empty() ? items_.size() : touchedAt_[t].front(); }
  size_t lastTouch(int32_t t) const { return touchedAt_[t].empty() ? 0 : touchedAt_[t].back(); }

  // Bytes of transient values that live longer when the launches at item positions `at` run just
  // before item `gap`: inputs whose last reader runs later, outputs whose writer runs earlier.
  int64_t lengthened(const std::vector<size_t>& at, size_t gap) const {
    std::set<int32_t> longer;
    for (size_t q : at) {
      const LaunchAccess& l = launches_[items_[q][0]];
      for (int32_t t : l.args) {
        const bool written = contains(l.writes, t);
        if ((!written && gap > q + 1 && lastTouch(t) < gap) || (written && gap < q && firstTouch(t) >= gap))
          longer.insert(t);
      }
    }
    int64_t sum = 0;
    for (int32_t t : longer) sum += bytes_[t];
    return sum;
  }

  int64_t written(const std::vector<size_t>& at) const {
    int64_t sum = 0;
    for (size_t q : at)
      for (int32_t t : launches_[items_[q][0]].writes) sum += bytes_[t];
    return sum;
  }

  // Forms the group of the launch at item `pos`; true when it merged any (the item at `pos` is
  // then another).
  bool tryGroupFrom(size_t pos) {
    const size_t first = items_[pos][0];
    const LaunchAccess& a = launches_[first];
    std::vector<size_t> group{pos};
    size_t args = a.args.size();
    // The group runs just before item `lo`, with lo <= hi: no member depends on an item in
    // [lo, its position) or on one in (its position, hi).
    size_t lo = pos;
    size_t hi = firstConflictAfter(first, pos, items_.size());
    for (size_t q = pos + 1; q < items_.size() && static_cast<int64_t>(group.size()) < limits_.maxProducts; ++q) {
      if (items_[q].size() != 1) continue;
      const size_t c = items_[q][0];
      const LaunchAccess& b = launches_[c];
      if (keys_[c] != keys_[first] || static_cast<int64_t>(args + b.args.size()) > limits_.maxArgs) continue;
      bool independent = true;
      for (size_t m : group) independent = independent && !conflict(launches_[items_[m][0]], b);
      if (!independent) continue;
      const size_t qLo = pastLastConflictBefore(c, q, lo), qHi = firstConflictAfter(c, q, hi);
      if (qLo > qHi) continue;
      std::vector<size_t> with = group;
      with.push_back(q);
      if (lengthened(with, qLo) > written(with)) continue;
      group = std::move(with);
      args += b.args.size();
      lo = qLo;
      hi = qHi;
    }
    if (group.size() < 2) return false;
    std::vector<size_t> merged;
    for (size_t m : group) merged.push_back(items_[m][0]);
    std::vector<std::vector<size_t>> next;
    next.reserve(items_.size() - group.size() + 1);
    for (size_t i = 0; i <= items_.size(); ++i) {
      if (i == lo) next.push_back(merged);
      if (i < items_.size() && std::find(group.begin(), group.end(), i) == group.end()) next.push_back(std::move(items_[i]));
    }
    items_ = std::move(next);
    indexAccesses();
    return true;
  }

  const std::vector<LaunchAccess>& launches_;
  const std::vector<int64_t>& bytes_;
  BatchLimits limits_;
  std::vector<int64_t> keys_;  // per launch, its batchKey's number; -1: none
  std::vector<std::vector<size_t>> items_;
  std::vector<std::vector<size_t>> touchedAt_, writtenAt_;
};

}  // namespace

std::vector<std::vector<size_t>> batchIndependentLaunches(const std::vector<LaunchAccess>& launches,
                                                          const std::vector<int64_t>& transientBytes,
                                                          const BatchLimits& limits) {
  return Batcher(launches, transientBytes, limits).run();
}

}  // namespace fbl::plan
