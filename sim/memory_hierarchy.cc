#include "sim/memory_hierarchy.h"

#include <algorithm>

namespace fbl::sim {

namespace {

// Sorts and deduplicates, so each line is requested once per instruction.
void distinct(std::vector<uint64_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

MemoryHierarchy::MemoryHierarchy(const MemoryModel& m) : model_(m), l2_(m.l2) {
  for (int i = 0; i < m.computeUnits; ++i) {
    textureL1_.emplace_back(m.textureL1);
    if (m.bufferL1) bufferL1_.emplace_back(*m.bufferL1);
  }
}

// A block keeps its bytes whatever the texel size: h rows of (lineBytes / h) bytes.
int64_t MemoryHierarchy::blockTexelsWide(const ImageExtent& img) const {
  return std::max<int64_t>(1, model_.textureL1.lineBytes / model_.textureBlock.h / img.pixelBytes);
}

int64_t MemoryHierarchy::tiledBytes(const ImageExtent& img) const {
  const int64_t bw = blockTexelsWide(img), bh = model_.textureBlock.h;
  return ((img.width + bw - 1) / bw) * ((img.height + bh - 1) / bh) * model_.textureL1.lineBytes;
}

uint64_t MemoryHierarchy::tiledAddress(const ImageExtent& img, uint64_t address) const {
  const int64_t bw = blockTexelsWide(img), bh = model_.textureBlock.h;
  const int64_t offset = static_cast<int64_t>(address - img.base);
  const int64_t texel = offset / img.pixelBytes, inTexel = offset % img.pixelBytes;
  const int64_t x = texel % img.width, y = texel / img.width;
  const int64_t blocksPerRow = (img.width + bw - 1) / bw;
  const int64_t block = (y / bh) * blocksPerRow + x / bw;
  const int64_t inBlock = ((y % bh) * bw + x % bw) * img.pixelBytes + inTexel;
  return img.tiledBase + static_cast<uint64_t>(block * model_.textureL1.lineBytes + inBlock);
}

void MemoryHierarchy::l2Load(uint64_t firstLine, int64_t lines) {
  for (int64_t i = 0; i < lines; ++i) {
    SetAssocCache::Outcome o = l2_.access(firstLine + static_cast<uint64_t>(i), false);
    if (o.hit) {
      ++c_.l2Hits;
    } else {
      ++c_.l2Misses;
      c_.dramReadBytes += model_.l2.lineBytes;
    }
    if (o.writeBack) c_.dramWriteBytes += model_.l2.lineBytes;
  }
}

void MemoryHierarchy::l2Store(uint64_t line) {
  ++c_.l2StoreLines;
  SetAssocCache::Outcome o = l2_.access(line, true);
  if (o.writeBack) c_.dramWriteBytes += model_.l2.lineBytes;
}

void MemoryHierarchy::issue(int cu, const LaneAccess* lanes, size_t count) {
  ++c_.waveInstructions;
  const uint64_t l2Line = static_cast<uint64_t>(model_.l2.lineBytes);
  const uint64_t texLine = static_cast<uint64_t>(model_.textureL1.lineBytes);
  const uint64_t bufLine = static_cast<uint64_t>(model_.bufferL1 ? model_.bufferL1->lineBytes : model_.l2.lineBytes);
  // Three passes over the lanes: image loads (texture L1 lines), buffer loads (buffer L1 lines,
  // or L2 lines where buffers skip L1), stores (L2 lines). Each pass requests distinct lines.
  std::vector<uint64_t>& lines = scratch_;
  for (int pass = 0; pass < 3; ++pass) {
    lines.clear();
    for (size_t i = 0; i < count; ++i) {
      const LaneAccess& a = lanes[i];
      const bool image = a.image >= 0 && a.image < static_cast<int32_t>(images_.size());
      if (a.store != (pass == 2) || (pass == 0 && !image) || (pass == 1 && image)) continue;
      if (pass == 0) {
        lines.push_back(tiledAddress(images_[a.image], a.address) / texLine);
      } else {
        const uint64_t lineBytes = pass == 1 ? bufLine : l2Line;
        const uint64_t first = (image ? tiledAddress(images_[a.image], a.address) : a.address);
        for (uint64_t l = first / lineBytes; l <= (first + a.bytes - 1) / lineBytes; ++l) lines.push_back(l);
      }
    }
    distinct(&lines);
    for (uint64_t line : lines) {
      if (pass == 2) {
        l2Store(line);
      } else if (pass == 1 && !model_.bufferL1) {
        l2Load(line, 1);
      } else {
        // An L1 request; a miss fetches the L1 line's bytes from L2.
        const bool texture = pass == 0;
        const uint64_t l1Line = texture ? texLine : bufLine;
        SetAssocCache& l1 = texture ? textureL1_[cu] : bufferL1_[cu];
        if (l1.access(line, false).hit) {
          ++(texture ? c_.l1TextureHits : c_.l1BufferHits);
        } else {
          ++(texture ? c_.l1TextureMisses : c_.l1BufferMisses);
          l2Load(line * l1Line / l2Line, static_cast<int64_t>(l1Line / l2Line));
        }
      }
    }
  }
}

void MemoryHierarchy::writeBack() {
  c_.dramWriteBytes += static_cast<int64_t>(l2_.cleanDirty().size()) * model_.l2.lineBytes;
}

void MemoryHierarchy::endLaunch() {
  writeBack();
  for (SetAssocCache& c : textureL1_) c.clear();
  for (SetAssocCache& c : bufferL1_) c.clear();
}

}  // namespace fbl::sim
