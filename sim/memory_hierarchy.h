// The caches of sim/memory_model.h with their counters: wave instructions in, hits, misses and
// DRAM bytes out. Addresses are flat (the plugin maps Oclgrind's buffers into one address
// space); an access to an image carries the image's index, and its texel is found from the
// image's linear extent, as Oclgrind stores images row by row.
//
//  1. Split the instruction's lane accesses into loads and stores.
//  2. Loads: each distinct L1 line the lanes touch is one L1 request. Image texels map to
//     texture blocks (the texture L1's lines); buffer bytes map to buffer L1 lines, or with no
//     buffer L1 directly to L2 lines. An L1 miss requests the line's bytes from L2.
//  3. Stores: each distinct L2 line is written in L2 (allocated without a fetch, made dirty).
//  4. An L2 load miss reads one L2 line from DRAM; an evicted dirty line writes one back.
//  5. endLaunch writes back every dirty L2 line and empties the L1s (texture caches are not
//     coherent with stores, so drivers invalidate them between dispatches); L2 keeps its lines.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/access_counters.h"
#include "sim/memory_model.h"
#include "sim/set_assoc_cache.h"

namespace fbl::sim {

// An image argument of the running launch: where its texels lie in the flat address space and
// where its tiled copy (blocks of the texture L1's line) lies for L2.
struct ImageExtent {
  uint64_t base = 0;       // flat address of texel (0, 0)
  int64_t width = 0, height = 0;
  int64_t pixelBytes = 16;
  uint64_t tiledBase = 0;  // flat address of block (0, 0) in the tiled copy
};

struct LaneAccess {
  uint64_t address = 0;  // flat
  uint32_t bytes = 0;
  int32_t image = -1;    // index into the launch's images; -1: a buffer
  bool store = false;
};

class MemoryHierarchy {
 public:
  explicit MemoryHierarchy(const MemoryModel& m);

  const MemoryModel& model() const { return model_; }
  void setImages(std::vector<ImageExtent> images) { images_ = std::move(images); }
  // The bytes a tiled image copy needs (whole blocks), for laying out tiledBase.
  int64_t tiledBytes(const ImageExtent& img) const;

  // One wave-level memory instruction issued on compute unit `cu`.
  void issue(int cu, const LaneAccess* lanes, size_t count);
  void endLaunch();

  AccessCounters& counters() { return c_; }
  const AccessCounters& counters() const { return c_; }

 private:
  int64_t blockTexelsWide(const ImageExtent& img) const;
  uint64_t tiledAddress(const ImageExtent& img, uint64_t address) const;
  void l2Load(uint64_t firstLine, int64_t lines);
  void l2Store(uint64_t line);
  void writeBack();

  MemoryModel model_;
  std::vector<SetAssocCache> textureL1_, bufferL1_;  // one per compute unit
  SetAssocCache l2_;
  std::vector<ImageExtent> images_;
  AccessCounters c_;
  std::vector<uint64_t> scratch_;
};

}  // namespace fbl::sim
