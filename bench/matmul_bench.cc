// `fbl-bench matmul`, see matmul_bench.h. Each strategy's plan runs `runs` times after a warm-up;
// per pass the minimum and median device time over the runs are reported (kernel time from
// OpenCL profiling events, conversions included in the pass they precede). GFLOP/s uses the
// minimum. Bytes read are modelled from the access pattern (harness/matmul_traffic.h), not
// counted by the hardware.
#include "bench/matmul_bench.h"


#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/profile_paths.h"
#include "compiler/codegen/matmul_tiling.h"
#include "compiler/plan/profile.h"
#include "compiler/profile/profile.h"
#include "compiler/strategy/strategy.h"
#include "harness/matmul_run.h"
#include "harness/matmul_traffic.h"

namespace fbl::bench {

using namespace fbl::harness;  // the kernel harness: strategy plans, their traffic, ClSession

using strategy::kAllStrategies;
using strategy::parseStrategy;
using strategy::Strategy;
using strategy::strategyName;

namespace {

// The committed profile of the device, by its OpenCL name.
std::string defaultProfile(const ClSession& s) {
  if (s.deviceName().find("H200") != std::string::npos) return findProfile("nvidia-h200");
  if (s.deviceClass() == profile::DeviceClass::kCpu) return findProfile("pocl-cpu");
  return findProfile("adreno-830");
}

std::vector<float> randomMatrix(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

struct Stat {
  double minMs = 0, medianMs = 0, convMs = 0;
};

Stat stat(const std::vector<std::map<MatmulPass, PassTime>>& reps, const std::vector<MatmulPass>& passes) {
  std::vector<double> tot;
  double conv = 1e300;
  for (const auto& r : reps) {
    double t = 0, c = 0;
    for (MatmulPass p : passes) {
      t += r.at(p).totalMs();
      c += r.at(p).conversionMs;
    }
    tot.push_back(t);
    conv = std::min(conv, c);
  }
  std::sort(tot.begin(), tot.end());
  return {tot.front(), tot[tot.size() / 2], conv};
}

}  // namespace

int runMatmulBench(const MatmulBenchOptions& o) {
  std::vector<Strategy> strategies;
  for (const std::string& name : o.strategies) {
    auto s = parseStrategy(name);
    if (!s.ok()) {
      fmt::print(stderr, "error: {}\n", s.error().message);
      return 2;
    }
    strategies.push_back(*s);
  }
  if (strategies.empty()) strategies.assign(std::begin(kAllStrategies), std::end(kAllStrategies));
  auto session = ClSession::open(o.device);
  if (!session.ok()) {
    fmt::print(stderr, "error: {}\n", session.error().message);
    return 1;
  }
  ClSession& s = **session;
  // A CPU device runs the full shapes at a few GFLOP/s: by default it gets a quarter of each extent.
  const int64_t scale = o.scale > 0 ? o.scale : s.deviceClass() == profile::DeviceClass::kCpu ? 4 : 1;
  if (o.m % scale || o.k % scale || o.n % scale || o.runs < 1) {
    fmt::print(stderr, "error: --scale {} must divide M={} K={} N={} and --runs must be positive\n", scale, o.m, o.k,
               o.n);
    return 2;
  }
  const MatmulShape shape{o.m / scale, o.k / scale, o.n / scale};
  const std::string profPath = o.profile.empty() ? defaultProfile(s) : o.profile;
  auto prof = profile::loadProfile(profPath);
  auto rprof = profile::loadProfile(o.rtileProfile.empty() ? profPath : o.rtileProfile);
  if (!prof.ok() || !rprof.ok()) {
    fmt::print(stderr, "error: {}\n", (!prof.ok() ? prof : rprof).error().message);
    return 1;
  }
  // Each product's tiling: the profile's cost model (codegen/matmul_tiling.h), or one --tile.
  auto planProf = plan::plannerProfile(*prof, profPath);
  if (!planProf.ok()) return fmt::print(stderr, "error: {}\n", planProf.error().message), 1;
  s.setBuildOptions(planProf->buildOptions);
  codegen::MatmulCostModel model = planProf->matmul;
  if (model.computeUnits <= 0) model.computeUnits = s.computeUnits();
  ScheduleFor scheduleFor = [&](int64_t m, int64_t n, int64_t k) {
    if (o.singleLaunch) {
      codegen::MatmulSchedule one;
      one.main = codegen::chooseMatmulTiling(model, s.deviceClass(), m, n, k);
      one.mainCols = n;
      return one;
    }
    return codegen::chooseMatmulSchedule(model, codegen::matmulTiling(s.deviceClass()), m, n, k);
  };
  if (!o.tiles.empty()) {
    auto t = codegen::parseTileSpec(o.tiles.front(), codegen::matmulTiling(s.deviceClass()).pipeline);
    if (!t.ok()) return fmt::print(stderr, "error: --tile: {}\n", t.error().message), 2;
    codegen::MatmulTiling fixed = *t;
    fixed.splitK = 0;
    scheduleFor = fixedTiling(fixed, s.computeUnits());
  }
  auto describe = [&](int64_t m, int64_t n, int64_t k) {
    const codegen::MatmulSchedule sched = scheduleFor(m, n, k);
    auto one = [](const codegen::MatmulTiling& t) {
      return fmt::format("{} p{} split {}", codegen::tileString(t), t.pipeline, t.splitK);
    };
    if (sched.mainCols == n) return one(sched.main);
    return fmt::format("columns [0, {}) {}, [{}, {}) {}", sched.mainCols, one(sched.main), sched.mainCols, n,
                       one(sched.tail));
  };
  MatmulData data;
  data.a = randomMatrix(shape.m * shape.k, 1);
  data.b = randomMatrix(shape.k * shape.n, 2);
  data.dc = randomMatrix(shape.m * shape.n, 3);
  const double gflop = 2.0 * static_cast<double>(shape.m * shape.k * shape.n) * 1e-9;

  nlohmann::json jout{{"device", s.deviceName()}, {"profile", profPath},
                      {"rtile_profile", o.rtileProfile.empty() ? profPath : o.rtileProfile},
                      {"M", shape.m}, {"K", shape.k}, {"N", shape.n}, {"runs", o.runs},
                      {"tiling", {{"forward", describe(shape.m, shape.n, shape.k)},
                                  {"dA", describe(shape.m, shape.k, shape.n)},
                                  {"dB", describe(shape.k, shape.n, shape.m)}}},
                      {"strategies", nlohmann::json::array()}};
  if (!o.json)
    fmt::print("matmul (Figure 16) on {}: forward M={} K={} N={}, backward dA (K={}, N={}) and dB; "
               "{} runs, tiling forward {}, dA {}, dB {}; profile {}\n",
               s.deviceName(), shape.m, shape.k, shape.n, shape.n, shape.k, o.runs,
               jout["tiling"]["forward"].get<std::string>(), jout["tiling"]["dA"].get<std::string>(),
               jout["tiling"]["dB"].get<std::string>(), profPath);
  std::vector<float> ref;
  for (Strategy st : strategies) {
    auto plan = planMatmul(st, shape, *rprof);
    if (!plan.ok()) {
      fmt::print(stderr, "error: {}: {}\n", strategyName(st), plan.error().message);
      return 1;
    }
    auto run = runMatmulPlan(s, *plan, scheduleFor, data, o.runs);
    if (!run.ok()) {
      fmt::print(stderr, "error: {}: {}\n", strategyName(st), run.error().message);
      return 1;
    }
    std::map<MatmulPass, PassTraffic> traffic;
    for (const MatmulStep& step : plan->steps) {
      const auto [m, k, n] = productShape(shape, step.pass);
      traffic[step.pass] = modelPassTraffic(*plan, step, scheduleFor(m, n, k).main, *prof, s.computeUnits());
    }
    struct Row {
      const char* name;
      std::vector<MatmulPass> passes;
      double flop;
    };
    const std::vector<Row> rows = {{"forward", {MatmulPass::kForward}, gflop},
                                   {"backward dA", {MatmulPass::kGradA}, gflop},
                                   {"backward dB", {MatmulPass::kGradB}, gflop},
                                   {"backward", {MatmulPass::kGradA, MatmulPass::kGradB}, 2 * gflop},
                                   {"forward+backward", {MatmulPass::kForward, MatmulPass::kGradA, MatmulPass::kGradB},
                                    3 * gflop}};
    nlohmann::json js{{"strategy", strategyName(st)}, {"layouts", nlohmann::json::object()}, {"passes", nlohmann::json::array()}};
    for (const auto& [t, pl] : plan->tensors) js["layouts"][t] = pl.layout.str() + " -- " + pl.why;
    if (!o.json) {
      fmt::print("\n{}:\n", strategyName(st));
      for (const char* t : {"A", "B", "dC"}) fmt::print("  {:<3} {}\n", t, plan->tensors.at(t).why);
      fmt::print("  {:<18} {:>9} {:>9} {:>9} {:>10} {:>13}\n", "pass", "min ms", "median ms", "conv ms", "GFLOP/s",
                 "MB read");
    }
    for (const Row& r : rows) {
      Stat stt = stat(run->repeats, r.passes);
      double bytes = 0;
      for (MatmulPass p : r.passes) bytes += traffic.at(p).totalBytes();
      const double gfs = r.flop / (stt.minMs * 1e-3);
      if (o.json)
        js["passes"].push_back({{"pass", r.name}, {"min_ms", stt.minMs}, {"median_ms", stt.medianMs},
                                {"conversion_ms", stt.convMs}, {"gflops", gfs}, {"bytes_read_modelled", bytes}});
      else
        fmt::print("  {:<18} {:>9.3f} {:>9.3f} {:>9.3f} {:>10.1f} {:>13.1f}\n", r.name, stt.minMs, stt.medianMs,
                   stt.convMs, gfs, bytes * 1e-6);
    }
    // Every strategy must compute the same gradients; a mismatch is a bug, not a measurement.
    std::vector<float> mine = run->data.c;
    mine.insert(mine.end(), run->data.da.begin(), run->data.da.end());
    mine.insert(mine.end(), run->data.db.begin(), run->data.db.end());
    if (ref.empty()) {
      ref = mine;
    } else {
      double worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(ref[i] - mine[i])));
      js["max_abs_diff_vs_first"] = worst;
      if (!o.json) fmt::print("  max |difference| to {} over C, dA, dB: {:.3g}\n", strategyName(strategies[0]), worst);
    }
    jout["strategies"].push_back(js);
  }
  if (o.json) fmt::print("{}\n", jout.dump(1));
  return 0;
}

}  // namespace fbl::bench
