// `fbl-bench step` (see step_bench.h). For each strategy that the plan builder implements:
//
//   1. Compile the model in-process and write the plan to a temporary file (the runtime opens
//      plans by path).
//   2. Open it on the device; load the model's weights, or, when the model ships without them
//      (llama-full's external data), small uniform random values from the fixed seed, drawn in
//      plan-tensor order so that every strategy trains the same numbers.
//   3. Train N steps on synthetic inputs (batch k of the seed for step k). Step 1 is timed apart:
//      drivers compile lazily at first launch (PoCL builds each work-group function then).
//   4. Time the phases apart: N more rounds of forward, backward and optimizer launches through
//      Session::runPhases, each ending in clFinish, so each phase is a wall-clock interval with
//      an idle queue at both ends. (The extra optimizer rounds update the trainables again;
//      the numbers are timings, not a training run.)
//   5. Static figures from the plan: launches per step, modelled bytes moved (every distinct
//      tensor argument of a launch read or written once, at its planned size), launches whose
//      kernel moves data without arithmetic (transpose, concat, slice, ...) and their bytes, and
//      the planned peak (the arena).
//
// Time spent in the layout-movement launches is not measured: the runtime times no single
// launch, and a number derived from bytes would be a model dressed as a measurement. The JSON
// says so (layout_time_s: null) and gives their modelled bytes instead.
#include "bench/step_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/onnx/load_model.h"
#include "compiler/plan/compile_command.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "runtime/plan_file.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"

namespace fbl::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kStrategies{"fblayout", "reuse", "explicit"};
const char* kNotIntegrated =
    "fblayout/reuse/explicit whole-model plans not yet integrated; measured: baseline buffer plan";

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Kernels are named k<i>_<template>; these templates only move or re-arrange bytes.
bool isLayoutKernel(const std::string& kernelName) {
  static const std::vector<std::string> kMovers{"transpose", "concat", "slice", "split", "expand", "pad",
                                                "tile", "copy", "reshape", "convert", "pack", "unpack", "relayout"};
  const size_t us = kernelName.find('_');
  const std::string op = us == std::string::npos ? kernelName : kernelName.substr(us + 1);
  for (const std::string& m : kMovers)
    if (op.rfind(m, 0) == 0) return true;
  return false;
}

struct Measured {
  std::string strategy;
  double firstStepS = 0, stepS = 0, samplesPerS = 0;
  std::map<std::string, double> phaseS;     // forward, backward, optimizer: median seconds
  std::map<std::string, int64_t> launches;  // per phase
  int64_t launchesPerStep = 0, commits = 0, kernels = 0;
  int64_t bytesMoved = 0, layoutLaunches = 0, layoutBytes = 0;
  int64_t peakBytes = 0;
  double compileS = 0;
  float firstLoss = 0, lastLoss = 0;
  bool randomWeights = false;
  std::string weightsNote;
  std::string device;
};

void staticFigures(const planfile::Plan& p, Measured* m) {
  m->launchesPerStep = static_cast<int64_t>(p.launches.size());
  m->commits = static_cast<int64_t>(p.commits.size());
  m->kernels = static_cast<int64_t>(p.kernelNames.size());
  m->peakBytes = p.arenaBytes;
  for (const planfile::Launch& l : p.launches) {
    ++m->launches[l.phase];
    int64_t bytes = 0;
    for (int32_t a : std::set<int32_t>(l.args.begin(), l.args.end())) bytes += p.tensors[a].bytes;
    m->bytesMoved += bytes;
    if (isLayoutKernel(p.kernelNames[l.kernel])) {
      ++m->layoutLaunches;
      m->layoutBytes += bytes;
    }
  }
  for (const auto& c : p.commits) m->bytesMoved += 2 * p.tensors[c[1]].bytes;
}

// Small uniform values for every weight and trainable the plan names (floats; other dtypes 0).
std::string randomWeights(const planfile::Plan& p, uint64_t seed, const std::string& path) {
  std::mt19937_64 rng(seed ^ 0x5eedf00dull);
  std::uniform_real_distribution<float> u(-0.02f, 0.02f);
  safetensors::File f;
  for (const planfile::Tensor& t : p.tensors) {
    if (t.source.empty() || f.tensors.count(t.source)) continue;
    safetensors::Entry e;
    e.dtype = safetensors::fromFblDType(t.dtype);
    e.shape = t.shape;
    e.data.assign(static_cast<size_t>(t.bytes), 0);
    if (t.dtype == "f32") {
      auto* x = reinterpret_cast<float*>(e.data.data());
      for (size_t i = 0; i < e.data.size() / sizeof(float); ++i) x[i] = u(rng);
    }
    f.tensors[t.source] = std::move(e);
  }
  f.metadata["format"] = "pt";
  return safetensors::write(path, f);
}

// Batch `step` of the seed for every plan input; the plan's inputs are the graph's, in order.
std::string feed(rt::Session& s, const ir::Graph& g, uint64_t seed, int64_t step) {
  const planfile::Plan& p = s.plan();
  if (g.inputs.size() != p.inputs.size())
    return fmt::format("the graph has {} inputs but the plan {}", g.inputs.size(), p.inputs.size());
  auto batch = zoo::syntheticInputs(g, seed, step);
  if (!batch.ok()) return batch.error().message;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const planfile::Tensor& t = p.tensors[p.inputs[i]];
    const ir::Tensor& x = batch.value().at(g.inputs[i]);
    if (x.nbytes() != static_cast<size_t>(t.bytes) || std::string(ir::dtypeName(x.dtype())) != t.dtype)
      return fmt::format("synthetic input {} does not match the plan's input '{}'", i, t.name);
    if (auto e = s.writeTensor(t.name, x.raw(), x.nbytes()); !e.empty()) return e;
  }
  return "";
}

struct TempFiles {
  std::vector<std::string> paths;
  std::string make(const std::string& what) {
    paths.push_back((fs::temp_directory_path() / fmt::format("fbl-bench-step-{}-{}", ::getpid(), what)).string());
    return paths.back();
  }
  ~TempFiles() {
    std::error_code ec;
    for (const auto& p : paths) fs::remove(p, ec);
  }
};

std::string measure(const StepBenchOptions& o, const ir::Graph& g, const std::string& strategy, Measured* m) {
  TempFiles tmp;
  m->strategy = strategy;
  plan::CompileArgs ca;
  ca.model = o.model;
  ca.profile = o.profile;
  auto c = plan::compileModel(ca);
  if (!c.ok()) return c.error().message;
  m->compileS = c->seconds;
  staticFigures(c->plan, m);
  const std::string planPath = tmp.make("plan.fbp");
  if (auto e = safetensors::writeFileAtomic(planPath, planfile::serialize(c->plan)); !e.empty()) return e;
  rt::OpenOptions oo;
  oo.device = o.device;
  std::string err;
  auto s = rt::Session::open(planPath, oo, &err);
  if (!s) return err;
  m->device = s->device().name + " (" + s->device().platform + ")";
  ca.weights = tmp.make("weights.safetensors");
  if (Status st = plan::writeWeights(ca, s->plan()); !st.ok()) {
    m->randomWeights = true;
    m->weightsNote = st.error().message;
    if (auto e = randomWeights(s->plan(), o.seed, ca.weights); !e.empty()) return e;
  }
  if (auto e = s->loadWeights(ca.weights); !e.empty()) return e;

  const planfile::Plan& p = s->plan();
  const int64_t batch = p.inputs.empty() || p.tensors[p.inputs[0]].shape.empty() ? 1 : p.tensors[p.inputs[0]].shape[0];
  std::vector<double> stepTimes;
  for (int k = 0; k < o.steps; ++k) {
    if (auto e = feed(*s, g, o.seed, k); !e.empty()) return e;
    const auto t0 = Clock::now();
    float loss = 0;
    if (auto e = s->trainStep(&loss); !e.empty()) return e;
    const double t = secondsSince(t0);
    if (k == 0) m->firstStepS = t, m->firstLoss = loss;
    else stepTimes.push_back(t);
    m->lastLoss = loss;
  }
  m->stepS = stepTimes.empty() ? m->firstStepS : median(stepTimes);
  m->samplesPerS = m->stepS > 0 ? static_cast<double>(std::max<int64_t>(1, batch)) / m->stepS : 0.0;

  std::map<std::string, std::vector<double>> phases;
  for (int k = 0; k < std::max(1, o.steps - 1); ++k) {
    if (auto e = feed(*s, g, o.seed, k); !e.empty()) return e;
    for (const char* ph : {"forward", "backward", "optimizer"}) {
      const auto t0 = Clock::now();
      if (auto e = s->runPhases({ph}); !e.empty()) return e;
      phases[ph].push_back(secondsSince(t0));
    }
  }
  for (const auto& [ph, v] : phases) m->phaseS[ph] = median(v);
  return "";
}

nlohmann::json toJson(const Measured& m) {
  nlohmann::json j{{"strategy", m.strategy},
                   {"compile_s", m.compileS},
                   {"first_step_s", m.firstStepS},
                   {"step_s", m.stepS},
                   {"samples_per_s", m.samplesPerS},
                   {"phase_s", m.phaseS},
                   {"launches_per_step", m.launchesPerStep},
                   {"launches_by_phase", m.launches},
                   {"commit_copies_per_step", m.commits},
                   {"kernels", m.kernels},
                   {"bytes_moved_modelled", m.bytesMoved},
                   {"layout_launches", m.layoutLaunches},
                   {"layout_bytes_modelled", m.layoutBytes},
                   {"layout_time_s", nullptr},
                   {"peak_device_bytes", m.peakBytes},
                   {"first_loss", m.firstLoss},
                   {"last_loss", m.lastLoss},
                   {"random_weights", m.randomWeights}};
  if (m.randomWeights) j["weights_note"] = m.weightsNote;
  return j;
}

std::string xmlEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '&') out += "&amp;";
    else if (ch == '"') out += "&quot;";
    else out += ch;
  }
  return out;
}

// One horizontal stacked bar per measured strategy: forward, backward, optimizer milliseconds.
std::string svgChart(const std::vector<Measured>& ms, const std::string& title, const std::string& note) {
  const std::vector<std::pair<std::string, std::string>> phases{
      {"forward", "#4e79a7"}, {"backward", "#f28e2b"}, {"optimizer", "#59a14f"}};
  double maxMs = 0;
  for (const Measured& m : ms) {
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
    s += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + 17, xmlEscape(ms[i].strategy));
    double x = left, total = 0;
    for (const auto& [ph, color] : phases) {
      const double msv = ms[i].phaseS.count(ph) ? ms[i].phaseS.at(ph) * 1e3 : 0.0;
      const double w = barW * msv / maxMs;
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"22\" fill=\"{}\"><title>{} {:.3f} ms</title></rect>\n",
                       x, y, w, color, ph, msv);
      x += w;
      total += msv;
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.2f} ms, {:.1f} samples/s</text>\n", x + 6, y + 16, total,
                     ms[i].samplesPerS);
  }
  const int ly = top + rowH * static_cast<int>(ms.size()) + 20;
  for (size_t k = 0; k < phases.size(); ++k) {
    const int lx = left + static_cast<int>(k) * 110;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
                     lx, ly, phases[k].second, lx + 16, ly + 11, phases[k].first);
  }
  return s + "</svg>\n";
}

std::string writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return out.good() ? "" : fmt::format("cannot write '{}'", path);
}

}  // namespace

int runStepBench(const StepBenchOptions& o) {
  std::vector<std::string> requested;
  for (const std::string& st : o.strategies.empty() ? std::vector<std::string>{"all"} : o.strategies) {
    if (st == "all") requested.insert(requested.end(), kStrategies.begin(), kStrategies.end());
    else if (std::find(kStrategies.begin(), kStrategies.end(), st) != kStrategies.end()) requested.push_back(st);
    else return fmt::print(stderr, "error: --strategy must be all, fblayout, reuse or explicit, not '{}'\n", st), 2;
  }
  if (o.steps < 1) return fmt::print(stderr, "error: --steps must be at least 1\n"), 2;
  auto g = onnx::loadModel(o.model);
  if (!g.ok()) return fmt::print(stderr, "error: {}\n", g.error().message), 1;

  // The plan builder takes no whole-model strategy yet: the one plan it builds (row-major
  // buffers, the codegen's kernels) is measured once, under its own name.
  std::vector<Measured> results(1);
  if (auto e = measure(o, g.value(), "baseline-buffer", &results[0]); !e.empty())
    return fmt::print(stderr, "error: {}\n", e), 1;

  const std::string& device = results[0].device;
  nlohmann::json j{{"model", o.model},     {"profile", o.profile}, {"device", device},
                   {"steps", o.steps},     {"seed", o.seed},       {"requested_strategies", requested},
                   {"not_integrated", requested}, {"note", kNotIntegrated}};
  j["results"] = nlohmann::json::array();
  for (const Measured& m : results) j["results"].push_back(toJson(m));

  fmt::print("{} on {} ({} steps)\nnote: {}\n", o.model, device, o.steps, kNotIntegrated);
  fmt::print("  {:<16} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8} {:>12} {:>11}\n", "strategy", "samples/s",
             "step ms", "fwd ms", "bwd ms", "opt ms", "launches", "layout", "bytes moved", "peak bytes");
  for (const Measured& m : results) {
    auto ph = [&](const char* k) { return m.phaseS.count(k) ? m.phaseS.at(k) * 1e3 : 0.0; };
    fmt::print("  {:<16} {:>10.1f} {:>10.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>8} {:>8} {:>12} {:>11}\n", m.strategy,
               m.samplesPerS, m.stepS * 1e3, ph("forward"), ph("backward"), ph("optimizer"), m.launchesPerStep,
               m.layoutLaunches, m.bytesMoved, m.peakBytes);
    if (m.randomWeights) fmt::print("  (random weights: {})\n", m.weightsNote);
  }
  if (!o.json.empty()) {
    if (o.json == "-") fmt::print("{}\n", j.dump(1));
    else if (auto e = writeFile(o.json, j.dump(1) + "\n"); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
  }
  if (!o.svg.empty()) {
    const std::string title = fmt::format("fbl-bench step: {} on {}", fs::path(o.model).filename().string(), device);
    if (auto e = writeFile(o.svg, svgChart(results, title, kNotIntegrated)); !e.empty())
      return fmt::print(stderr, "error: {}\n", e), 1;
  }
  return 0;
}

}  // namespace fbl::bench
