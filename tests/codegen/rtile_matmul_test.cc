// rtile_matmul.cl and rtile_convert.cl on PoCL against naive loops: every layout (row-major and
// R-Tile buffers, plain image, R-Tile strips, R-Tile blocks in both inter-tile orders) for the
// forward product and both backward products, odd shapes (padding in every tile) and tile-multiple
// shapes; then the three strategies of strategy.h end to end, which must agree with the loops and
// with each other.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "compiler/codegen/rtile_kernels.h"
#include "compiler/profile/profile.h"
#include "harness/matmul_run.h"

using fbl::codegen::ColumnRange;
using fbl::codegen::MatmulTiling;
using fbl::codegen::NarrowOptions;
using fbl::layout::Layout;
using fbl::layout::TileSpec;
using namespace fbl::harness;
using fbl::strategy::kAllStrategies;
using fbl::strategy::Strategy;
using fbl::strategy::strategyName;

namespace {

std::vector<float> randomMatrix(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// out[m][n] = sum_k L(m, k) R(k, n), L/R read from row-major storage, optionally transposed.
// Also returns sum_k |L R| per output, the scale of its rounding error.
void naiveMatmul(const std::vector<float>& l, bool lt, const std::vector<float>& r, bool rt, int64_t m, int64_t k,
                 int64_t n, std::vector<double>& out, std::vector<double>& mag) {
  out.assign(static_cast<size_t>(m * n), 0.0);
  mag.assign(out.size(), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) {
      const double a = lt ? l[kk * m + i] : l[i * k + kk];
      for (int64_t j = 0; j < n; ++j) {
        const double b = rt ? r[j * k + kk] : r[kk * n + j];
        out[i * n + j] += a * b;
        mag[i * n + j] += std::fabs(a * b);
      }
    }
}

void requireClose(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& mag,
                  const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 * mag[i] + 1e-6)) {
      if (!bad) first = i;
      ++bad;
    }
  INFO(what << ": " << bad << " of " << got.size() << " wrong, first at " << first << " (got "
            << (bad ? got[first] : 0) << ", want " << (bad ? want[first] : 0) << ")");
  REQUIRE(bad == 0);
}

std::unique_ptr<ClSession> openSession() {
  setenv("POCL_CACHE_DIR", FBL_SOURCE_DIR "/build-pocl-cache", 0);
  auto s = ClSession::open();
  if (!s.ok()) FAIL(s.error().message);
  return std::move(*s);
}

struct NamedLayout {
  std::string name;
  std::function<Layout(const fbl::ir::Shape&)> make;
};

std::vector<NamedLayout> allLayouts() {
  auto rtile = [](TileSpec spec, fbl::layout::Storage st) {
    return [spec, st](const fbl::ir::Shape& s) {
      auto l = Layout::rtile(s, spec, st);
      REQUIRE(l.ok());
      return *l;
    };
  };
  TileSpec rows = TileSpec::blocks(16, 32, 8, 16, 4, 8);
  rows.rowsAlongX = true;
  return {{"row-major buffer", [](const fbl::ir::Shape& s) { return Layout::rowMajor(s); }},
          {"R-Tile buffer 8x16", rtile(TileSpec::rowStrips(8, 16), fbl::layout::Storage::Buffer)},
          {"plain image", [](const fbl::ir::Shape& s) { return Layout::image(s); }},
          {"R-Tile strips 8x16", rtile(TileSpec::rowStrips(8, 16), fbl::layout::Storage::Image2D)},
          {"R-Tile blocks 16x32", rtile(TileSpec::blocks(16, 32, 8, 16, 4, 8), fbl::layout::Storage::Image2D)},
          {"R-Tile blocks 16x32 rows-along-x", rtile(rows, fbl::layout::Storage::Image2D)}};
}

struct PassCase {
  const char* name;
  bool lt, rt;
};

// One launch of a product's schedule: a tiling over some of the output's columns.
struct Part {
  Part(MatmulTiling t, ColumnRange c = {}, fbl::layout::StagingOrder l = {}, fbl::layout::StagingOrder r = {})
      : tiling(t), cols(c), lhsStaging(l), rhsStaging(r) {}
  MatmulTiling tiling;
  ColumnRange cols;
  fbl::layout::StagingOrder lhsStaging, rhsStaging;  // the order the tiled kernel reads K tiles in
};

// A low-rank term for checkParts: out += scale * L2 R2 with rank `k`, L2 and R2 in `layout`,
// transposed as `pass` says.
struct LowRankCase {
  int64_t k;
  PassCase pass;
  const NamedLayout* layout;
  float scale;
};

// One product through emitRTileMatmul, one launch (and split-K sum) per part (or, given `narrow`,
// emitRTileMatmulNarrow within 48 KB of local memory), with lhs/rhs/out in the given layouts,
// and a low-rank term if `term` is given. The output starts as NaN, so a column no part writes fails
// the comparison.
void checkParts(ClSession& s, const PassCase& pc, int64_t m, int64_t k, int64_t n, const NamedLayout& ll,
                const NamedLayout& rl, const NamedLayout& ol, std::vector<Part> parts,
                const NarrowOptions* narrow = nullptr, const LowRankCase* term = nullptr) {
  fbl::ir::Shape ls = pc.lt ? fbl::ir::Shape{k, m} : fbl::ir::Shape{m, k};
  fbl::ir::Shape rs = pc.rt ? fbl::ir::Shape{n, k} : fbl::ir::Shape{k, n};
  Layout lhs = ll.make(ls), rhs = rl.make(rs), out = ol.make({m, n});
  auto lv = randomMatrix(m * k, 1), rv = randomMatrix(k * n, 2);
  auto lm = s.allocate(lhs), rm = s.allocate(rhs), om = s.allocate(out);
  REQUIRE((lm.ok() && rm.ok() && om.ok()));
  REQUIRE(s.upload(*lm, lhs, lv).ok());
  REQUIRE(s.upload(*rm, rhs, rv).ok());
  REQUIRE(s.upload(*om, out, std::vector<float>(static_cast<size_t>(m * n), std::nanf(""))).ok());
  // The term's operands, bound after out (or the partial planes).
  std::optional<fbl::codegen::LowRankOperands> lr;
  std::vector<float> tlv, trv;
  std::vector<cl_mem> extra;
  if (term) {
    const int64_t r = term->k;
    Layout tl = term->layout->make(term->pass.lt ? fbl::ir::Shape{r, m} : fbl::ir::Shape{m, r});
    Layout tr = term->layout->make(term->pass.rt ? fbl::ir::Shape{n, r} : fbl::ir::Shape{r, n});
    tlv = randomMatrix(m * r, 3);
    trv = randomMatrix(r * n, 4);
    auto tlm = s.allocate(tl), trm = s.allocate(tr);
    REQUIRE((tlm.ok() && trm.ok()));
    REQUIRE(s.upload(*tlm, tl, tlv).ok());
    REQUIRE(s.upload(*trm, tr, trv).ok());
    extra = {*tlm, *trm};
    lr = fbl::codegen::LowRankOperands{{tl, term->pass.lt}, {tr, term->pass.rt}, r, fmt::format("{:.9e}f", term->scale)};
  }
  const fbl::codegen::LowRankOperands* lrp = lr ? &*lr : nullptr;
  auto withExtra = [&](std::vector<cl_mem> args) {
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  for (Part& part : parts) {
    MatmulTiling& tl = part.tiling;
    if (tl.splitK == 0) tl.splitK = 1;
    auto kern = narrow ? fbl::codegen::emitRTileMatmulNarrow("mm", m, k, n, {lhs, pc.lt}, {rhs, pc.rt}, out, *narrow,
                                                             49152, nullptr, lrp)
                    : fbl::codegen::emitRTileMatmul("mm", m, k, n, {lhs, pc.lt, part.lhsStaging},
                                                    {rhs, pc.rt, part.rhsStaging}, out, tl, nullptr, part.cols, lrp);
    if (!kern.ok()) FAIL(kern.error().message);
    if (tl.splitK > 1 && !narrow) {
      const int64_t width = (part.cols.end == 0 ? n : part.cols.end) - part.cols.begin;
      auto buf = s.buffer(static_cast<size_t>(tl.splitK * m * width));
      auto sum = fbl::codegen::emitRTileSplitKSum("mmsum", m, n, tl.splitK, out, nullptr,
                                                  fbl::codegen::kSplitKSumWorkgroup, part.cols);
      REQUIRE((buf.ok() && sum.ok()));
      auto t = s.run(*kern, withExtra({*lm, *rm, *buf}));
      if (!t.ok()) FAIL(t.error().message);
      REQUIRE(s.run(*sum, {*buf, *om}).ok());
      s.release(*buf);
    } else if (kern->chunkArrivals > 0) {
      // K in chunks: partial planes (NaN, so a plane the sum reads unwritten fails) and counts
      // that start at zero. The first launch must leave every count at zero for the next: the
      // product runs twice, the output reset between, and the counts are read back.
      auto chunks = s.chunkBuffers(*kern);
      REQUIRE(chunks.ok());
      std::vector<cl_mem> args = withExtra({*lm, *rm, *om});  // the term's operands, then these
      args.insert(args.end(), chunks->begin(), chunks->end());
      for (int run = 0; run < 2; ++run) {
        REQUIRE(s.upload(*om, out, std::vector<float>(static_cast<size_t>(m * n), std::nanf(""))).ok());
        auto t = s.run(*kern, args);
        if (!t.ok()) FAIL(t.error().message);
        auto left = s.readBuffer(chunks->at(1), static_cast<size_t>(kern->chunkArrivals));
        REQUIRE(left.ok());
        CHECK(std::all_of(left->begin(), left->end(), [](float c) { return c == 0.0f; }));  // int 0 reads as 0.0f
      }
      for (cl_mem c : *chunks) s.release(c);
    } else {
      auto t = s.run(*kern, withExtra({*lm, *rm, *om}));
      if (!t.ok()) FAIL(t.error().message);
    }
  }
  auto got = s.download(*om, out);
  REQUIRE(got.ok());
  std::vector<double> want, mag;
  naiveMatmul(lv, pc.lt, rv, pc.rt, m, k, n, want, mag);
  if (term) {
    std::vector<double> tw, tm;
    naiveMatmul(tlv, term->pass.lt, trv, term->pass.rt, m, term->k, n, tw, tm);
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] += term->scale * tw[i];
      mag[i] += std::fabs(term->scale) * tm[i];
    }
  }
  requireClose(*got, want, mag, std::string(pc.name) + " lhs " + ll.name + ", rhs " + rl.name + ", out " + ol.name +
                                    (term ? std::string(", term ") + term->pass.name + " " + term->layout->name : ""));
  for (cl_mem x : extra) s.release(x);
  s.release(*lm);
  s.release(*rm);
  s.release(*om);
}

void checkProduct(ClSession& s, const PassCase& pc, int64_t m, int64_t k, int64_t n, const NamedLayout& ll,
                  const NamedLayout& rl, const NamedLayout& ol, const MatmulTiling& tiling,
                  const NarrowOptions* narrow = nullptr) {
  checkParts(s, pc, m, k, n, ll, rl, ol, {{tiling, {}}}, narrow);
}

// The narrow kernel's settings (the profile's matmul.narrow block).
NarrowOptions narrowOptions(int64_t workItems, int64_t fillWorkItems = 0, bool stage = false) {
  NarrowOptions o;
  o.maxSide = 16;
  o.workItems = workItems;
  o.fillWorkItems = fillWorkItems;
  o.stageNarrowOperand = stage;
  return o;
}

constexpr PassCase kPasses[] = {{"forward C=A*B", false, false},
                                {"dA=dC*B^T", false, true},
                                {"dB=A^T*dC", true, false}};
constexpr PassCase kBothTransposed = {"C=A^T*B^T", true, true};

// The tiling the narrow kernel takes for an m x k x n product of `pc` with options `o`, its
// operands row-major (the tiling does not depend on their layouts).
fbl::codegen::NarrowTiling emittedNarrowTiling(const PassCase& pc, int64_t m, int64_t k, int64_t n,
                                               const NarrowOptions& o) {
  const fbl::ir::Shape ls = pc.lt ? fbl::ir::Shape{k, m} : fbl::ir::Shape{m, k};
  const fbl::ir::Shape rs = pc.rt ? fbl::ir::Shape{n, k} : fbl::ir::Shape{k, n};
  auto kern = fbl::codegen::emitRTileMatmulNarrow("mm", m, k, n, {Layout::rowMajor(ls), pc.lt},
                                                  {Layout::rowMajor(rs), pc.rt}, Layout::rowMajor({m, n}), o, 49152);
  REQUIRE(kern.ok());
  return kern->narrowTiling;
}

}  // namespace

// Catch runs a test case once per leaf section, and the code outside sections on every run: so
// the checks after a DYNAMIC_SECTION loop sit in a SECTION of their own, which runs once.

TEST_CASE("rtile matmul: every layout, forward and both backward products", "[rtile_kernels]") {
  auto s = openSession();
  const MatmulTiling tiling = fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kCpu);
  struct Dims { int64_t m, k, n; };
  // Odd: pads every tile, every texel and the work-group tile; multiple: exact tiles.
  for (Dims d : {Dims{37, 53, 45}, Dims{64, 128, 64}}) {
    for (const NamedLayout& l : allLayouts())
      for (const PassCase& pc : kPasses) {
        DYNAMIC_SECTION(pc.name << " " << d.m << "x" << d.k << "x" << d.n << " " << l.name) {
          checkProduct(*s, pc, d.m, d.k, d.n, l, l, l, tiling);
        }
      }
  }
}

TEST_CASE("rtile matmul: narrow products (LoRA's rank side) in one launch", "[rtile_kernels]") {
  auto s = openSession();
  struct Dims { int64_t m, k, n; };
  // Narrow N (x * lora_A, dy * B^T), narrow M (t^T * dy), odd sides that pad texels and blocks,
  // K that leaves the last round of slices short.
  const Dims dims[] = {{37, 301, 5}, {6, 90, 41}, {96, 64, 8}, {8, 68, 4}};
  // The narrow operand staged through local memory (STAGE_R) where it is R stored along K.
  const NarrowOptions plain = narrowOptions(64), staged = narrowOptions(64, 0, true);
  for (Dims d : dims)
    for (const NamedLayout& l : allLayouts()) {
      for (const PassCase& pc : kPasses) {
        DYNAMIC_SECTION(pc.name << " " << d.m << "x" << d.k << "x" << d.n << " " << l.name) {
          checkProduct(*s, pc, d.m, d.k, d.n, l, l, l, MatmulTiling{}, &plain);
          if (!pc.rt && d.m >= d.n) checkProduct(*s, pc, d.m, d.k, d.n, l, l, l, MatmulTiling{}, &staged);
        }
      }
    }
  auto ls = allLayouts();
  // The texel walk (texel_walk_min_side) where R is stored along K: every layout, narrow N 5
  // (two texels, the second part padding) and 8.
  NarrowOptions texelWalk = narrowOptions(64);
  texelWalk.texelWalkMinSide = 1;
  for (Dims d : {Dims{37, 301, 5}, Dims{96, 64, 8}})
    for (const NamedLayout& l : allLayouts()) {
      DYNAMIC_SECTION("texel walk " << d.m << "x" << d.k << "x" << d.n << " " << l.name) {
        checkProduct(*s, kPasses[0], d.m, d.k, d.n, l, l, l, MatmulTiling{}, &texelWalk);
      }
    }
  SECTION("mixed layouts, work-group sizes and the tile choices") {
    for (int walk : {0, 1, 2, 3})  // plain, staged, texel walk, a narrow M's row blocks in one group
      for (int64_t workItems : {int64_t{4}, int64_t{256}})
        for (const PassCase& pc : {kPasses[0], kPasses[1], kPasses[2], kBothTransposed}) {
          NarrowOptions o = narrowOptions(workItems, 0, walk == 1);
          o.texelWalkMinSide = walk == 2 ? 1 : 0;
          o.rowsInGroupMinSide = walk == 3 ? 1 : 0;
          checkProduct(*s, pc, 37, 301, 5, ls[4], ls[2], ls[0], MatmulTiling{}, &o);
          checkProduct(*s, pc, 6, 90, 41, ls[0], ls[5], ls[3], MatmulTiling{}, &o);
          // A 1-wide side (images cannot hold a 1-column operand read along its texels).
          checkProduct(*s, pc, 1, 40, 13, ls[0], ls[0], ls[0], MatmulTiling{}, &o);
        }
    // Staging is taken where neighbouring work-items are K slices reading R, a buffer stored along
    // K, and nowhere else.
    auto stagedSource = [&](const PassCase& pc, const NamedLayout& rl) {
      fbl::ir::Shape rs = pc.rt ? fbl::ir::Shape{5, 301} : fbl::ir::Shape{301, 5};
      fbl::ir::Shape lsh = pc.lt ? fbl::ir::Shape{301, 37} : fbl::ir::Shape{37, 301};
      auto k = fbl::codegen::emitRTileMatmulNarrow("mm", 37, 301, 5, {ls[0].make(lsh), pc.lt}, {rl.make(rs), pc.rt},
                                                   ls[0].make({37, 5}), staged, 49152);
      REQUIRE(k.ok());
      CHECK(k->stagesNarrowOperand == (k->source.find("#define STAGE_R 1") != std::string::npos));
      return k->stagesNarrowOperand;
    };
    CHECK(stagedSource(kPasses[0], ls[0]));
    CHECK_FALSE(stagedSource(kPasses[0], ls[2]));  // an image
    CHECK_FALSE(stagedSource(kPasses[1], ls[0]));  // R stored along N
    CHECK_FALSE(stagedSource(kPasses[2], ls[0]));  // L transposed: neighbours are row blocks
    // The texel walk: FAST 2, the group spanning N (two texels of N = 5), nothing staged.
    NarrowOptions stagedWalk = staged;
    stagedWalk.texelWalkMinSide = 1;
    auto walked = fbl::codegen::emitRTileMatmulNarrow("mm", 37, 301, 5, {ls[0].make({37, 301}), false},
                                                      {ls[0].make({301, 5}), false}, ls[0].make({37, 5}), stagedWalk,
                                                      49152);
    REQUIRE(walked.ok());
    CHECK_FALSE(walked->stagesNarrowOperand);
    CHECK(walked->source.find("#define FAST 2") != std::string::npos);
    CHECK(walked->source.find("#define TN 8u") != std::string::npos);
    // The kernel reports the walk and tile it was generated with (what the sweep prints).
    CHECK(walked->narrowOrder == fbl::codegen::NarrowOrder::kTexels);
    CHECK(walked->narrowTiling.tn == 8);
    // A narrow M's row blocks in one group: dt^T x at rank 16 is tiled 16 x 8, not 4 x 32.
    NarrowOptions rowsIn = narrowOptions(256, 65536);
    auto dA = [&](int64_t minSide) {
      rowsIn.rowsInGroupMinSide = minSide;
      auto k = fbl::codegen::emitRTileMatmulNarrow("mm", 16, 512, 2048, {ls[0].make({512, 16}), true},
                                                   {ls[0].make({512, 2048}), false}, ls[0].make({16, 2048}), rowsIn,
                                                   49152);
      REQUIRE(k.ok());
      return *k;
    };
    CHECK(dA(16).source.find("#define TM 16u") != std::string::npos);
    CHECK(dA(16).narrowTiling.tn == 8);
    CHECK(dA(0).source.find("#define TM 4u") != std::string::npos);
    // A launch that runs three products (launch batching) is tiled for all three: the fill target
    // counts them, so x A on Llama (256 blocks) takes 256 slices alone and 128 in a shared launch,
    // two blocks a group.
    const NarrowOptions filled = narrowOptions(256, 65536);
    auto xA = [&](int64_t products) {
      auto k = fbl::codegen::emitRTileMatmulNarrow("mm", 512, 2048, 8, {ls[0].make({512, 2048}), false},
                                                   {ls[0].make({2048, 8}), false}, ls[0].make({512, 8}), filled, 49152,
                                                   nullptr, nullptr, products);
      REQUIRE(k.ok());
      return *k;
    };
    const auto alone = xA(1), shared = xA(3);
    CHECK(alone.source.find("#define KS 256u") != std::string::npos);
    CHECK(shared.source.find("#define KS 128u") != std::string::npos);
    CHECK(alone.narrowTiling.ks == 256);
    CHECK(shared.narrowTiling.ks == 128);
    CHECK(alone.global[0] / alone.local[0] * alone.global[1] == 256);
    CHECK(shared.global[0] / shared.local[0] * shared.global[1] == 128);
    // A fill target the product cannot reach: slices of one texel (K = 301: the second round of
    // 64 or 128 slices is mostly past K), the deepest trees, with the narrow operand staged.
    for (int64_t workItems : {int64_t{256}, int64_t{512}})
      for (const PassCase& pc : {kPasses[0], kPasses[1], kPasses[2], kBothTransposed}) {
        const NarrowOptions o = narrowOptions(workItems, int64_t{1} << 20, true);
        checkProduct(*s, pc, 37, 301, 5, ls[4], ls[2], ls[0], MatmulTiling{}, &o);
        checkProduct(*s, pc, 8, 1030, 12, ls[0], ls[5], ls[3], MatmulTiling{}, &o);
      }
  }
}

TEST_CASE("rtile matmul: narrow products with K in chunks, summed by the last group of a tile", "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  struct Dims { int64_t m, k, n; };
  // Narrow N, K long enough to chunk: odd M and N that pad rows and texels with K that leaves the
  // last chunk's last round short, and rank 16 (96 x 1000 x 8 below, in mixed layouts).
  const Dims dims[] = {{37, 301, 5}, {64, 515, 16}};
  // Chunked where N is narrow and neighbouring work-items are K slices: C = A B (R stored along
  // K, staged or not) and dA = dC B^T (R transposed); work-groups of 16 and 64, tiles of 8 and
  // 32 rows, with and without a fill target.
  auto chunkedOptions = [](int64_t workItems, int64_t rows, int64_t fill, bool stage) {
    NarrowOptions o = narrowOptions(workItems, fill, stage);
    o.chunkMinK = 64;
    o.chunkRows = rows;
    return o;
  };
  auto chunks = [](const PassCase& pc, const Dims& d, const NarrowOptions& o) {
    return emittedNarrowTiling(pc, d.m, d.k, d.n, o).chunks;
  };
  for (Dims d : dims)
    for (const NamedLayout& l : ls)
      for (const PassCase& pc : {kPasses[0], kPasses[1]}) {
        DYNAMIC_SECTION(pc.name << " " << d.m << "x" << d.k << "x" << d.n << " " << l.name) {
          for (const NarrowOptions& o : {chunkedOptions(16, 8, 0, false), chunkedOptions(64, 32, 1024, !pc.rt)}) {
            REQUIRE(chunks(pc, d, o) > 1);  // the chunked kernel, not the one-group walk
            checkProduct(*s, pc, d.m, d.k, d.n, l, l, l, MatmulTiling{}, &o);
          }
        }
      }
  SECTION("mixed layouts, a low-rank term and where chunking applies") {
    // Mixed layouts, and a low-rank term added by the last group's store.
    const NarrowOptions o = chunkedOptions(64, 16, 1024, false);
    const LowRankCase term{8, kPasses[1], &ls[3], 0.5f};
    for (const PassCase& pc : {kPasses[0], kPasses[1]}) {
      checkProduct(*s, pc, 96, 1000, 8, ls[4], ls[2], ls[0], MatmulTiling{}, &o);
      checkParts(*s, pc, 96, 1000, 8, ls[0], ls[5], ls[3], {{MatmulTiling{}, {}}}, &o, &term);
    }
    // Below chunk_min_k, or without it, one group walks all of K; a transposed L (neighbours are
    // row blocks) and a narrow M are never chunked.
    CHECK(chunks(kPasses[0], {96, 1000, 8}, narrowOptions(64, 1024)) == 1);
    NarrowOptions high = o;
    high.chunkMinK = 1001;
    CHECK(chunks(kPasses[0], {96, 1000, 8}, high) == 1);
    auto tiling = [&](int64_t m, int64_t k, int64_t n, bool lt) {
      const fbl::codegen::NarrowOrder order = fbl::codegen::chooseNarrowOrder(m, n, lt, false, o);
      return fbl::codegen::chooseNarrowTiling(m, n, k, o, 1, order).chunks;
    };
    CHECK(tiling(96, 1000, 8, false) > 1);
    CHECK(tiling(96, 1000, 8, true) == 1);
    CHECK(tiling(8, 1000, 96, false) == 1);
  }
}

TEST_CASE("rtile matmul: narrow products with the narrow side whole in a work-item (wide_run)", "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  struct Dims { int64_t m, k, n; };
  // The weight gradients' forms: a narrow N with L transposed (x^T dt: neighbours are row
  // blocks) and a narrow M with R stored along K (t^T dy: neighbours are output texels). Odd
  // sides pad the wide side's texels and the narrow side's last block (5: two blocks, 13: four);
  // K leaves the last round of slices, and the last chunk, short.
  const Dims dims[] = {{45, 301, 5}, {13, 90, 70}};
  // Runs of 4 texels by 16 slices, one group walking all of K, and of 16 texels by 4 slices, K
  // cut into chunks for a fill target.
  auto runOptions = [](int64_t workItems, int64_t run, int64_t fill) {
    NarrowOptions o = narrowOptions(workItems, fill);
    o.wideRun = run;
    return o;
  };
  auto tiling = [](const PassCase& pc, const Dims& d, const NarrowOptions& o) {
    return emittedNarrowTiling(pc, d.m, d.k, d.n, o);
  };
  for (Dims d : dims)
    for (const NamedLayout& l : ls) {
      // dB = A^T dC for both; C = A B for the narrow M as well.
      std::vector<PassCase> passes{kPasses[2]};
      if (d.m < d.n) passes.push_back(kPasses[0]);
      for (const PassCase& pc : passes) {
        DYNAMIC_SECTION(pc.name << " " << d.m << "x" << d.k << "x" << d.n << " " << l.name) {
          for (const NarrowOptions& o : {runOptions(64, 4, 0), runOptions(64, 16, 4096)}) {
            const fbl::codegen::NarrowTiling t = tiling(pc, d, o);
            REQUIRE(t.bm * t.bn > 1);  // every block of the narrow side in one work-item
            REQUIRE((t.chunks > 1) == (o.fillWorkItems > 0));
            checkProduct(*s, pc, d.m, d.k, d.n, l, l, l, MatmulTiling{}, &o);
          }
        }
      }
    }
  SECTION("mixed layouts, a low-rank term and where runs apply") {
    // K in chunks, in mixed layouts, with a low-rank term added by the last group's store.
    const NarrowOptions o = runOptions(64, 16, 4096);
    REQUIRE(tiling(kPasses[2], {45, 301, 5}, o).chunks > 1);
    REQUIRE(tiling(kPasses[0], {13, 90, 70}, o).chunks > 1);
    const LowRankCase term{8, kPasses[1], &ls[3], 0.5f};
    checkParts(*s, kPasses[2], 45, 301, 5, ls[4], ls[2], ls[0], {{MatmulTiling{}, {}}}, &o, &term);
    checkParts(*s, kPasses[0], 13, 90, 70, ls[0], ls[5], ls[3], {{MatmulTiling{}, {}}}, &o, &term);
    // Not where neighbouring work-items are K slices (x A^T, dy B), nor past 16 wide.
    CHECK(tiling(kPasses[0], {45, 301, 5}, o).bn == 1);
    CHECK(tiling(kPasses[1], {45, 301, 5}, o).bn == 1);
    CHECK(tiling(kPasses[2], {45, 301, 17}, o).bn == 1);
  }
}

TEST_CASE("rtile matmul: mixed operand layouts and the GPU tiling", "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  // lhs R-Tile blocks, rhs plain image, out row-major buffer, and the reverse; GPU tiling 128x128.
  for (const PassCase& pc : kPasses) {
    checkProduct(*s, pc, 33, 70, 29, ls[4], ls[2], ls[0], fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kCpu));
    checkProduct(*s, pc, 33, 70, 29, ls[0], ls[5], ls[3], fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kGpu));
  }
}

TEST_CASE("rtile matmul: every staging order reads the same product", "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  // The GPU tiling (regions of 128 x 4 and 16 x 32 texels), each operand in three chunk shapes
  // from its candidates (the first after row-major, the middle one, the last: tall, square-ish,
  // wide); odd sides pad every tile. Each case is a kernel build, so not all ~20 per region.
  const MatmulTiling t = fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kGpu);
  const fbl::layout::StagedTiling st{t.tm, t.tn, t.tk, t.wgX() * t.wgY(), 64};
  for (const PassCase& pc : kPasses) {
    auto [lr, lt] = fbl::layout::stagedRegion(true, pc.lt, st);
    auto [rr, rt] = fbl::layout::stagedRegion(false, pc.rt, st);
    const auto lo = fbl::layout::stagingCandidates(lr, lt, st.wave);
    const auto ro = fbl::layout::stagingCandidates(rr, rt, st.wave);
    REQUIRE((lo.size() >= 3 && ro.size() >= 3));
    auto pick = [](const std::vector<fbl::layout::StagingOrder>& v, int i) {
      return v[i == 0 ? 1 : i == 1 ? v.size() / 2 : v.size() - 1];
    };
    for (int i = 0; i < 3; ++i) {
      Part part{t, {}, pick(lo, i), pick(ro, 2 - i)};
      DYNAMIC_SECTION(pc.name << " lhs " << part.lhsStaging.rows << "x" << part.lhsStaging.texels << " rhs "
                              << part.rhsStaging.rows << "x" << part.rhsStaging.texels) {
        checkParts(*s, pc, 133, 70, 141, ls[4], ls[5], ls[2], {part});
      }
    }
  }
  SECTION("a chunk that does not tile the region is refused") {
    fbl::ir::Shape sh{128, 128};
    MatmulTiling one = t;
    one.splitK = 1;
    auto bad = fbl::codegen::emitRTileMatmul("mm", 128, 128, 128, {Layout::image(sh), false, {3, 1}},
                                             {Layout::image(sh), false}, Layout::image(sh), one);
    REQUIRE_FALSE(bad.ok());
    INFO(bad.error().message);
    CHECK(bad.error().message.find("staging chunk 3x1") != std::string::npos);
  }
}

TEST_CASE("rtile matmul: split-K sums the slices into the output layout", "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  MatmulTiling t = fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kCpu);
  t.splitK = 3;  // K=70 in steps of 16: slices of 32, 32, 6 (the last one partial)
  for (const PassCase& pc : kPasses) checkProduct(*s, pc, 33, 70, 29, ls[4], ls[2], ls[3], t);
  // chooseSplitK: Figure 16's dA on 132 compute units with 128 x 128 tiles has 64 tiles.
  MatmulTiling g = fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kGpu);
  CHECK(fbl::codegen::chooseSplitK(512, 2048, 8192, g, 132) == 4);
  CHECK(fbl::codegen::chooseSplitK(512, 8192, 2048, g, 132) == 1);
  CHECK(fbl::codegen::chooseSplitK(512, 2048, 8192, g, 2) == 1);
  CHECK(fbl::codegen::chooseSplitK(128, 128, 600, g, 132) == 1);  // slices would fall under kMinSplitSlice
}

TEST_CASE("rtile matmul: a schedule's column launches (whole tiles, then a split tail) cover the output",
          "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  MatmulTiling whole = fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kCpu);  // 64 x 64 tiles
  MatmulTiling tail = whole;
  tail.splitK = 3;
  for (const PassCase& pc : {kPasses[0], kPasses[1], kPasses[2], kBothTransposed}) {
    // Aligned main part [0, 128) and an odd tail [128, 150) split 3 ways; R-Tile and image operands.
    checkParts(*s, pc, 64, 70, 150, ls[4], ls[2], ls[3], {{whole, {0, 128}}, {tail, {128, 150}}});
    // Odd M and a main part that itself pads rows; the tail unsplit.
    checkParts(*s, pc, 37, 48, 92, ls[0], ls[5], ls[4], {{whole, {0, 64}}, {whole, {64, 92}}});
  }
  // Columns that are not whole texels, or outside the product, are refused with their range.
  fbl::ir::Shape sh{8, 8};
  auto bad = fbl::codegen::emitRTileMatmul("mm", 8, 8, 8, {Layout::rowMajor(sh), false}, {Layout::rowMajor(sh), false},
                                           Layout::rowMajor(sh), whole, nullptr, {2, 8});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("columns [2, 8)") != std::string::npos);
  CHECK_FALSE(fbl::codegen::emitRTileSplitKSum("s", 8, 8, 2, Layout::rowMajor(sh), nullptr, 64, {4, 12}).ok());
}

TEST_CASE("rtile matmul: a low-rank term (LoRA's t B, dt A) added inside the product", "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  MatmulTiling cpu = fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kCpu);
  MatmulTiling gpu = fbl::codegen::matmulTiling(fbl::profile::DeviceClass::kGpu);
  MatmulTiling split = cpu;
  split.splitK = 3;
  // Every orientation of the term (LoRA's forward t B^T reads B transposed, the backward's dt A
  // plainly) in every layout, on an odd product that pads every tile; ranks 8 and 5 (a partial
  // texel of K) in turn.
  int turn = 0;
  for (const NamedLayout& l : ls)
    for (const PassCase& tp : {kPasses[0], kPasses[1], kPasses[2], kBothTransposed}) {
      const LowRankCase term{++turn % 2 ? 8 : 5, tp, &l, 0.5f};
      DYNAMIC_SECTION(tp.name << " rank " << term.k << " " << l.name) {
        checkParts(*s, kPasses[0], 37, 70, 29, ls[4], ls[2], l, {{cpu, {}}}, nullptr, &term);
      }
    }
  // The GPU tiling, split-K (the term joins one slice), a schedule's column parts, the narrow
  // kernel, transposed hosts.
  SECTION("tilings, split-K, column parts and the narrow kernel") {
    const LowRankCase plain{8, kPasses[0], &ls[0], 2.0f}, imageT{16, kPasses[1], &ls[3], -0.25f};
    MatmulTiling pipe2 = cpu, pipe3 = cpu;  // double-buffered tiles: the term's tile follows the last swap
    pipe2.pipeline = 2;
    pipe3.pipeline = 3;
    for (const PassCase& pc : kPasses) {
      checkParts(*s, pc, 33, 70, 29, ls[0], ls[5], ls[3], {{gpu, {}}}, nullptr, &imageT);
      checkParts(*s, pc, 33, 70, 29, ls[4], ls[0], ls[2], {{pipe2, {}}}, nullptr, &plain);
      checkParts(*s, pc, 33, 70, 29, ls[0], ls[3], ls[0], {{pipe3, {}}}, nullptr, &imageT);
      // Tiles that divide the product (ALIGNED: no bounds checks on the product's own reads).
      MatmulTiling gpu3 = gpu;
      gpu3.pipeline = 3;
      checkParts(*s, pc, 128, 64, 128, ls[0], ls[3], ls[3], {{gpu3, {}}}, nullptr, &imageT);
      checkParts(*s, pc, 64, 64, 128, ls[4], ls[0], ls[0], {{cpu, {}}}, nullptr, &plain);
      checkParts(*s, pc, 33, 70, 29, ls[4], ls[2], ls[0], {{split, {}}}, nullptr, &plain);
      checkParts(*s, pc, 37, 48, 92, ls[0], ls[5], ls[4], {{cpu, {0, 64}}, {split, {64, 92}}}, nullptr, &imageT);
      const NarrowOptions narrow64 = narrowOptions(64), staged256 = narrowOptions(256, 0, true);
      checkParts(*s, pc, 37, 301, 5, ls[4], ls[2], ls[0], {{MatmulTiling{}, {}}}, &narrow64, &plain);
      checkParts(*s, pc, 6, 90, 41, ls[0], ls[5], ls[3], {{MatmulTiling{}, {}}}, &staged256, &imageT);
      checkParts(*s, pc, 37, 301, 5, ls[4], ls[2], ls[0], {{MatmulTiling{}, {}}}, &staged256, &plain);
    }
  }
}

TEST_CASE("rtile convert: transposes between layouts", "[rtile_kernels]") {
  auto s = openSession();
  auto ls = allLayouts();
  const int64_t r = 19, c = 42;
  auto v = randomMatrix(r * c, 3);
  for (size_t i = 0; i < ls.size(); ++i) {
    const NamedLayout& from = ls[i];
    const NamedLayout& to = ls[(i + 2) % ls.size()];
    Layout src = from.make({r, c}), dst = to.make({c, r});
    auto sm = s->allocate(src), dm = s->allocate(dst);
    REQUIRE((sm.ok() && dm.ok()));
    REQUIRE(s->upload(*sm, src, v).ok());
    auto k = fbl::codegen::emitRTileConvert("tr", src, true, dst);
    REQUIRE(k.ok());
    REQUIRE(s->run(*k, {*sm, *dm}).ok());
    auto got = s->download(*dm, dst);
    REQUIRE(got.ok());
    size_t bad = 0;
    for (int64_t a = 0; a < r; ++a)
      for (int64_t b = 0; b < c; ++b) bad += (*got)[b * r + a] != v[a * c + b];
    INFO(from.name << " -> transposed " << to.name);
    REQUIRE(bad == 0);
  }
}

TEST_CASE("rtile strategies: fblayout, reuse and explicit give the same C, dA, dB", "[rtile_kernels]") {
  auto s = openSession();
  auto prof = fbl::profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(prof.ok());
  for (MatmulShape sh : {MatmulShape{37, 53, 45}, MatmulShape{64, 256, 128}}) {
    MatmulData data;
    data.a = randomMatrix(sh.m * sh.k, 11);
    data.b = randomMatrix(sh.k * sh.n, 12);
    data.dc = randomMatrix(sh.m * sh.n, 13);
    std::vector<double> c, da, db, mc, mda, mdb;
    naiveMatmul(data.a, false, data.b, false, sh.m, sh.k, sh.n, c, mc);
    naiveMatmul(data.dc, false, data.b, true, sh.m, sh.n, sh.k, da, mda);
    naiveMatmul(data.a, true, data.dc, false, sh.k, sh.m, sh.n, db, mdb);
    std::vector<MatmulData> results;
    for (Strategy st : kAllStrategies) {
      auto plan = planMatmul(st, sh, *prof);
      REQUIRE(plan.ok());
      auto run = runMatmulPlan(*s, *plan, fixedTiling(fbl::codegen::matmulTiling(s->deviceClass()), s->computeUnits()), data, 1);
      if (!run.ok()) FAIL(run.error().message);
      const std::string what = std::string(strategyName(st)) + " " + std::to_string(sh.m) + "x" +
                               std::to_string(sh.k) + "x" + std::to_string(sh.n);
      requireClose(run->data.c, c, mc, what + " C");
      requireClose(run->data.da, da, mda, what + " dA");
      requireClose(run->data.db, db, mdb, what + " dB");
      results.push_back(run->data);
    }
    // Same kernel body, same summation order: the strategies agree to fp32 rounding.
    for (size_t i = 1; i < results.size(); ++i) {
      requireClose(results[i].c, std::vector<double>(results[0].c.begin(), results[0].c.end()), mc, "C vs fblayout");
      requireClose(results[i].da, std::vector<double>(results[0].da.begin(), results[0].da.end()), mda,
                   "dA vs fblayout");
      requireClose(results[i].db, std::vector<double>(results[0].db.begin(), results[0].db.end()), mdb,
                   "dB vs fblayout");
    }
  }
}

TEST_CASE("rtile strategies: what each strategy places and converts", "[rtile_kernels]") {
  auto prof = fbl::profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(prof.ok());
  const MatmulShape fig16{512, 2048, 8192};
  auto fb = planMatmul(Strategy::kFBLayout, fig16, *prof);
  auto reuse = planMatmul(Strategy::kReuse, fig16, *prof);
  auto expl = planMatmul(Strategy::kExplicit, fig16, *prof);
  REQUIRE((fb.ok() && reuse.ok() && expl.ok()));
  // fblayout: no conversion, backward reads B and A transposed through the same layouts.
  for (const MatmulStep& st : fb->steps) CHECK(st.before.empty());
  CHECK(fb->steps[1].rhsT);
  CHECK(fb->steps[2].lhsT);
  CHECK(fb->tensors.at("dB").layout == fb->tensors.at("B").layout);
  // reuse: the forward image everywhere, strided reads in backward, no conversion.
  CHECK(reuse->tensors.at("B").layout == Layout::image({2048, 8192}));
  CHECK(reuse->steps[1].rhsT);
  for (const MatmulStep& st : reuse->steps) CHECK(st.before.empty());
  // explicit: a transpose before each backward product, none of them read transposed.
  CHECK(expl->steps[0].before.empty());
  REQUIRE(expl->steps[1].before.size() == 1);
  CHECK(expl->steps[1].before[0].src == "B");
  CHECK(expl->steps[1].before[0].transpose);
  REQUIRE(expl->steps[2].before.size() == 1);
  CHECK(expl->steps[2].before[0].src == "A");
  for (const MatmulStep& st : expl->steps) CHECK((!st.lhsT && !st.rhsT));
  // A profile whose access table is still pending (not measured) is an error for fblayout only.
  auto h200 = fbl::profile::loadProfile(FBL_SOURCE_DIR "/profiles/nvidia-h200.json");
  REQUIRE(h200.ok());
  fbl::profile::HardwareProfile pending = *h200;
  pending.accessTable.reset();
  CHECK_FALSE(planMatmul(Strategy::kFBLayout, fig16, pending).ok());
  CHECK(planMatmul(Strategy::kReuse, fig16, pending).ok());
}
