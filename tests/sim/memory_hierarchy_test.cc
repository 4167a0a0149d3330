// The cache model on access streams made by hand: every expected count below is derived in the
// comment beside it from the geometry, not read off a run.
#include <catch2/catch.hpp>

#include "sim/launch_simulator.h"
#include "sim/set_assoc_cache.h"

using namespace fbl::sim;

namespace {

constexpr int64_t kTexel = 16;  // RGBA32F

// A small GPU: texture blocks 1 tall and 4 texels wide (64 B lines), `texLines` texture L1
// lines, a 64-line L2 of 64 B lines, no buffer L1 unless asked.
MemoryModel smallModel(int waveSize, int texLines, int computeUnits = 1, bool bufferL1 = false) {
  MemoryModel m;
  m.profile = "small";
  m.waveSize = waveSize;
  m.computeUnits = computeUnits;
  m.textureBlock = {1, 4};
  m.textureL1 = {texLines * 64, 64, 0, Replacement::kLru};
  if (bufferL1) m.bufferL1 = CacheGeometry{256, 64, 0, Replacement::kLru};
  m.l2 = {64 * 64, 64, 4, Replacement::kLru};
  m.dramGBs = 10, m.l2GBs = 40, m.peakGflops = 100;
  return m;
}

// One work-group; lane `lane` of the walk reads texels (x, y) of a W x H image at `base` in
// the order given, each as four 4-byte channel loads, as Oclgrind reports read_imagef.
struct Walk {
  int lane;
  std::vector<std::pair<int, int>> texels;
};

AccessCounters runImageWalks(const MemoryModel& m, int64_t w, int64_t h, const std::vector<Walk>& walks, size_t items) {
  LaunchSimulator sim(m);
  const uint64_t base = 1 << 20;
  sim.beginLaunch({{base, w, h, kTexel}});
  sim.beginGroup(0, items);
  for (const Walk& walk : walks)
    for (auto [x, y] : walk.texels)
      for (int ch = 0; ch < 4; ++ch) {
        LaneAccess a;
        a.address = base + static_cast<uint64_t>((x + y * w) * kTexel + ch * 4);
        a.bytes = 4;
        a.image = sim.imageAt(a.address);
        REQUIRE(a.image == 0);
        sim.access(static_cast<size_t>(walk.lane), a);
      }
  sim.endGroup();
  return sim.endLaunch();
}

std::vector<std::pair<int, int>> rowMajor(int w, int h, int y0 = 0, int rows = -1) {
  std::vector<std::pair<int, int>> v;
  for (int y = y0; y < (rows < 0 ? h : y0 + rows); ++y)
    for (int x = 0; x < w; ++x) v.push_back({x, y});
  return v;
}
std::vector<std::pair<int, int>> columnMajor(int w, int h) {
  std::vector<std::pair<int, int>> v;
  for (int x = 0; x < w; ++x)
    for (int y = 0; y < h; ++y) v.push_back({x, y});
  return v;
}

}  // namespace

TEST_CASE("set-associative cache: LRU keeps the recently used line, FIFO the recently filled", "[sim]") {
  // Two ways, one set: A, B, A, C. LRU evicts B (A was used last); FIFO evicts A (filled first).
  for (Replacement r : {Replacement::kLru, Replacement::kFifo}) {
    SetAssocCache c({128, 64, 2, r});
    CHECK_FALSE(c.access(10, false).hit);
    CHECK_FALSE(c.access(11, false).hit);
    CHECK(c.access(10, false).hit);
    CHECK_FALSE(c.access(12, false).hit);
    CHECK(c.contains(10) == (r == Replacement::kLru));
    CHECK(c.contains(11) == (r == Replacement::kFifo));
  }
}

TEST_CASE("set-associative cache: lines map to sets by their low bits, and dirty lines come back once", "[sim]") {
  SetAssocCache c({4 * 64, 64, 1, Replacement::kLru});  // 4 sets of 1 way
  c.access(0, true);
  c.access(1, false);
  CHECK(c.access(4, false).writeBack == std::optional<uint64_t>(0));  // 4 % 4 == 0 evicts dirty line 0
  CHECK(c.contains(1));
  c.access(5, true);  // evicts clean line 1: no write-back
  CHECK(c.cleanDirty() == std::vector<uint64_t>{5});
  CHECK(c.cleanDirty().empty());
}

TEST_CASE("one lane, one 8x8 image: a row walk misses once a block, a column walk on every texel", "[sim]") {
  // Blocks are 1 x 4 texels: 2 per row, 16 in all; the texture L1 holds 2 lines.
  const int w = 8, h = 8;
  const MemoryModel m = smallModel(/*waveSize=*/1, /*texLines=*/2);
  // Row walk: each block's 4 texels are read in a row, so 1 miss and 3 hits per block.
  AccessCounters row = runImageWalks(m, w, h, {{0, rowMajor(w, h)}}, 1);
  CHECK(row.loads == w * h);  // four channel loads make one texel fetch
  CHECK(row.l1TextureMisses == (w / 4) * h);
  CHECK(row.l1TextureHits == w * h - (w / 4) * h);
  // Column walk: a column crosses h = 8 blocks, more than the 2 lines the L1 holds, so the
  // next column finds none of them: every texel misses.
  AccessCounters col = runImageWalks(m, w, h, {{0, columnMajor(w, h)}}, 1);
  CHECK(col.l1TextureMisses == w * h);
  CHECK(col.l1TextureHits == 0);
  // L2 (64 lines) holds all 16 blocks: each is read from DRAM once, so both walks read the
  // image's footprint, and the column walk's other misses hit in L2.
  for (const AccessCounters* c : {&row, &col}) {
    CHECK(c->l2Misses == (w / 4) * h);
    CHECK(c->dramReadBytes == w * h * kTexel);
  }
  CHECK(col.l2Hits == w * h - (w / 4) * h);
  CHECK(row.l2Hits == 0);
  // With L1 lines >= blocks in a column, the column walk reuses them: once a block again.
  AccessCounters col8 = runImageWalks(smallModel(1, 8), w, h, {{0, columnMajor(w, h)}}, 1);
  CHECK(col8.l1TextureMisses == (w / 4) * h);
}

TEST_CASE("regrouping: lanes of one wave run in lock-step, so their working sets add up", "[sim]") {
  // Four lanes each walk their own row of an 8x8 image (lane i: row i). In lock-step, each wave
  // instruction touches 4 blocks (one per row).
  const int w = 8, h = 8;
  std::vector<Walk> walks;
  for (int lane = 0; lane < 4; ++lane) walks.push_back({lane, rowMajor(w, h, lane, 1)});
  // A 4-line L1 holds the wave's 4 blocks: 1 miss per block, 2 blocks a row, 4 rows.
  AccessCounters fits = runImageWalks(smallModel(4, 4), w, h, walks, 4);
  CHECK(fits.waveInstructions == w);
  CHECK(fits.l1TextureMisses == 2 * 4);
  // A 2-line L1 cannot: every instruction's 4 blocks evict each other, all 32 reads miss...
  AccessCounters thrash = runImageWalks(smallModel(4, 2), w, h, walks, 4);
  CHECK(thrash.l1TextureMisses == 4 * w);
  // ...whereas one lane walking the same four rows one after another misses once per block.
  AccessCounters serial = runImageWalks(smallModel(4, 2), w, h, {{0, rowMajor(w, h, 0, 4)}}, 1);
  CHECK(serial.l1TextureMisses == 2 * 4);
  // Four lanes reading one texel each is one wave instruction with 4 lines of 1 texel each, and
  // lanes sharing a block make one request: lanes 0-3 reading x = 0..3 of row 0 touch 1 line.
  std::vector<Walk> shared;
  for (int lane = 0; lane < 4; ++lane) shared.push_back({lane, {{lane, 0}}});
  AccessCounters one = runImageWalks(smallModel(4, 2), w, h, shared, 4);
  CHECK(one.waveInstructions == 1);
  CHECK(one.l1TextureMisses + one.l1TextureHits == 1);
}

TEST_CASE("a streaming kernel's DRAM bytes are its footprint, on either buffer path", "[sim]") {
  // out[i] = in[i] for 4096 floats: 256 work-groups of 16 on 2 compute units, waves of 8.
  const int64_t n = 4096, group = 16;
  for (bool l1 : {false, true}) {
    MemoryModel m = smallModel(8, 2, 2, l1);
    m.l2 = {64 * 1024, 64, 4, Replacement::kLru};  // holds in and out (32 KiB)
    LaunchSimulator sim(m);
    const uint64_t in = 4096, out = in + n * 4 + 4096;
    sim.beginLaunch({});
    for (int64_t g = 0; g < n / group; ++g) {
      sim.beginGroup(static_cast<size_t>(g), group);
      for (int64_t i = 0; i < group; ++i) {
        const uint64_t off = static_cast<uint64_t>((g * group + i) * 4);
        sim.access(static_cast<size_t>(i), {in + off, 4, -1, false});
        sim.access(static_cast<size_t>(i), {out + off, 4, -1, true});
      }
      sim.endGroup();
    }
    AccessCounters c = sim.endLaunch();
    CHECK(c.loads == n);
    CHECK(c.stores == n);
    CHECK(c.dramReadBytes == n * 4);
    CHECK(c.dramWriteBytes == n * 4);
    CHECK(c.l2Misses == n * 4 / 64);
    // A wave of 8 lanes reads 32 contiguous bytes, half a line: one request per instruction,
    // to L1 (whose second half-line request hits) or straight to L2.
    CHECK(c.l2Hits + c.l2Misses + c.l1BufferHits == n / 8);
    CHECK(c.l1BufferMisses == (l1 ? n * 4 / 64 : 0));
    // The same data again, in a second launch: L2 keeps it, the L1s do not.
    sim.beginLaunch({});
    sim.beginGroup(0, 1);
    sim.access(0, {in, 4, -1, false});
    sim.endGroup();
    AccessCounters again = sim.endLaunch();
    CHECK(again.dramBytes() == 0);
    CHECK(again.l2Hits == 1);
  }
}

TEST_CASE("roofline: the slowest of FP32, DRAM and L2 bounds the estimate", "[sim]") {
  const MemoryModel m = smallModel(1, 2);  // 100 GFLOP/s, 10 GB/s DRAM, 40 GB/s L2
  AccessCounters c;
  c.flops = 1'000'000;                     // 0.01 ms
  c.dramReadBytes = 1'000'000;             // 0.1 ms
  c.l2Misses = 1'000'000 / 64;             // 15625 lines x 64 B / 40 GB/s = 0.025 ms
  CHECK(estimatedMs(c, m) == Approx(0.1));
  c.flops = 100'000'000;                   // 1 ms
  CHECK(estimatedMs(c, m) == Approx(1.0));
}
