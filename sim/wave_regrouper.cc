#include "sim/wave_regrouper.h"

#include <algorithm>

namespace fbl::sim {

void WaveRegrouper::beginGroup(size_t workItems) {
  perItem_.resize(workItems);
  for (auto& v : perItem_) v.clear();
}

bool WaveRegrouper::record(size_t localId, const LaneAccess& a, int64_t imageBase, int64_t pixelBytes) {
  if (localId >= perItem_.size()) perItem_.resize(localId + 1);
  std::vector<LaneAccess>& list = perItem_[localId];
  if (a.image >= 0 && !list.empty()) {
    LaneAccess& last = list.back();
    const auto texel = [&](uint64_t addr) { return (static_cast<int64_t>(addr) - imageBase) / pixelBytes; };
    if (last.image == a.image && last.store == a.store && last.address + last.bytes == a.address &&
        texel(last.address) == texel(a.address)) {
      last.bytes += a.bytes;
      return false;
    }
  }
  list.push_back(a);
  return true;
}

void WaveRegrouper::flushEpoch(WaveStream* out) {
  const size_t waves = (perItem_.size() + waveSize_ - 1) / waveSize_;
  std::vector<size_t> longest(waves, 0);
  size_t maxLen = 0;
  for (size_t i = 0; i < perItem_.size(); ++i) {
    longest[i / waveSize_] = std::max(longest[i / waveSize_], perItem_[i].size());
    maxLen = std::max(maxLen, perItem_[i].size());
  }
  for (size_t k = 0; k < maxLen; ++k)
    for (size_t w = 0; w < waves; ++w) {
      if (k >= longest[w]) continue;
      out->starts.push_back(static_cast<uint32_t>(out->accesses.size()));
      const size_t end = std::min(perItem_.size(), (w + 1) * waveSize_);
      for (size_t i = w * waveSize_; i < end; ++i)
        if (k < perItem_[i].size()) out->accesses.push_back(perItem_[i][k]);
    }
  for (auto& v : perItem_) v.clear();
}

}  // namespace fbl::sim
