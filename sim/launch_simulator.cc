#include "sim/launch_simulator.h"

namespace fbl::sim {

namespace {

// Tiled image copies live far above any buffer address the plugin hands out.
constexpr uint64_t kTiledRegion = uint64_t{1} << 56;
constexpr uint64_t kTiledAlign = 4096;

}  // namespace

LaunchSimulator::LaunchSimulator(const MemoryModel& m)
    : hierarchy_(m), regrouper_(m.waveSize), nextTiledBase_(kTiledRegion), round_(static_cast<size_t>(m.computeUnits)) {}

void LaunchSimulator::beginLaunch(const std::vector<ImageArgument>& images) {
  images_.clear();
  for (const ImageArgument& a : images) {
    ImageExtent e{a.base, a.width, a.height, a.pixelBytes, 0};
    auto it = tiledBaseOf_.find(a.base);
    if (it == tiledBaseOf_.end()) {
      it = tiledBaseOf_.emplace(a.base, nextTiledBase_).first;
      nextTiledBase_ += (static_cast<uint64_t>(hierarchy_.tiledBytes(e)) + kTiledAlign - 1) / kTiledAlign * kTiledAlign;
    }
    e.tiledBase = it->second;
    images_.push_back(e);
  }
  hierarchy_.setImages(images_);
  atLaunchStart_ = hierarchy_.counters();
  groupsInRound_ = 0;
}

int32_t LaunchSimulator::imageAt(uint64_t address) const {
  for (size_t i = 0; i < images_.size(); ++i) {
    const ImageExtent& e = images_[i];
    if (address >= e.base && address < e.base + static_cast<uint64_t>(e.width * e.height * e.pixelBytes))
      return static_cast<int32_t>(i);
  }
  return -1;
}

void LaunchSimulator::beginGroup(size_t groupIndex, size_t workItems) {
  cu_ = static_cast<int>(groupIndex % static_cast<size_t>(model().computeUnits));
  regrouper_.beginGroup(workItems);
}

void LaunchSimulator::access(size_t localId, LaneAccess a) {
  const bool image = a.image >= 0;
  const int64_t base = image ? static_cast<int64_t>(images_[a.image].base) : 0;
  const int64_t pixel = image ? images_[a.image].pixelBytes : 1;
  AccessCounters& c = hierarchy_.counters();
  (a.store ? c.storeBytes : c.loadBytes) += a.bytes;
  if (regrouper_.record(localId, a, base, pixel)) {
    ++(a.store ? c.stores : c.loads);
    if (image) ++(a.store ? c.imageStores : c.imageLoads);
  }
}

void LaunchSimulator::barrier() { regrouper_.flushEpoch(&round_[cu_]); }

void LaunchSimulator::endGroup() {
  regrouper_.flushEpoch(&round_[cu_]);
  if (++groupsInRound_ == round_.size()) replayRound();
}

void LaunchSimulator::replayRound() {
  std::vector<size_t> next(round_.size(), 0);
  for (bool any = true; any;) {
    any = false;
    for (size_t cu = 0; cu < round_.size(); ++cu) {
      if (next[cu] >= round_[cu].instructions()) continue;
      hierarchy_.issue(static_cast<int>(cu), round_[cu].begin(next[cu]), round_[cu].size(next[cu]));
      ++next[cu];
      any = true;
    }
  }
  for (WaveStream& s : round_) s.clear();
  groupsInRound_ = 0;
}

AccessCounters LaunchSimulator::endLaunch() {
  replayRound();
  hierarchy_.endLaunch();
  ++hierarchy_.counters().launches;
  return hierarchy_.counters() - atLaunchStart_;
}

}  // namespace fbl::sim
