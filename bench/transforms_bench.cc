// `fbl-bench transforms` (see transforms_bench.h). For each attention configuration:
//
//   1. Build zoo `llama-attention` at [seq, heads, hidden] (random weights inside the file, LoRA
//      rank 8 on q/k/v/o) and write it to a temporary ONNX file.
//   2. Per strategy, runStrategy (bench/strategy_run.cc): compile with that strategy, open with
//      launch profiling, train `steps` steps on synthetic hidden states; no phase rounds (the
//      profiled launch times already split the step by phase).
//   3. Report per strategy the device time of launches of kind transform or conversion, forward
//      and backward apart, their count, and the step's total device time and wall time.
//
// What is measured and what is not: launch device times (OpenCL profiling) and wall time. A
// strategy that reads through composed index maps instead of launching a transform pays for it
// inside its compute kernels; that cost is in `device_s`, not in `layout_time_s`, which is why
// both are printed.
#include "bench/transforms_bench.h"


#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/profile_paths.h"
#include "bench/strategy_run.h"
#include "compiler/passes/load_model.h"
#include "compiler/zoo/zoo.h"
#include "runtime/session.h"

namespace fbl::bench {

namespace {

namespace fs = std::filesystem;

// The committed profile of the device the runtime will pick (Session::open's rule).
std::string defaultProfile(int device) {
  const std::vector<rt::DeviceInfo> devs = rt::listDevices();
  if (devs.empty()) return findProfile("pocl-cpu");
  const rt::DeviceInfo* d = &devs[0];
  if (device >= 0 && device < static_cast<int>(devs.size())) d = &devs[device];
  else if (device < 0)
    for (const rt::DeviceInfo& x : devs)
      if (x.gpu) { d = &x; break; }
  if (d->name.find("H200") != std::string::npos) return findProfile("nvidia-h200");
  return findProfile(d->gpu ? "adreno-830" : "pocl-cpu");
}

struct ConfigResult {
  AttentionConfig config;
  std::vector<StrategyRun> runs;
  bool identical = false;
  std::string note;
};

Status runConfig(const TransformsBenchOptions& o, const std::string& profile,
                      const std::vector<std::string>& strategies, ConfigResult* out) {
  const AttentionConfig& c = out->config;
  zoo::ZooOptions zo;
  zo.tiny = true;  // random weights inside the file; every size below is overridden
  zo.seq = c.seq, zo.heads = c.heads, zo.hidden = c.hidden, zo.batch = 1, zo.seed = o.seed;
  auto b = zoo::buildZooModel("llama-attention", zo);
  if (!b.ok()) return b.error();
  const std::string model =
      (fs::temp_directory_path() / fmt::format("fbl-bench-{}-attention-{}-{}-{}.onnx", ::getpid(), c.seq, c.heads, c.hidden))
          .string();
  struct Remove {
    std::string p;
    ~Remove() { std::error_code ec; fs::remove(p, ec); }
  } remove{model};
  FBL_TRY((*b)->write(model));
  auto g = passes::loadModel(model);
  if (!g.ok()) return g.error();
  for (const std::string& s : strategies) {
    out->runs.emplace_back();
    RunOptions ro;
    ro.model = model, ro.profile = profile, ro.strategy = s;
    ro.steps = o.steps, ro.device = o.device, ro.seed = o.seed;
    ro.phaseRounds = false, ro.unprofiled = false;  // Figure 17 compares device times
    if (Status e = runStrategy(ro, g.value(), &out->runs.back()); !e.ok()) return Error{fmt::format("strategy {}: {}", s, e.error().message)};
  }
  out->note = planComparison(out->runs, &out->identical);
  return Status::success();
}

double at(const std::map<std::string, double>& m, const char* k) { return m.count(k) ? m.at(k) : 0.0; }
int64_t at(const std::map<std::string, int64_t>& m, const char* k) { return m.count(k) ? m.at(k) : 0; }

void printConfig(const ConfigResult& r) {
  const AttentionConfig& c = r.config;
  fmt::print("\nattention [seq {}, heads {}, hidden {}] (head_dim {}), {} timed step(s)\n", c.seq, c.heads, c.hidden,
             c.hidden / c.heads, r.runs.empty() ? 0 : r.runs[0].timedSteps);
  if (!r.note.empty()) fmt::print("note: {}\n", r.note);
  fmt::print("  {:<9} {:>13} {:>13} {:>11} {:>16} {:>14} {:>10} {:>13} {:>9}\n", "strategy", "layout fwd ms",
             "layout bwd ms", "layout ms", "layout launches", "compute ms", "device ms", "step wall ms", "launches");
  for (const StrategyRun& m : r.runs) {
    fmt::print("  {:<9} {:>13.3f} {:>13.3f} {:>11.3f} {:>16} {:>14.3f} {:>10.3f} {:>13.2f} {:>9}\n", m.strategy,
               at(m.layoutSByPhase, "forward") * 1e3, at(m.layoutSByPhase, "backward") * 1e3, m.layoutS * 1e3,
               fmt::format("{}/{}", at(m.layoutLaunchesByPhase, "forward"), at(m.layoutLaunchesByPhase, "backward")),
               (m.deviceS - m.layoutS) * 1e3, m.deviceS * 1e3, m.stepS * 1e3, m.launchesPerStep);
  }
}

}  // namespace

int runTransformsBench(const TransformsBenchOptions& o) {
  std::vector<std::string> strategies;
  if (Status e = expandStrategies(o.strategies, &strategies); !e.ok()) return fmt::print(stderr, "error: {}\n", e.error().message), 2;
  if (o.steps < 1) return fmt::print(stderr, "error: --steps must be at least 1\n"), 2;
  std::vector<AttentionConfig> configs = o.configs;
  if (configs.empty()) configs = {{512, 32, 2048}, {512, 16, 1024}, {512, 8, 1024}};
  for (const AttentionConfig& c : configs)
    if (c.seq < 1 || c.heads < 1 || c.hidden < 1 || c.hidden % c.heads != 0 || (c.hidden / c.heads) % 2 != 0)
      return fmt::print(stderr, "error: [seq {}, heads {}, hidden {}]: sizes must be positive and hidden a multiple "
                                "of heads with an even head_dim\n", c.seq, c.heads, c.hidden), 2;
  const std::string profile = o.profile.empty() ? defaultProfile(o.device) : o.profile;

  std::vector<ConfigResult> results;
  for (const AttentionConfig& c : configs) {
    results.push_back({c, {}, false, ""});
    if (Status e = runConfig(o, profile, strategies, &results.back()); !e.ok())
      return fmt::print(stderr, "error: attention [seq {}, heads {}, hidden {}]: {}\n", c.seq, c.heads, c.hidden,
                        e.error().message),
             1;
    if (results.size() == 1) fmt::print("device {}, profile {}; times per step: OpenCL launch device time (layout = "
                                        "launches of kind transform/conversion), step wall = trainStep\n",
                                        results[0].runs[0].device, profile);
    printConfig(results.back());
  }

  if (o.json.empty()) return 0;
  nlohmann::json j{{"command", "transforms"},
                   {"model", "zoo llama-attention (one block, LoRA q/k/v/o, causal MHA, loss mean(out^2))"},
                   {"device", results[0].runs[0].device},
                   {"profile", profile},
                   {"steps", o.steps},
                   {"seed", o.seed},
                   {"strategies", strategies},
                   {"timing", "layout_time_s: OpenCL device time of launches of kind transform or conversion, "
                              "per timed step; device_s: all launches; step_s: wall clock of trainStep"}};
  j["configs"] = nlohmann::json::array();
  for (const ConfigResult& r : results) {
    nlohmann::json c{{"seq", r.config.seq},       {"heads", r.config.heads},   {"hidden", r.config.hidden},
                     {"head_dim", r.config.hidden / r.config.heads}, {"plans_identical", r.identical},
                     {"note", r.note}};
    c["results"] = nlohmann::json::array();
    for (const StrategyRun& m : r.runs) c["results"].push_back(toJson(m));
    j["configs"].push_back(std::move(c));
  }
  if (o.json == "-") fmt::print("{}\n", j.dump(1));
  else if (Status e = writeTextFile(o.json, j.dump(1) + "\n"); !e.ok()) return fmt::print(stderr, "error: {}\n", e.error().message), 1;
  return 0;
}

}  // namespace fbl::bench
