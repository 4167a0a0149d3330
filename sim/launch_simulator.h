// The simulator's core, independent of Oclgrind: it receives one launch's accesses in the order
// Oclgrind makes them and feeds the memory hierarchy in the order a GPU would.
//
//  1. Work-group g runs on compute unit g % computeUnits (round-robin dispatch).
//  2. Each group's accesses become wave instructions (sim/wave_regrouper.h), appended to its
//     compute unit's stream.
//  3. Groups run `computeUnits` at a time: when a round is complete (or the launch ends), the
//     round's streams are replayed interleaved, one instruction per compute unit in turn, so L2
//     sees the compute units' requests mixed as they would be when running concurrently.
//  4. At the launch's end the hierarchy writes back and empties its L1s; L2 keeps its lines for
//     the next launch. The launch's counters are the difference over the launch.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "sim/access_counters.h"
#include "sim/memory_hierarchy.h"
#include "sim/wave_regrouper.h"

namespace fbl::sim {

// An image argument as the plugin finds it: linear texels at `base`.
struct ImageArgument {
  uint64_t base = 0;
  int64_t width = 0, height = 0, pixelBytes = 16;
};

class LaunchSimulator {
 public:
  explicit LaunchSimulator(const MemoryModel& m);

  // Images are indexed in the given order by LaneAccess::image.
  void beginLaunch(const std::vector<ImageArgument>& images);
  // The image whose texels hold `address`, or -1.
  int32_t imageAt(uint64_t address) const;
  void beginGroup(size_t groupIndex, size_t workItems);
  void access(size_t localId, LaneAccess a);
  void barrier();
  void endGroup();
  AccessCounters endLaunch();

  // Counts the plugin adds itself (instructions, FLOPs, work-items).
  AccessCounters& counters() { return hierarchy_.counters(); }
  const MemoryModel& model() const { return hierarchy_.model(); }

 private:
  void replayRound();

  MemoryHierarchy hierarchy_;
  WaveRegrouper regrouper_;
  std::vector<ImageExtent> images_;
  std::map<uint64_t, uint64_t> tiledBaseOf_;  // an image's linear base -> its tiled copy's base
  uint64_t nextTiledBase_;
  std::vector<WaveStream> round_;  // per compute unit
  size_t groupsInRound_ = 0;
  int cu_ = 0;
  AccessCounters atLaunchStart_;
};

}  // namespace fbl::sim
