// The lane model of rtile_matmul.cl's staging (compiler/layout/wave_footprint.h): staging orders
// are permutations of the region, misses never fall below the distinct lines a group touches and
// reach them when the L1 holds everything, and the wave-footprint R-Tile cost picks a tile whose
// Figure-16 products fetch no more lines than plain images do. tests/sim/wave_footprint_sim_test.cc
// checks the counts against the simulator.
#include <algorithm>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "compiler/codegen/matmul_staging.h"
#include "compiler/layout/layout.h"
#include "compiler/layout/rtile_wave_cost.h"
#include "compiler/profile/profile.h"
#include "harness/matmul_run.h"
#include "harness/operator_plans.h"

using namespace fbl::layout;

namespace {

const StagedTiling kGpu{128, 128, 16, 256, 64};

fbl::profile::HardwareProfile phone(const std::string& name) {
  auto p = fbl::profile::loadProfile(std::string(FBL_SOURCE_DIR) + "/profiles/" + name + ".json");
  REQUIRE(p.ok());
  return *p;
}

// Misses of one Figure-16 pass of a bench plan, its operands staged as the plan's products are.
FootprintCount passMisses(const fbl::harness::MatmulPlan& plan, const fbl::harness::MatmulStep& st, const TextureL1& l1,
                          int64_t maxGroups) {
  fbl::codegen::MatmulTiling t;
  t.tm = kGpu.tm, t.tn = kGpu.tn, t.tk = kGpu.tk, t.rm = 8, t.rn = 8;
  const fbl::harness::StagedOperands ops = fbl::harness::stagedOperands(plan, st, t);
  const auto [l, r] = fbl::harness::laneOperands(ops);
  StagedTiling staged = kGpu;
  staged.wave = plan.wave;
  return textureL1Misses(ops.dims.m, ops.dims.n, ops.dims.k, l, r, staged, l1, maxGroups);
}

}  // namespace

TEST_CASE("staging orders: each read lands on a distinct texel of the region", "[wave_footprint]") {
  for (auto [rows, texels] : {std::pair<int64_t, int64_t>{128, 4}, {16, 32}, {16, 4}, {4, 32}}) {
    const auto orders = stagingCandidates(rows, texels, 64);
    REQUIRE(orders.front().rowMajor(texels));
    for (StagingOrder o : orders) {
      INFO(rows << "x" << texels << " in chunks of " << o.rows << "x" << o.texels);
      REQUIRE(fitsRegion(o, rows, texels));
      std::set<std::pair<int64_t, int64_t>> seen;
      for (int64_t t = 0; t < rows * texels; ++t) {
        auto rc = stagedTexel(t, texels, o);
        REQUIRE((rc.first >= 0 && rc.first < rows && rc.second >= 0 && rc.second < texels));
        seen.insert(rc);
        if (o.rowMajor(texels)) CHECK(rc == std::pair{t / texels, t % texels});
        // A chunk of one wave's width or less keeps a wave's reads in whole chunks.
        if (!o.rowMajor(texels) && (t % (o.rows * o.texels)) == 0) CHECK(rc.first % o.rows == 0);
      }
      CHECK(static_cast<int64_t>(seen.size()) == rows * texels);
    }
  }
  CHECK_FALSE(fitsRegion({3, 1}, 16, 32));
  CHECK_FALSE(fitsRegion({1, 3}, 16, 32));
}

TEST_CASE("lane model: misses are at least the lines touched, and equal them in a large L1", "[wave_footprint]") {
  const int64_t m = 256, k = 96, n = 200;
  auto a = Layout::rtile({m, k}, TileSpec::blocks(8, 64, 8, 8, 2, 8));
  REQUIRE(a.ok());
  const Layout b = Layout::image({k, n});
  for (StagingOrder lo : {StagingOrder{}, StagingOrder{8, 2}}) {
    StagedOperand l{fbl::codegen::texelMap(*a), m, k, false, lo};
    StagedOperand r{fbl::codegen::texelMap(b), k, n, false, {}};
    // Distinct (operand, block) pairs per group, counted by a plain loop over the regions.
    std::set<std::tuple<int, int, int64_t, int64_t>> blocks;
    for (int64_t gm = 0; gm < m; gm += kGpu.tm)
      for (int64_t gn = 0; gn < n; gn += kGpu.tn) {
        const int g = static_cast<int>((gm / kGpu.tm) * 2 + gn / kGpu.tn);
        for (int64_t kk = 0; kk < k; ++kk) {
          for (int64_t i = gm; i < std::min(m, gm + kGpu.tm); ++i) {
            auto [x, y] = l.texel(i, kk / 4 * 4);
            blocks.insert({g, 0, y / 2, x / 8});
          }
          for (int64_t j = gn; j < std::min(n, gn + kGpu.tn); j += 4) {
            auto [x, y] = r.texel(kk, j);
            blocks.insert({g, 1, y / 2, x / 8});
          }
        }
      }
    FootprintCount large = textureL1Misses(m, n, k, l, r, kGpu, {1 << 20, 2, 8});
    CHECK(large.lines == static_cast<int64_t>(blocks.size()));
    CHECK(large.misses == large.lines);
    CHECK(large.texels == (m * k + k * n) / 4 * 2);  // each region read once per group of its row or column
    FootprintCount small = textureL1Misses(m, n, k, l, r, kGpu, {8, 2, 8});
    CHECK(small.lines == large.lines);
    CHECK(small.misses >= small.lines);
  }
}

TEST_CASE("lane model: staging in chunks of a texture block reads a strip's blocks once", "[wave_footprint]") {
  // dB = A^T dC reads A across its rows: a wave of the row-major walk takes 2 rows x 128 columns,
  // a quarter of 16 blocks of 8 x 8 elements, and the 4 waves fetch them again from 8 lines.
  auto a = Layout::rtile({64, 256}, TileSpec::blocks(8, 64, 8, 8, 2, 8));
  REQUIRE(a.ok());
  const StagedOperand none;
  StagedOperand at{fbl::codegen::texelMap(*a), 64, 256, true, {}};
  const TextureL1 l1{8, 2, 8};
  FootprintCount rowMajor = textureL1Misses(256, 128, 64, at, none, kGpu, l1);
  StagingChoice best = bestStaging(256, 128, 64, at, true, none, kGpu, {l1}, 0, 0);
  CHECK(rowMajor.misses == 4 * rowMajor.lines);
  CHECK(best.counts[0].misses == best.counts[0].lines);
  CHECK_FALSE(best.order.rowMajor(32));
}

TEST_CASE("wave-footprint cost: Figure 16's fblayout fetches no more lines than reuse, bracket included",
          "[wave_footprint]") {
  // 4 groups of each full-size pass (the staging repeats group after group), on every texture L1
  // the profile's bracket allows: the plans are made once, for the profile as it stands.
  for (const char* name : {"adreno-830", "adreno-730", "mali-g925"}) {
    const fbl::profile::HardwareProfile p = phone(name);
    REQUIRE(p.waveFootprint.has_value());
    auto fbl = fbl::harness::planMatmul(fbl::strategy::Strategy::kFBLayout, {512, 2048, 8192}, p);
    auto reuse = fbl::harness::planMatmul(fbl::strategy::Strategy::kReuse, {512, 2048, 8192}, p);
    REQUIRE((fbl.ok() && reuse.ok()));
    for (const TextureL1& l1 : bracketedTextureL1s(p))
      for (size_t i = 0; i < fbl->steps.size(); ++i) {
        INFO(name << " " << l1.lines << " lines of " << l1.blockH << "x" << l1.blockW << " "
                  << fbl::harness::matmulPassName(fbl->steps[i].pass) << ": A " << fbl->tensors.at("A").layout.str());
        FootprintCount f = passMisses(*fbl, fbl->steps[i], l1, 4), r = passMisses(*reuse, reuse->steps[i], l1, 4);
        CHECK(f.misses <= r.misses);
      }
  }
}
