// `fbl-bench step` (see step_bench.h): every requested strategy (or, with --ablation, every
// ablation variant) is compiled and measured by runStrategy (bench/strategy_run.cc: the steps,
// the phase rounds, the launch profiling and the static figures); this file compares the plans,
// prints the table and writes JSON and SVG.
//
// Whether the runs differ is read off the plans, never assumed: equal digests of program and
// launches mean one plan, and the output says so instead of labelling noise as a difference.
// The ablation's speed-ups are reuse's time over the variant's, wall clock (step) and device.
#include "bench/step_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/strategy_run.h"
#include "compiler/driver/compile_command.h"
#include "compiler/passes/layout_pipeline.h"
#include "compiler/passes/load_model.h"

namespace fbl::bench {

namespace {

namespace fs = std::filesystem;

std::string label(const StrategyRun& m) {
  const std::string& name = m.variant.empty() ? m.strategy : m.variant;
  const std::string withStorage = m.labelStorage ? name + "/" + m.storage : name;
  const std::string withBase = m.labelBaseWeights ? withStorage + "/" + m.baseWeights : withStorage;
  return m.labelPrecision ? withBase + "/" + m.precision : withBase;
}

// The earlier run with the same plan digest, or "".
std::string samePlanAs(const std::vector<StrategyRun>& runs, size_t i) {
  for (size_t k = 0; k < i; ++k)
    if (runs[k].planDigest == runs[i].planDigest) return label(runs[k]);
  return "";
}

double ratio(double base, double x) { return x > 0 ? base / x : 0.0; }

// One horizontal stacked bar per measured strategy: forward, backward, optimizer milliseconds.
std::string svgChart(const std::vector<StrategyRun>& ms, const std::string& title, const std::string& note) {
  const std::vector<std::pair<std::string, std::string>> phases{
      {"forward", "#4e79a7"}, {"backward", "#f28e2b"}, {"optimizer", "#59a14f"}};
  double maxMs = 0;
  for (const StrategyRun& m : ms) {
    double total = 0;
    for (const auto& [ph, color] : phases) total += m.phaseS.count(ph) ? m.phaseS.at(ph) * 1e3 : 0.0;
    maxMs = std::max(maxMs, total);
  }
  if (maxMs <= 0) maxMs = 1;
  const int left = 170, barW = 520, rowH = 34, top = 70;
  const int height = top + rowH * static_cast<int>(ms.size()) + 60;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"14\">{}</text>\n<text x=\"10\" y=\"40\" fill=\"#666\">{}</text>\n",
      left + barW + 160, height, xmlEscape(title), xmlEscape(note));
  for (size_t i = 0; i < ms.size(); ++i) {
    const int y = top + rowH * static_cast<int>(i);
    s += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + 17, xmlEscape(label(ms[i])));
    double x = left, total = 0;
    for (const auto& [ph, color] : phases) {
      const double msv = ms[i].phaseS.count(ph) ? ms[i].phaseS.at(ph) * 1e3 : 0.0;
      const double w = barW * msv / maxMs;
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"22\" fill=\"{}\"><title>{} {:.3f} ms</title></rect>\n",
                       x, y, w, color, ph, msv);
      x += w;
      total += msv;
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.2f} ms, {:.1f} samples/s, layout {:.3f} ms</text>\n", x + 6,
                     y + 16, total, ms[i].samplesPerS, ms[i].layoutS * 1e3);
  }
  const int ly = top + rowH * static_cast<int>(ms.size()) + 20;
  for (size_t k = 0; k < phases.size(); ++k) {
    const int lx = left + static_cast<int>(k) * 110;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
                     lx, ly, phases[k].second, lx + 16, ly + 11, phases[k].first);
  }
  return s + "</svg>\n";
}

}  // namespace

const std::vector<AblationVariant>& ablationVariants() {
  static const std::vector<AblationVariant> v{
      {"reuse", "reuse", {}},
      {"R-Tile alone", "fblayout", {"tile-index-elimination", "global-layout-selection", "fusion", "fuse-attention"}},
      {"+ index elimination", "fblayout", {"global-layout-selection", "fusion", "fuse-attention"}},
      {"+ global selection", "fblayout", {"fusion", "fuse-attention"}},
      {"fblayout", "fblayout", {}},
  };
  return v;
}

int runStepBench(const StepBenchOptions& o) {
  std::vector<RunOptions> runs;
  if (o.ablation) {
    if (!o.strategies.empty())
      return fmt::print(stderr, "error: --ablation runs its own variants; give it without --strategy\n"), 2;
    const std::vector<std::string> known = driver::compilePassNames();
    for (const AblationVariant& v : ablationVariants()) {
      for (const std::string& p : v.disabledPasses)
        if (std::find(known.begin(), known.end(), p) == known.end())
          return fmt::print(stderr, "error: ablation variant '{}' disables '{}', which fblc compile does not have\n",
                            v.name, p), 3;
      runs.push_back({o.model, o.profile, v.strategy, o.steps, o.device, o.seed, true, v.disabledPasses, v.name});
    }
  } else {
    std::vector<std::string> strategies;
    if (Status e = expandStrategies(o.strategies, &strategies); !e.ok()) return fmt::print(stderr, "error: {}\n", e.error().message), 2;
    const std::vector<std::string> storages = o.storages.empty() ? std::vector<std::string>{"auto"} : o.storages;
    for (const std::string& st : strategies)
      for (const std::string& storage : storages)
        runs.push_back({o.model, o.profile, st, o.steps, o.device, o.seed, true, o.disabledPasses, "", storage,
                        !o.storages.empty()});
  }
  if (o.steps < 1) return fmt::print(stderr, "error: --steps must be at least 1\n"), 2;
  for (RunOptions& r : runs) {
    r.recompute = o.recompute;
    r.stagingBytes = o.stagingBytes;
    r.lossChunkRows = o.lossChunkRows;
  }
  // Each run once per value of a repeatable option (none given: as it is), labelled with it.
  auto forEach = [&runs](const std::vector<std::string>& values, std::string RunOptions::*field, bool RunOptions::*label) {
    if (values.empty()) return;
    std::vector<RunOptions> each;
    for (const RunOptions& r : runs)
      for (const std::string& v : values) {
        each.push_back(r);
        each.back().*field = v;
        each.back().*label = true;
      }
    runs = std::move(each);
  };
  forEach(o.baseWeights, &RunOptions::baseWeights, &RunOptions::labelBaseWeights);
  forEach(o.precisions, &RunOptions::precision, &RunOptions::labelPrecision);
  auto g = passes::loadModel(o.model);
  if (!g.ok()) return fmt::print(stderr, "error: {}\n", g.error().message), 1;

  std::vector<StrategyRun> results(runs.size());
  std::vector<std::string> requested;
  for (size_t i = 0; i < runs.size(); ++i) {
    requested.push_back(runs[i].variant.empty() ? runs[i].strategy : runs[i].variant);
    // Progress on stderr: a run compiles, builds its kernels (the first time, minutes on a large
    // model) and steps before the table can be printed.
    const auto started = std::chrono::steady_clock::now();
    fmt::print(stderr, "[{}/{}] {} {}: compiling, building kernels, {} steps...\n", i + 1, runs.size(),
               o.ablation ? "variant" : "strategy", requested[i], o.steps);
    if (Status e = runStrategy(runs[i], g.value(), &results[i]); !e.ok())
      return fmt::print(stderr, "error: {} {}: {}\n", o.ablation ? "variant" : "strategy", requested[i], e.error().message), 1;
    fmt::print(stderr, "[{}/{}] {}: done in {:.1f} s\n", i + 1, runs.size(), requested[i],
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  bool identical = false;
  const std::string note = planComparison(results, &identical);
  const std::string& device = results[0].device;
  nlohmann::json j{{"model", o.model}, {"profile", o.profile}, {"device", device},         {"steps", o.steps},
                   {"seed", o.seed},   {o.ablation ? "variants" : "strategies", requested},
                   {"ablation", o.ablation}, {"plans_identical", identical}, {"note", note},
                   {"timing", "step_s: wall clock of trainStep with launch profiling on; unprofiled_step_s "
                              "(the table's app ms): the same steps in a session without it; device_s and "
                              "layout_time_s: sums of OpenCL launch device times per step"}};
  j["results"] = nlohmann::json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    nlohmann::json r = toJson(results[i]);
    if (o.ablation) {
      r["speedup_over_reuse"] = {{"step", ratio(results[0].stepS, results[i].stepS)},
                                 {"device", ratio(results[0].deviceS, results[i].deviceS)}};
      r["same_plan_as"] = samePlanAs(results, i);
    }
    j["results"].push_back(std::move(r));
  }

  fmt::print("{} on {} ({} steps; device times from OpenCL launch profiling, per step)\n", o.model, device, o.steps);
  if (!note.empty()) fmt::print("note: {}\n", note);
  const int w = o.ablation ? 19 : 9;
  fmt::print("  {:<{}} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>7} {:>12} {:>11}",
             o.ablation ? "variant" : "strategy", w, "samples/s", "step ms", "app ms", "fwd ms", "bwd ms", "opt ms", "device ms", "layout ms", "launches", "layout",
             "bytes moved", "peak bytes");
  fmt::print("{}\n", o.ablation ? fmt::format(" {:>9} {:>9}  {}", "step x", "device x", "same plan as") : "");
  for (size_t i = 0; i < results.size(); ++i) {
    const StrategyRun& m = results[i];
    auto ph = [&](const char* k) { return m.phaseS.count(k) ? m.phaseS.at(k) * 1e3 : 0.0; };
    fmt::print("  {:<{}} {:>9.1f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>9.2f} {:>9.3f} {:>8} {:>7} {:>12} {:>11}",
               label(m), w, m.samplesPerS, m.stepS * 1e3, m.unprofiledStepS * 1e3, ph("forward"), ph("backward"), ph("optimizer"),
               m.deviceS * 1e3, m.layoutS * 1e3, m.launchesPerStep, m.layoutLaunches, m.bytesMoved, m.peakBytes);
    if (o.ablation)
      fmt::print(" {:>9.2f} {:>9.2f}  {}", ratio(results[0].stepS, m.stepS), ratio(results[0].deviceS, m.deviceS),
                 samePlanAs(results, i));
    fmt::print("\n");
    if (m.randomWeights) fmt::print("  (random weights: {})\n", m.weightsNote);
    fmt::print("  weights loaded in {:.1f} ms through a staging tensor of {} bytes\n", m.loadWeightsS * 1e3, m.stagingBytes);
  }
  if (o.ablation)
    fmt::print("step x, device x: speed-up over reuse (its step wall time, its summed launch device time, over "
               "the variant's)\n");
  if (!o.json.empty()) {
    if (o.json == "-") fmt::print("{}\n", j.dump(1));
    else if (Status e = writeTextFile(o.json, j.dump(1) + "\n"); !e.ok()) return fmt::print(stderr, "error: {}\n", e.error().message), 1;
  }
  if (!o.svg.empty()) {
    const std::string title = fmt::format("fbl-bench step: {} on {}", fs::path(o.model).filename().string(), device);
    if (Status e = writeTextFile(o.svg, svgChart(results, title, note)); !e.ok())
      return fmt::print(stderr, "error: {}\n", e.error().message), 1;
  }
  return 0;
}

}  // namespace fbl::bench
