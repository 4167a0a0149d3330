// `fbl-bench estimate`; the model is in estimate_bench.h.
#include "bench/estimate_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "bench/strategy_run.h"
#include "compiler/driver/compile_command.h"
#include "compiler/profile/profile.h"
#include "compiler/report/explain.h"
#include "compiler/report/step_estimate.h"
#include "compiler/support/int_math.h"
#include "runtime/plan_check.h"
#include "runtime/plan_file.h"
#include "sim/memory_model.h"

namespace fbl::bench {

namespace {

using nlohmann::json;

}  // namespace

int runEstimateBench(const EstimateBenchOptions& o) {
  auto fail = [](const std::string& e) {
    fmt::print(stderr, "fbl-bench estimate: {}\n", e);
    return 1;
  };
  const auto start = std::chrono::steady_clock::now();
  auto hw = profile::loadProfile(o.profile);
  if (!hw.ok()) return fail(hw.error().message);
  auto rates = report::estimateRates(*hw, 0);
  if (!rates.ok()) return fail(rates.error().message);
  const report::EstimateRates base = *rates;
  std::vector<double> l2s;
  if (auto mm = sim::loadMemoryModel(o.profile); mm.ok()) {
    l2s = hw->bracket.l2GBs.empty() ? std::vector<double>{mm->l2GBs} : hw->bracket.l2GBs;
  } else {
    l2s = {0};  // no memory model: no L2 term
  }
  std::vector<double> alus = o.aluEfficiency.empty() ? std::vector<double>{1.0} : o.aluEfficiency;
  const std::vector<int64_t> slcs = hw->bracket.slcBytes.empty() ? std::vector<int64_t>{0} : hw->bracket.slcBytes;
  for (double e : alus)
    if (!(e > 0 && e <= 1)) return fail(fmt::format("--alu-efficiency {} must be in (0, 1]", e));

  std::vector<std::pair<std::string, planfile::Plan>> plans;
  const bool isPlan = o.input.size() > 4 && o.input.substr(o.input.size() - 4) == ".fbp";
  if (isPlan) {
    Result<planfile::Plan> p = rt::readPlanFile(o.input);
    if (!p.ok()) return fail(p.error().message);
    plans.emplace_back("plan", std::move(p).value());
  } else {
    std::vector<std::string> names;
    if (Status e = expandStrategies(o.strategies, &names); !e.ok()) return fail(e.error().message);
    // Each strategy as it is, then without each pass of --without, then without all of them.
    std::vector<std::vector<std::string>> variants = {{}};
    for (const std::string& p : o.without) variants.push_back({p});
    if (o.without.size() > 1) variants.push_back(o.without);
    for (const std::string& st : names)
      for (const std::vector<std::string>& off : variants) {
        driver::CompileArgs ca;
        ca.model = o.input, ca.profile = o.profile, ca.strategy = st, ca.disabledPasses = off;
        ca.noWeights = true, ca.allowOverLimit = true;  // an estimate, not a plan for a device
        // The plan `fblc compile` would write: the profile's compile_defaults (a phone's int4 base,
        // bf16 saved activations and app budget) where the command line gives none.
        ca.fromProfile.baseWeights = ca.fromProfile.precision = ca.fromProfile.memoryBudget = o.profileDefaults;
        std::string name = off.empty() ? st : fmt::format("{} without {}", st, fmt::join(off, ", "));
        auto c = driver::compileModel(ca);
        if (!c.ok() && o.profileDefaults && hw->compileDefaults.memoryBudget.size()) {
          // A strategy no plan of which meets the profile's budget is still estimated, as planned
          // without one (e.g. explicit's transposed weight copies on a phone).
          ca.fromProfile.memoryBudget = false;
          c = driver::compileModel(ca);
          name += " (over the budget)";
        }
        if (!c.ok()) return fail(fmt::format("strategy {}: {}", st, c.error().message));
        plans.emplace_back(name, std::move(c->plan));
      }
  }

  json report = {{"command", "estimate"}, {"input", o.input}, {"profile", hw->name},
                 {"model", "per launch max(executed FLOPs / (peak x ALU efficiency), DRAM bytes / bandwidth, "
                           "L2 bytes / L2 bandwidth); no latency, occupancy or launch overhead"},
                 {"peak_gflops", base.peakGflops}, {"dram_gbps", base.dramGBs}, {"l2_gbps", l2s},
                 {"alu_efficiency", alus}, {"strategies", json::array()}};
  fmt::print("fbl-bench estimate: {} on {} (peak {:.0f} GFLOP/s, DRAM {:.1f} GB/s{})\n", o.input, hw->name,
             base.peakGflops, base.dramGBs,
             l2s[0] > 0 ? fmt::format(", L2 {} GB/s", fmt::join(l2s, " to ")) : std::string(", no L2 term"));
  for (const auto& [name, plan] : plans) {
    auto ex = report::buildExplainReport(plan);
    if (!ex.ok()) return fail(fmt::format("{}: {}", name, ex.error().message));
    // The system-level cache changes what a launch re-reads from DRAM, so the work is per SLC; the
    // totals and the costliest launches are without one (the bracket always holds 0).
    std::vector<std::vector<report::LaunchWork>> bySlc;
    for (int64_t slc : slcs) {
      report::EstimateRates r = base;
      r.slcBytes = slc;
      auto w = report::launchWork(plan, *ex, r);
      if (!w.ok()) return fail(fmt::format("{}: {}", name, w.error().message));
      bySlc.push_back(std::move(*w));
    }
    const std::vector<report::LaunchWork>* work =
        &bySlc[static_cast<size_t>(std::find(slcs.begin(), slcs.end(), int64_t{0}) - slcs.begin())];
    json sj = {{"strategy", name}, {"launches", work->size()}, {"points", json::array()}};
    double flops = 0, dram = 0;
    for (const report::LaunchWork& w : *work) flops += w.flops, dram += w.dramBytes;
    sj["executed_flops"] = flops, sj["dram_bytes"] = dram;
    fmt::print("\n{}: {} launches, {:.3f} TFLOP executed, {:.2f} GB from DRAM\n", name, work->size(), flops / 1e12,
               dram / 1e9);
    fmt::print("  {:>8} {:>8} {:>7} {:>10}  {}\n", "ALU eff", "L2 GB/s", "SLC MB", "step s",
               "per phase: seconds (bound by compute / DRAM / L2)");
    int64_t l2Bound = 0;  // launches the L2 term binds, at any point
    for (double alu : alus)
      for (size_t si = 0; si < slcs.size(); ++si)
        for (double l2 : l2s) {
          report::EstimateRates r = base;
          r.l2GBs = l2;
          r.slcBytes = slcs[si];
          const std::vector<report::LaunchWork>& points = bySlc[si];
          std::map<std::string, std::map<std::string, double>> byPhase;
          double total = 0;
          for (const report::LaunchWork& w : points) {
            const report::LaunchTime t = report::launchTime(w, r, alu);
            byPhase[w.phase][t.binds()] += t.seconds();
            total += t.seconds();
            if (std::string(t.binds()) == "L2") ++l2Bound;
          }
          std::string phases;
          json pj = json::object();
          for (const auto& [ph, m] : byPhase) {
            double s = 0;
            for (const auto& [k, v] : m) s += v;
            auto share = [&](const char* k) { return m.count(k) ? m.at(k) / s * 100 : 0.0; };
            phases += fmt::format("  {} {:.3f} ({:.0f}/{:.0f}/{:.0f}%)", ph, s, share("compute"), share("DRAM"), share("L2"));
            pj[ph] = {{"seconds", s}, {"bound_seconds", m}};
          }
          fmt::print("  {:>8.2f} {:>8.0f} {:>7.0f} {:>10.3f}{}\n", alu, l2, slcs[si] / 1048576.0, total, phases);
          sj["points"].push_back({{"alu_efficiency", alu}, {"l2_gbps", l2}, {"slc_bytes", slcs[si]}, {"seconds", total},
                                  {"phases", pj}});
        }
    // A cluster cache between the L1s and L2 can only lower the L2 term: where that binds no launch,
    // no cluster cache of the bracket changes a figure.
    sj["l2_bound_launches"] = l2Bound;
    if (!hw->bracket.clusterCacheBytes.empty())
      fmt::print("  cluster cache (up to {} KiB, not modelled): {}\n",
                 *std::max_element(hw->bracket.clusterCacheBytes.begin(), hw->bracket.clusterCacheBytes.end()) / 1024,
                 l2Bound == 0 ? "the L2 term binds no launch at any point, so it changes no figure"
                              : fmt::format("the L2 term binds {} launch-points, which it could lower", l2Bound));
    // The costliest launches at the first point.
    report::EstimateRates r = base;
    r.l2GBs = l2s[0];
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < work->size(); ++i) order.push_back({report::launchTime((*work)[i], r, alus[0]).seconds(), i});
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    fmt::print("  costliest launches (ALU efficiency {:.2f}, L2 {:.0f} GB/s):\n", alus[0], l2s[0]);
    json top = json::array();
    for (size_t i = 0; i < order.size() && static_cast<int>(i) < o.top; ++i) {
      const report::LaunchWork& w = (*work)[order[i].second];
      const report::LaunchTime t = report::launchTime(w, r, alus[0]);
      fmt::print("    {:>9.3f} ms  {:<7}  {:<9} {}  ({})\n", t.seconds() * 1e3, t.binds(), w.phase, w.node, w.kernel);
      top.push_back({{"ms", t.seconds() * 1e3}, {"binds", t.binds()}, {"phase", w.phase}, {"node", w.node},
                     {"kernel", w.kernel}, {"flops", w.flops}, {"dram_bytes", w.dramBytes}, {"l2_bytes", w.l2Bytes}});
    }
    sj["costliest"] = top;
    if (o.launches) {
      sj["launch_work"] = json::array();
      for (const report::LaunchWork& w : *work)
        sj["launch_work"].push_back({{"phase", w.phase}, {"node", w.node}, {"kernel", w.kernel}, {"flops", w.flops},
                                     {"dram_bytes", w.dramBytes}, {"l2_bytes", w.l2Bytes}});
    }
    report["strategies"].push_back(sj);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (Status e = finishReport(report, wall, o.json); !e.ok()) return fail(e.error().message);
  return 0;
}

}  // namespace fbl::bench
