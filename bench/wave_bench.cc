// `fbl-bench waves`; the model is in wave_bench.h.
#include "bench/wave_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "bench/strategy_run.h"
#include "compiler/layout/rtile_wave_cost.h"
#include "compiler/plan/profile.h"
#include "compiler/profile/profile.h"
#include "compiler/support/int_math.h"
#include "harness/matmul_run.h"
#include "harness/operator_plans.h"
#include "sim/memory_model.h"

namespace fbl::bench {

using namespace fbl::harness;  // the kernel harness: strategy plans, their traffic, ClSession

namespace {

using nlohmann::json;

double storedBytes(const layout::Layout& l) {
  return l.storage() == layout::Storage::Image2D ? 16.0 * l.imageWidth() * l.imageHeight() : 4.0 * l.bufferSize();
}

// One pass of one plan on one texture L1, before rates.
struct PassWork {
  std::string pass;
  double flops = 0, dramBytes = 0, l1Misses = 0, l2Bytes = 0, conversionBytes = 0;
  // What the DRAM bytes depend on: the operands' bytes, the right operand's reads when it does
  // not stay cached (one per row panel), the left panel's bytes and its reads when it does not.
  double lb = 0, rb = 0, ob = 0, rPanels = 1, leftPanel = 0, lRounds = 1;
};

struct Rates {
  double peakGflops = 0, dramGBs = 0, l2GBs = 0;
};

// Seconds of a pass and the term that binds it.
std::pair<double, const char*> passSeconds(const PassWork& w, const Rates& r) {
  const double c = w.flops / (r.peakGflops * 1e9), d = w.dramBytes / (r.dramGBs * 1e9),
               l = w.l2Bytes / (r.l2GBs * 1e9);
  const double conv = w.conversionBytes / (std::min(r.dramGBs, r.l2GBs) * 1e9);
  if (c >= d && c >= l) return {c + conv, "compute"};
  return d >= l ? std::pair{d + conv, "DRAM"} : std::pair{l + conv, "L2"};
}

// A right operand larger than what stays cached (L2, and a system-level cache where one is
// assumed) is read again for every row panel of M; a left panel past half of it once for every
// round of groups along N.
double dramBytes(const PassWork& w, double cached) {
  return w.lb * (w.leftPanel > cached / 2.0 ? w.lRounds : 1.0) + w.rb * (w.rb > cached ? w.rPanels : 1.0) + w.ob;
}

// The plan's products staged as the compiler stages them (for the profile's L1s), costed on
// `actual`.
std::vector<PassWork> planWork(const MatmulPlan& plan, const codegen::MatmulTiling& t, const layout::TextureL1& actual,
                               int64_t l2CacheBytes, int64_t computeUnits, int64_t groups) {
  std::vector<PassWork> out;
  const layout::StagedTiling staged{t.tm, t.tn, t.tk, t.wgX() * t.wgY(), plan.wave};
  for (const MatmulStep& st : plan.steps) {
    const StagedOperands ops = stagedOperands(plan, st, t);
    const auto [m, k, n] = ops.dims;
    const auto [l, r] = laneOperands(ops);
    const int64_t all = ceilDiv(m, t.tm) * ceilDiv(n, t.tn);
    const int64_t sampled = groups > 0 ? std::min(groups, all) : all;
    const layout::FootprintCount c = layout::textureL1Misses(m, n, k, l, r, staged, actual, sampled);
    PassWork w;
    w.pass = matmulPassName(st.pass);
    w.flops = 2.0 * ceilDiv(m, t.tm) * t.tm * ceilDiv(n, t.tn) * t.tn * k;
    const double lb = storedBytes(ops.lhs.stored), rb = storedBytes(ops.rhs.stored);
    const double ob = storedBytes(plan.tensors.at(st.out).layout);
    // A right operand past L2 is read again for every row panel of M; a left panel past half of
    // L2 once for every round of groups along N.
    w.lb = lb, w.rb = rb, w.ob = ob, w.rPanels = static_cast<double>(ceilDiv(m, t.tm));
    w.leftPanel = 4.0 * t.tm * k, w.lRounds = std::ceil(ceilDiv(n, t.tn) / double(computeUnits));
    w.dramBytes = dramBytes(w, static_cast<double>(l2CacheBytes));
    w.l1Misses = static_cast<double>(c.misses) * all / sampled;
    w.l2Bytes = w.l1Misses * static_cast<double>(actual.lineBytes()) + ob;
    for (const Conversion& cv : st.before)
      w.conversionBytes += storedBytes(plan.tensors.at(cv.src).layout) + storedBytes(plan.tensors.at(cv.dst).layout);
    out.push_back(w);
  }
  return out;
}

std::vector<std::string> passMillions(const std::vector<PassWork>& w) {
  std::vector<std::string> out;
  for (const PassWork& p : w) out.push_back(fmt::format("{:.2f}", p.l1Misses / 1e6));
  return out;
}

template <typename T>
std::vector<T> orNominal(const std::vector<T>& v, T nominal) {
  return v.empty() ? std::vector<T>{nominal} : v;
}

}  // namespace

int runWaveBench(const WaveBenchOptions& o) {
  auto fail = [](const std::string& e) {
    fmt::print(stderr, "fbl-bench waves: {}\n", e);
    return 1;
  };
  if (o.profiles.empty()) return fail("give at least one --profile");
  if (o.scale < 1 || 512 % o.scale || 2048 % o.scale || 8192 % o.scale)
    return fail(fmt::format("--scale {} must divide M=512, K=2048 and N=8192", o.scale));
  if (o.groups < 0) return fail(fmt::format("--groups {} must be 0 (all) or more", o.groups));
  std::vector<std::string> names;
  if (Status e = expandStrategies(o.strategies, &names); !e.ok()) return fail(e.error().message);
  const MatmulShape shape{512 / o.scale, 2048 / o.scale, 8192 / o.scale};
  const auto start = std::chrono::steady_clock::now();
  json report = {{"command", "waves"}, {"M", shape.m}, {"K", shape.k}, {"N", shape.n}, {"groups", o.groups},
                 {"model", "lane model of rtile_matmul.cl's staging (wave_footprint.h); per pass max(FLOPs / peak, "
                           "DRAM bytes / bandwidth, L2 request bytes / L2 bandwidth), explicit's conversions added"},
                 {"profiles", json::array()}};
  for (const std::string& path : o.profiles) {
    auto hw = profile::loadProfile(path);
    if (!hw.ok()) return fail(hw.error().message);
    auto mm = sim::loadMemoryModel(path);
    if (!mm.ok()) return fail(mm.error().message);
    auto planner = plan::plannerProfile(*hw, path);
    if (!planner.ok()) return fail(planner.error().message);
    const codegen::MatmulTiling t = planner->productTiling();
    std::vector<std::pair<std::string, MatmulPlan>> plans;
    for (const std::string& name : names) {
      auto st = strategy::parseStrategy(name);
      if (!st.ok()) return fail(st.error().message);
      auto pl = planMatmul(*st, shape, *hw);
      if (!pl.ok()) return fail(fmt::format("{}: {}", name, pl.error().message));
      plans.emplace_back(name, std::move(*pl));
    }
    json pj = {{"profile", hw->name},
               {"tiling", fmt::format("{}x{}x{}/{}x{}", t.tm, t.tn, t.tk, t.rm, t.rn)},
               {"nominal", {{"l1_texture_cache_bytes", hw->l1TextureCacheBytes},
                            {"texture_block", {{"h", hw->textureBlock.h}, {"w", hw->textureBlock.w}}},
                            {"l2_bandwidth_gbps", mm->l2GBs}}},
               {"bracket_provenance", hw->provenance.count("bracket") ? hw->provenance.at("bracket") : ""},
               {"layouts", json::object()},
               {"points", json::array()}};
    for (const auto& [name, pl] : plans) pj["layouts"][name] = pl.tensors.at("A").layout.str();
    fmt::print("fbl-bench waves: Figure 16 (M={} K={} N={}) on {}, tiling {}, {} groups sampled per product\n",
               shape.m, shape.k, shape.n, hw->name, pj["tiling"].get<std::string>(),
               o.groups > 0 ? std::to_string(o.groups) : std::string("all"));
    fmt::print("  {:>8} {:>5} {:>7} {:>6}", "L1 B", "line", "L2 GB/s", "SLC MB");
    for (const auto& [name, pl] : plans) fmt::print(" {:>10}", name + " us");
    for (size_t i = 1; i < plans.size(); ++i) fmt::print(" {:>13}", "fbl/" + plans[i].first);
    fmt::print("  binds (fwd dA dB, {})\n", plans[0].first);
    const Rates base{mm->peakGflops, mm->dramGBs, mm->l2GBs};
    double worstL2 = 0;  // the L2 term over its pass's time, at worst
    for (profile::TextureBlock block : orNominal(hw->bracket.textureBlocks, hw->textureBlock))
      for (int64_t l1Bytes : orNominal(hw->bracket.l1TextureBytes, hw->l1TextureCacheBytes)) {
        const int64_t lineBytes = int64_t{16} * block.h * block.w;
        const layout::TextureL1 actual{std::max<int64_t>(1, l1Bytes / lineBytes), block.h, block.w};
        std::vector<std::vector<PassWork>> work;
        std::string misses;
        for (const auto& [name, pl] : plans) {
          work.push_back(planWork(pl, t, actual, hw->l2CacheBytes, hw->computeUnits, o.groups));
          misses += fmt::format("  {} {}", name, fmt::join(passMillions(work.back()), "/"));
        }
        fmt::print("  {:>8} {:>5} texture-L1 misses, millions (fwd/dA/dB):{}\n", l1Bytes,
                   fmt::format("{}x{}", block.h, block.w), misses);
        for (int64_t slc : orNominal(hw->bracket.slcBytes, int64_t{0}))
          for (double l2 : orNominal(hw->bracket.l2GBs, mm->l2GBs)) {
            Rates r = base;
            r.l2GBs = l2;
            for (auto& passes : work)
              for (PassWork& w : passes) w.dramBytes = dramBytes(w, static_cast<double>(hw->l2CacheBytes + slc));
            json point = {{"l1_texture_cache_bytes", l1Bytes},
                          {"texture_block", {{"h", block.h}, {"w", block.w}}},
                          {"l2_bandwidth_gbps", l2},
                          {"slc_bytes", slc},
                          {"strategies", json::object()}};
            std::vector<double> totals;
            std::string binds;
            for (size_t s = 0; s < plans.size(); ++s) {
              double total = 0;
              json passes = json::object();
              for (const PassWork& w : work[s]) {
                auto [sec, bind] = passSeconds(w, r);
                total += sec;
                worstL2 = std::max(worstL2, w.l2Bytes / (r.l2GBs * 1e9) / sec);
                passes[w.pass] = {{"us", sec * 1e6},     {"binds", bind},         {"flops", w.flops},
                                  {"dram_bytes", w.dramBytes}, {"l1_misses", w.l1Misses}, {"l2_bytes", w.l2Bytes},
                                  {"conversion_bytes", w.conversionBytes}};
                if (s == 0) binds += std::string(binds.empty() ? "" : " ") + bind;
              }
              totals.push_back(total);
              point["strategies"][plans[s].first] = {{"us", total * 1e6}, {"passes", passes}};
            }
            fmt::print("  {:>8} {:>5} {:>7.0f} {:>6.0f}", l1Bytes, fmt::format("{}x{}", block.h, block.w), l2,
                       slc / 1048576.0);
            for (double tt : totals) fmt::print(" {:>10.1f}", tt * 1e6);
            for (size_t i = 1; i < totals.size(); ++i) fmt::print(" {:>12.2f}x", totals[i] / totals[0]);
            fmt::print("  {}\n", binds);
            pj["points"].push_back(point);
          }
      }
    // A cluster cache between the L1s and L2 can only lower the L2 term: below the binding term
    // everywhere, no cluster cache changes a figure.
    pj["l2_term_worst_share"] = worstL2;
    if (!hw->bracket.clusterCacheBytes.empty())
      fmt::print("  cluster cache (up to {} KiB, not modelled): the L2 term is at most {:.2f}x of a pass's time, so {}\n",
                 *std::max_element(hw->bracket.clusterCacheBytes.begin(), hw->bracket.clusterCacheBytes.end()) / 1024,
                 worstL2, worstL2 < 1 ? "it changes no figure" : "it could lower the passes the L2 term binds");
    report["profiles"].push_back(pj);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (Status e = finishReport(report, wall, o.json); !e.ok()) return fail(e.error().message);
  return 0;
}

}  // namespace fbl::bench
