// The per-launch step estimate; the model is in step_estimate.h.
#include "compiler/report/step_estimate.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "compiler/support/int_math.h"

namespace fbl::report {

namespace {

// Each kernel's integer #defines, from the plan's program: the lines between the previous
// kernel's header and its own.
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
      if (!value.empty() && value.size() < 18 && value.find_first_not_of("0123456789") == std::string::npos)
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

}  // namespace

Result<EstimateRates> estimateRates(const profile::HardwareProfile& p, double l2GBs) {
  if (!p.peakGflops || !p.bandwidthGBs)
    return makeError("profile '{}': the estimate needs peak_gflops and bandwidth_gbps, which are pending", p.name);
  return EstimateRates{*p.peakGflops, *p.bandwidthGBs, l2GBs, p.l2CacheBytes, std::max(1, p.computeUnits)};
}

double LaunchTime::seconds() const { return std::max({compute, dram, l2}); }

const char* LaunchTime::binds() const {
  if (compute >= dram && compute >= l2) return "compute";
  return dram >= l2 ? "DRAM" : "L2";
}

LaunchTime launchTime(const LaunchWork& w, const EstimateRates& r, double alu) {
  LaunchTime t;
  t.compute = w.flops / (r.peakGflops * 1e9 * (w.product ? alu : 1.0));
  t.dram = w.dramBytes / (r.dramGBs * 1e9);
  t.l2 = r.l2GBs > 0 ? w.l2Bytes / (r.l2GBs * 1e9) : 0;
  return t;
}

Result<std::vector<LaunchWork>> launchWork(const planfile::Plan& plan, const ExplainReport& ex, const EstimateRates& r) {
  if (ex.launches.size() != plan.launches.size())
    return makeError("the explain section lists {} launches, the plan {}", ex.launches.size(), plan.launches.size());
  const auto defines = kernelDefines(plan.program);
  std::vector<LaunchWork> out;
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const planfile::Launch& l = plan.launches[i];
    LaunchWork w;
    w.phase = l.phase, w.node = l.node, w.kernel = plan.kernelNames[l.kernel];
    w.flops = static_cast<double>(ex.launches[i].flops);
    w.dramBytes = static_cast<double>(ex.launches[i].bytes);
    w.l2Bytes = w.dramBytes;
    w.product = w.kernel.find("matmul") != std::string::npos || w.kernel.find("attention") != std::string::npos;
    auto d = defines.find(w.kernel);
    const bool tiled = d != defines.end() && d->second.count("TM") && d->second.count("TK") && d->second.count("N1") &&
                       d->second.count("KS") && !d->second.count("BM");
    if (tiled && l.args.size() >= 3) {
      const auto& v = d->second;
      const int64_t m = v.at("M"), k = v.at("K"), tm = v.at("TM"), tn = v.at("TN"), tk = v.at("TK");
      const int64_t cols = v.at("N1") - v.at("N0"), split = std::max<int64_t>(1, v.count("SPLIT") ? v.at("SPLIT") : 1);
      const int64_t ks = v.at("KS");
      const int64_t batch = l.global.size() > 2 ? std::max<int64_t>(1, l.global[2] / split) : 1;
      int64_t kp = 0;  // K the slices run, whole TK steps each
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
      const double cached = static_cast<double>(r.l2Bytes + r.slcBytes);
      const double rReads = rb > cached ? static_cast<double>(ceilDiv(m, tm)) : 1.0;
      const double lReads = 4.0 * static_cast<double>(tm * k) > cached / 2.0
                                ? std::ceil(static_cast<double>(ceilDiv(cols, tn)) / static_cast<double>(r.computeUnits))
                                : 1.0;
      w.dramBytes = lb * lReads + rb * rReads + ob + rest;
      const double groups = static_cast<double>(ceilDiv(m, tm) * ceilDiv(cols, tn) * batch);
      w.l2Bytes = groups * static_cast<double>(tm + tn) * static_cast<double>(kp) * 4.0 + ob + rest;
    }
    out.push_back(std::move(w));
  }
  return out;
}

std::string estimateLine(const std::vector<LaunchWork>& work, const EstimateRates& r, double alu,
                         const std::string& profile) {
  std::map<std::string, std::pair<double, double>> byPhase;  // seconds, compute-bound seconds
  double total = 0;
  for (const LaunchWork& w : work) {
    const LaunchTime t = launchTime(w, r, alu);
    auto& [s, c] = byPhase[w.phase];
    s += t.seconds();
    if (std::string(t.binds()) == "compute") c += t.seconds();
    total += t.seconds();
  }
  std::string phases;
  for (const auto& [ph, sc] : byPhase)
    phases += fmt::format("{}{} {:.3f} s, {:.0f}% compute-bound", phases.empty() ? "" : "; ", ph, sc.first,
                          sc.first > 0 ? sc.second / sc.first * 100 : 0.0);
  return fmt::format("{:.3f} s a step on {} at {} ({})", total, profile,
                     alu == 1.0 ? std::string("the FP32 peak") : fmt::format("{:.0f}% of the FP32 peak", alu * 100),
                     phases);
}

}  // namespace fbl::report
