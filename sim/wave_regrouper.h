// Oclgrind runs the work-items of a work-group one at a time, each until a barrier or its end;
// a GPU runs `waveSize` of them in lock-step. The regrouper turns the first order into the
// second:
//
//  1. Between two barriers, each work-item's global accesses are kept in its own list, in
//     program order. An image read arrives as one load per channel; consecutive loads of one
//     texel by one work-item are merged back into one texel fetch.
//  2. Work-item i (local linear id) is lane i % waveSize of wave i / waveSize.
//  3. At the barrier (or the group's end), wave w's instruction k holds the k-th access of each
//     of its lanes that has one. Instructions are emitted k-major: instruction k of every wave,
//     then k + 1, as the waves of one compute unit interleave.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/memory_hierarchy.h"

namespace fbl::sim {

// A stream of wave instructions: instruction i is accesses[starts[i] .. starts[i+1]).
struct WaveStream {
  std::vector<LaneAccess> accesses;
  std::vector<uint32_t> starts;

  size_t instructions() const { return starts.size(); }
  const LaneAccess* begin(size_t i) const { return accesses.data() + starts[i]; }
  size_t size(size_t i) const {
    return (i + 1 < starts.size() ? starts[i + 1] : accesses.size()) - starts[i];
  }
  void clear() { accesses.clear(), starts.clear(); }
};

class WaveRegrouper {
 public:
  explicit WaveRegrouper(int waveSize) : waveSize_(waveSize < 1 ? 1 : waveSize) {}

  void beginGroup(size_t workItems);
  // `pixelBytes` of the access's image (ignored for buffers): what makes two loads one texel.
  // Returns false when the access was merged into the work-item's previous one.
  bool record(size_t localId, const LaneAccess& a, int64_t imageBase, int64_t pixelBytes);
  // Appends the epoch's wave instructions to `out` and starts a new epoch.
  void flushEpoch(WaveStream* out);

 private:
  int waveSize_;
  std::vector<std::vector<LaneAccess>> perItem_;
};

}  // namespace fbl::sim
