// `fbl-bench estimate`; the model is in estimate_bench.h.
#include "bench/estimate_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "bench/strategy_run.h"
#include "compiler/analysis/explain.h"
#include "compiler/driver/compile_command.h"
#include "compiler/profile/profile.h"
#include "compiler/support/int_math.h"
#include "runtime/plan_file.h"
#include "sim/memory_model.h"

namespace fbl::bench {

namespace {

using nlohmann::json;

// Each kernel's #defines, from the plan's program: the lines between the previous kernel's
// header and its own.
std::map<std::string, std::map<std::string, int64_t>> kernelDefines(const std::string& program) {
  std::map<std::string, std::map<std::string, int64_t>> out;
  std::map<std::string, int64_t> pending;
  size_t at = 0;
  while (at < program.size()) {
    size_t end = program.find('\n', at);
    if (end == std::string::npos) end = program.size();
    const std::string line = program.substr(at, end - at);
    at = end + 1;
    if (line.rfind("#define ", 0) == 0) {
      const size_t sp = line.find(' ', 8);
      if (sp == std::string::npos) continue;
      std::string value = line.substr(sp + 1);
      while (!value.empty() && (value.back() == 'u' || value.back() == ' ')) value.pop_back();
      if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos && value.size() < 18)
        pending[line.substr(8, sp - 8)] = std::stoll(value);
    } else if (const size_t k = line.find("kernel void "); k != std::string::npos && line.find('(') != std::string::npos) {
      std::string head = line.substr(k + 12);
      if (head.rfind("WG_SIZE ", 0) == 0) head = head.substr(8);
      out[head.substr(0, head.find('('))] = pending;
      pending.clear();
    }
  }
  return out;
}

struct Rates {
  double peakGflops = 0, dramGBs = 0, l2GBs = 0;  // l2GBs 0: no L2 term
  int64_t l2Bytes = 0, computeUnits = 1;
};

struct LaunchWork {
  std::string phase, node, kernel;
  bool product = false;  // MatMul or attention: the ALU efficiency applies
  double flops = 0, dram = 0, l2 = 0;
};

struct Terms {
  double compute = 0, dram = 0, l2 = 0;
  double seconds() const { return std::max({compute, dram, l2}); }
  const char* binds() const {
    if (compute >= dram && compute >= l2) return "compute";
    return dram >= l2 ? "DRAM" : "L2";
  }
};

Terms terms(const LaunchWork& w, const Rates& r, double alu) {
  Terms t;
  t.compute = w.flops / (r.peakGflops * 1e9 * (w.product ? alu : 1.0));
  t.dram = w.dram / (r.dramGBs * 1e9);
  t.l2 = r.l2GBs > 0 ? w.l2 / (r.l2GBs * 1e9) : 0;
  return t;
}

// The work of every launch of `plan`.
Result<std::vector<LaunchWork>> planWork(const planfile::Plan& plan, const Rates& r) {
  FBL_ASSIGN(analysis::ExplainReport ex, analysis::buildExplainReport(plan));
  if (ex.launches.size() != plan.launches.size())
    return makeError("the explain section lists {} launches, the plan {}", ex.launches.size(), plan.launches.size());
  const auto defines = kernelDefines(plan.program);
  std::vector<LaunchWork> out;
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const planfile::Launch& l = plan.launches[i];
    LaunchWork w;
    w.phase = l.phase, w.node = l.node, w.kernel = plan.kernelNames[l.kernel];
    w.flops = static_cast<double>(ex.launches[i].flops);
    w.dram = static_cast<double>(ex.launches[i].bytes);
    w.l2 = w.dram;
    w.product = w.kernel.find("matmul") != std::string::npos || w.kernel.find("attention") != std::string::npos;
    auto d = defines.find(w.kernel);
    const bool tiled = d != defines.end() && d->second.count("TM") && d->second.count("TK") && !d->second.count("BM");
    if (tiled && l.args.size() >= 3) {
      const auto& v = d->second;
      const int64_t m = v.at("M"), k = v.at("K"), tm = v.at("TM"), tn = v.at("TN"), tk = v.at("TK");
      const int64_t cols = v.at("N1") - v.at("N0"), split = std::max<int64_t>(1, v.at("SPLIT")), ks = v.at("KS");
      const int64_t batch = l.global.size() > 2 ? std::max<int64_t>(1, l.global[2] / split) : 1;
      int64_t kp = 0;  // K steps the slices run, whole TK steps each
      for (int64_t z = 0; z < split; ++z) kp += ceilDiv(std::max<int64_t>(0, std::min(k, (z + 1) * ks) - z * ks), tk) * tk;
      // A low-rank term (LoRA's t B) joins as K2 more K, in whole TK steps too.
      const int64_t k2 = v.count("LOW_RANK") && v.at("LOW_RANK") && v.count("K2") ? v.at("K2") : 0;
      kp += ceilDiv(k2, tk) * tk;
      const double mp = static_cast<double>(ceilDiv(m, tm) * tm), np = static_cast<double>(ceilDiv(cols, tn) * tn);
      // Fused elementwise work: the node's modelled FLOPs beyond the product's useful ones.
      const double useful = 2.0 * static_cast<double>(m) * static_cast<double>(cols) * static_cast<double>(k + k2) * batch;
      w.flops = 2.0 * mp * np * static_cast<double>(kp) * batch + std::max(0.0, w.flops - useful);
      auto bytes = [&](int32_t t) { return static_cast<double>(planfile::argumentBytes(plan.tensors[t])); };
      const double lb = bytes(l.args[0]), rb = bytes(l.args[1]), ob = bytes(l.args[2]);
      double rest = 0;
      for (size_t a = 3; a < l.args.size(); ++a) rest += bytes(l.args[a]);
      const double rReads = rb > static_cast<double>(r.l2Bytes) ? static_cast<double>(ceilDiv(m, tm)) : 1.0;
      const double lReads = 4.0 * tm * k > r.l2Bytes / 2.0
                                ? std::ceil(static_cast<double>(ceilDiv(cols, tn)) / static_cast<double>(r.computeUnits))
                                : 1.0;
      w.dram = lb * lReads + rb * rReads + ob + rest;
      const double groups = static_cast<double>(ceilDiv(m, tm) * ceilDiv(cols, tn) * batch);
      w.l2 = groups * (tm + tn) * static_cast<double>(kp) * 4.0 + ob + rest;
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

int runEstimateBench(const EstimateBenchOptions& o) {
  auto fail = [](const std::string& e) {
    fmt::print(stderr, "fbl-bench estimate: {}\n", e);
    return 1;
  };
  const auto start = std::chrono::steady_clock::now();
  auto hw = profile::loadProfile(o.profile);
  if (!hw.ok()) return fail(hw.error().message);
  if (!hw->peakGflops || !hw->bandwidthGBs) return fail(o.profile + ": the estimate needs peak_gflops and bandwidth_gbps");
  Rates base{*hw->peakGflops, *hw->bandwidthGBs, 0, hw->l2CacheBytes, hw->computeUnits};
  std::vector<double> l2s;
  if (auto mm = sim::loadMemoryModel(o.profile); mm.ok()) {
    l2s = hw->bracket.l2GBs.empty() ? std::vector<double>{mm->l2GBs} : hw->bracket.l2GBs;
  } else {
    l2s = {0};  // no memory model: no L2 term
  }
  std::vector<double> alus = o.aluEfficiency.empty() ? std::vector<double>{1.0} : o.aluEfficiency;
  for (double e : alus)
    if (!(e > 0 && e <= 1)) return fail(fmt::format("--alu-efficiency {} must be in (0, 1]", e));

  std::vector<std::pair<std::string, planfile::Plan>> plans;
  const bool isPlan = o.input.size() > 4 && o.input.substr(o.input.size() - 4) == ".fbp";
  if (isPlan) {
    std::ifstream in(o.input, std::ios::binary);
    if (!in) return fail(o.input + ": cannot read the file");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    planfile::Plan p;
    if (std::string e = planfile::parse(bytes, &p); !e.empty()) return fail(o.input + ": " + e);
    plans.emplace_back("plan", std::move(p));
  } else {
    std::vector<std::string> names;
    if (auto e = expandStrategies(o.strategies, &names); !e.empty()) return fail(e);
    // Each strategy as it is, then without each pass of --without, then without all of them.
    std::vector<std::vector<std::string>> variants = {{}};
    for (const std::string& p : o.without) variants.push_back({p});
    if (o.without.size() > 1) variants.push_back(o.without);
    for (const std::string& st : names)
      for (const std::vector<std::string>& off : variants) {
        driver::CompileArgs ca;
        ca.model = o.input, ca.profile = o.profile, ca.strategy = st, ca.disabledPasses = off;
        ca.noWeights = true, ca.allowOverLimit = true;  // an estimate, not a plan for a device
        auto c = driver::compileModel(ca);
        if (!c.ok()) return fail(fmt::format("strategy {}: {}", st, c.error().message));
        plans.emplace_back(off.empty() ? st : fmt::format("{} without {}", st, fmt::join(off, ", ")), std::move(c->plan));
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
    auto work = planWork(plan, base);
    if (!work.ok()) return fail(fmt::format("{}: {}", name, work.error().message));
    json sj = {{"strategy", name}, {"launches", work->size()}, {"points", json::array()}};
    double flops = 0, dram = 0;
    for (const LaunchWork& w : *work) flops += w.flops, dram += w.dram;
    sj["executed_flops"] = flops, sj["dram_bytes"] = dram;
    fmt::print("\n{}: {} launches, {:.3f} TFLOP executed, {:.2f} GB from DRAM\n", name, work->size(), flops / 1e12,
               dram / 1e9);
    fmt::print("  {:>8} {:>8} {:>10}  {}\n", "ALU eff", "L2 GB/s", "step s", "per phase: seconds (bound by compute / DRAM / L2)");
    for (double alu : alus)
      for (double l2 : l2s) {
        Rates r = base;
        r.l2GBs = l2;
        std::map<std::string, std::map<std::string, double>> byPhase;
        double total = 0;
        for (const LaunchWork& w : *work) {
          const Terms t = terms(w, r, alu);
          byPhase[w.phase][t.binds()] += t.seconds();
          total += t.seconds();
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
        fmt::print("  {:>8.2f} {:>8.0f} {:>10.3f}{}\n", alu, l2, total, phases);
        sj["points"].push_back({{"alu_efficiency", alu}, {"l2_gbps", l2}, {"seconds", total}, {"phases", pj}});
      }
    // The costliest launches at the first point.
    Rates r = base;
    r.l2GBs = l2s[0];
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < work->size(); ++i) order.push_back({terms((*work)[i], r, alus[0]).seconds(), i});
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    fmt::print("  costliest launches (ALU efficiency {:.2f}, L2 {:.0f} GB/s):\n", alus[0], l2s[0]);
    json top = json::array();
    for (size_t i = 0; i < order.size() && static_cast<int>(i) < o.top; ++i) {
      const LaunchWork& w = (*work)[order[i].second];
      const Terms t = terms(w, r, alus[0]);
      fmt::print("    {:>9.3f} ms  {:<7}  {:<9} {}  ({})\n", t.seconds() * 1e3, t.binds(), w.phase, w.node, w.kernel);
      top.push_back({{"ms", t.seconds() * 1e3}, {"binds", t.binds()}, {"phase", w.phase}, {"node", w.node},
                     {"kernel", w.kernel}, {"flops", w.flops}, {"dram_bytes", w.dram}, {"l2_bytes", w.l2}});
    }
    sj["costliest"] = top;
    if (o.launches) {
      sj["launch_work"] = json::array();
      for (const LaunchWork& w : *work)
        sj["launch_work"].push_back({{"phase", w.phase}, {"node", w.node}, {"kernel", w.kernel}, {"flops", w.flops},
                                     {"dram_bytes", w.dram}, {"l2_bytes", w.l2}});
    }
    report["strategies"].push_back(sj);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report["wall_s"] = wall;
  fmt::print("({:.1f} s)\n", wall);
  if (!o.json.empty())
    if (auto e = writeTextFile(o.json, report.dump(1) + "\n"); !e.empty()) return fail(e);
  return 0;
}

}  // namespace fbl::bench
