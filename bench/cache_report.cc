#include "bench/cache_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "bench/strategy_run.h"

namespace fbl::bench {

void SimulatedRun::add(SimulatedLaunch l) {
  total += l.counters;
  estimatedMs += l.estimatedMs;
  byPhase[l.phase] += l.counters;
  estimatedMsByPhase[l.phase] += l.estimatedMs;
  boundMsByPhase[l.phase][l.binds] += l.estimatedMs;
  if (isLayoutKind(l.kind)) {
    layout += l.counters;
    layoutEstimatedMs += l.estimatedMs;
  }
  launches.push_back(std::move(l));
}

std::vector<sim::MemoryModel> ProfileRuns::begin(const std::vector<size_t>& group, const std::string& name, int threads) {
  std::vector<sim::MemoryModel> ms;
  for (size_t p : group) {
    runs[p].push_back({});
    runs[p].back().strategy = name;
    runs[p].back().threads = threads;
    ms.push_back(models[p]);
  }
  return ms;
}

void ProfileRuns::add(const std::vector<size_t>& group, SimulatedLaunch l, const std::vector<sim::AccessCounters>& counters) {
  workItems += counters.front().workItems;
  instructions += counters.front().instructions;
  for (size_t i = 0; i < group.size(); ++i) {
    l.counters = counters[i];
    l.estimatedMs = sim::estimatedMs(counters[i], models[group[i]]);
    l.binds = sim::bindingTerm(counters[i], models[group[i]]);
    runs[group[i]].back().add(l);
  }
}

namespace {

nlohmann::json summary(const sim::AccessCounters& c, double ms) {
  nlohmann::json j{{"loads", c.loads},         {"stores", c.stores},       {"l1_misses", c.l1Misses()},
                   {"l2_misses", c.l2Misses},   {"dram_bytes", c.dramBytes()}, {"estimated_ms", ms}};
  j["counters"] = sim::countersToJson(c);
  return j;
}

}  // namespace

nlohmann::json resultJson(const SimulatedRun& r, bool withLaunches) {
  nlohmann::json j = summary(r.total, r.estimatedMs);
  if (r.threads > 0) {
    j["pattern"] = r.strategy;
    j["threads"] = r.threads;
  } else {
    j["strategy"] = r.strategy;
    j["phases"] = nlohmann::json::object();
    for (const auto& [ph, c] : r.byPhase) {
      j["phases"][ph] = summary(c, r.estimatedMsByPhase.at(ph));
      j["phases"][ph]["bound_ms"] = r.boundMsByPhase.at(ph);  // estimated ms by the term that binds each launch
    }
    j["layout_launches"] = summary(r.layout, r.layoutEstimatedMs);
  }
  if (withLaunches) {
    j["launches"] = nlohmann::json::array();
    for (const SimulatedLaunch& l : r.launches) {
      nlohmann::json e = summary(l.counters, l.estimatedMs);
      e["phase"] = l.phase, e["kind"] = l.kind, e["node"] = l.node, e["kernel"] = l.kernel, e["binds"] = l.binds;
      j["launches"].push_back(e);
    }
  }
  return j;
}

void printRuns(const std::string& title, const std::vector<SimulatedRun>& runs) {
  fmt::print("{}\n", title);
  fmt::print("  {:<18} {:<10} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>11}\n", "run", "phase",
             "launches", "loads", "stores", "L1 hits", "L1 misses", "L2 hits", "L2 misses", "DRAM MB", "est. ms");
  auto row = [](const std::string& name, const std::string& phase, const sim::AccessCounters& c, double ms) {
    fmt::print("  {:<18} {:<10} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12.3f} {:>11.4f}\n", name, phase,
               c.launches, c.loads, c.stores, c.l1Hits(), c.l1Misses(), c.l2Hits, c.l2Misses, c.dramBytes() * 1e-6, ms);
  };
  for (const SimulatedRun& r : runs) {
    const std::string name = r.threads > 0 ? fmt::format("{} x{}", r.strategy, r.threads) : r.strategy;
    if (r.byPhase.size() > 1)
      for (const auto& [ph, c] : r.byPhase) row(name, ph, c, r.estimatedMsByPhase.at(ph));
    row(name, r.byPhase.size() > 1 ? "all" : (r.byPhase.empty() ? "" : r.byPhase.begin()->first), r.total, r.estimatedMs);
    if (r.layout.launches > 0) row(name, "layout", r.layout, r.layoutEstimatedMs);
  }
}

std::string figure15Svg(const std::string& title, const std::vector<SimulatedRun>& runs, const std::string& base) {
  const SimulatedRun* ref = nullptr;
  for (const SimulatedRun& r : runs)
    if (r.strategy == base) ref = &r;
  if (!ref && !runs.empty()) ref = &runs.front();
  struct Metric {
    const char* name;
    double (*of)(const SimulatedRun&);
  };
  const std::vector<Metric> metrics = {
      {"accesses", [](const SimulatedRun& r) { return static_cast<double>(r.total.loads + r.total.stores); }},
      {"L1 misses", [](const SimulatedRun& r) { return static_cast<double>(r.total.l1Misses()); }},
      {"L2 misses", [](const SimulatedRun& r) { return static_cast<double>(r.total.l2Misses); }},
      {"DRAM bytes", [](const SimulatedRun& r) { return static_cast<double>(r.total.dramBytes()); }},
      {"est. time", [](const SimulatedRun& r) { return r.estimatedMs; }}};
  const char* colours[] = {"#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"};
  double top = 1.0;
  std::vector<std::vector<double>> v(metrics.size());
  for (size_t m = 0; m < metrics.size(); ++m)
    for (const SimulatedRun& r : runs) {
      const double b = ref ? metrics[m].of(*ref) : 0;
      v[m].push_back(b > 0 ? metrics[m].of(r) / b : 0.0);
      top = std::max(top, v[m].back());
    }
  const int w = 120 + static_cast<int>(metrics.size()) * (static_cast<int>(runs.size()) * 28 + 30), h = 320;
  const double plotH = 220, y0 = 260;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"10\" y=\"18\" font-size=\"13\">{}</text>\n",
      w, h, xmlEscape(title));
  for (double t : {0.0, 1.0, top}) {
    const double y = y0 - plotH * t / top;
    s += fmt::format("<line x1=\"60\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ccc\"/><text x=\"8\" y=\"{:.1f}\">{:.2f}x</text>\n",
                     w - 10, y, y, y + 4, t);
  }
  double x = 70;
  for (size_t m = 0; m < metrics.size(); ++m) {
    for (size_t r = 0; r < runs.size(); ++r) {
      const double bh = plotH * v[m][r] / top;
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"24\" height=\"{:.1f}\" fill=\"{}\"><title>{} {}: {:.3f}x</title></rect>\n",
                       x, y0 - bh, bh, colours[r % 5], xmlEscape(runs[r].strategy), metrics[m].name, v[m][r]);
      x += 28;
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x - runs.size() * 14.0, y0 + 16, metrics[m].name);
    // A metric the base run has none of (buffers only on a GPU whose buffers skip L1) has no ratio.
    if (ref && metrics[m].of(*ref) == 0)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">none in {}</text>\n",
                       x - runs.size() * 14.0, y0 - 10, xmlEscape(ref->strategy));
    x += 30;
  }
  for (size_t r = 0; r < runs.size(); ++r)
    s += fmt::format("<rect x=\"{}\" y=\"290\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"300\">{}</text>\n",
                     70 + r * 110, colours[r % 5], 86 + r * 110, xmlEscape(runs[r].strategy));
  s += "</svg>\n";
  return s;
}

}  // namespace fbl::bench
