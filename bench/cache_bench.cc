// `fbl-bench cache`, see cache_bench.h.
//
//  1. Point this process's OpenCL at Oclgrind with the plugin (bench/oclgrind_device.h) and write
//     the profile's memory model for it.
//  2. Run the work once: a plan's launches phase by phase (Session::runPhases, so every launch
//     runs whatever the loss), the MatMul plans of compiler/strategy, or the pattern kernels.
//  3. Pair the plugin's records with the launches in order, sum per phase and strategy, and
//     report (bench/cache_report.h).
// Values do not change the simulated traffic of these kernels (no data-dependent addresses but
// token ids, which come from the synthetic inputs), so plans run on whatever weights they hold.
#include "bench/cache_bench.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/cache_patterns.h"
#include "bench/cache_report.h"
#include "bench/oclgrind_device.h"
#include "bench/strategy_run.h"
#include "compiler/onnx/load_model.h"
#include "compiler/plan/compile_command.h"
#include "compiler/profile/profile.h"
#include "compiler/strategy/cl_exec.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "compiler/zoo/zoo.h"
#include "runtime/plan_file.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"
#include "sim/memory_model.h"

namespace fbl::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Context {
  const CacheBenchOptions& o;
  sim::MemoryModel model;
  OclgrindDevice device;
  nlohmann::json report;
};

// Runs every launch of the plan at `planPath`, phase by phase, and pairs the records with them.
std::string simulatePlan(Context& cx, const std::string& planPath, const ir::Graph* g, SimulatedRun* run) {
  rt::OpenOptions oo;
  oo.cacheDir = cx.device.folder();  // Oclgrind's programs are built with its own options: never reuse them
  std::string err;
  auto s = rt::Session::open(planPath, oo, &err);
  if (!s) return err;
  const planfile::Plan& p = s->plan();
  if (g) {
    auto batch = zoo::syntheticInputs(*g, cx.o.seed, 0);
    if (!batch.ok()) return batch.error().message;
    if (g->inputs.size() != p.inputs.size()) return "the graph's inputs do not match the plan's";
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const ir::Tensor& x = batch.value().at(g->inputs[i]);
      if (auto e = s->writeTensor(p.tensors[p.inputs[i]].name, x.raw(), x.nbytes()); !e.empty()) return e;
    }
  }
  if (auto r = cx.device.take(); !r.ok()) return r.error().message;  // the session's own kernels, if any
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    std::vector<size_t> mine;
    for (size_t i = 0; i < p.launches.size(); ++i)
      if (p.launches[i].phase == phase) mine.push_back(i);
    if (mine.empty()) continue;
    if (auto e = s->runPhases({phase}); !e.empty()) return e;
    auto recs = cx.device.take();
    if (!recs.ok()) return recs.error().message;
    if (recs->size() != mine.size())
      return fmt::format("phase {}: {} launches but the simulator saw {}", phase, mine.size(), recs->size());
    for (size_t k = 0; k < mine.size(); ++k) {
      const planfile::Launch& l = p.launches[mine[k]];
      run->add({l.phase, l.kind, l.node, p.kernelNames[l.kernel], (*recs)[k].counters,
                sim::estimatedMs((*recs)[k].counters, cx.model)});
    }
  }
  return "";
}

std::string simulateModel(Context& cx, const std::string& model, std::vector<SimulatedRun>* runs) {
  const CacheBenchOptions& o = cx.o;
  if (model.size() > 4 && model.substr(model.size() - 4) == ".fbp") {
    runs->push_back({});
    runs->back().strategy = "plan";
    return simulatePlan(cx, model, nullptr, &runs->back());
  }
  std::vector<std::string> strategies;
  if (auto e = expandStrategies(o.strategies, &strategies); !e.empty()) return e;
  auto g = onnx::loadModel(model);
  if (!g.ok()) return g.error().message;
  for (const std::string& st : strategies) {
    plan::CompileArgs ca;
    ca.model = model;
    ca.profile = o.profile;
    ca.strategy = st;
    auto c = plan::compileModel(ca);
    if (!c.ok()) return fmt::format("strategy {}: {}", st, c.error().message);
    const std::string path = cx.device.folder() + "/" + st + ".fbp";
    if (auto e = safetensors::writeFileAtomic(path, planfile::serialize(c->plan)); !e.empty()) return e;
    runs->push_back({});
    runs->back().strategy = st;
    if (auto e = simulatePlan(cx, path, &g.value(), &runs->back()); !e.empty()) return fmt::format("strategy {}: {}", st, e);
  }
  return "";
}

std::string simulateTransforms(Context& cx, std::vector<SimulatedRun>* runs) {
  const CacheBenchOptions& o = cx.o;
  zoo::ZooOptions zo;
  zo.tiny = true;  // random weights inside the file; the sizes below override the tiny ones
  zo.seq = o.seq, zo.heads = o.heads, zo.hidden = o.hidden, zo.batch = 1, zo.seed = o.seed;
  auto b = zoo::buildZooModel("llama-attention", zo);
  if (!b.ok()) return b.error().message;
  const std::string model = cx.device.folder() + "/attention.onnx";
  if (Status st = (*b)->write(model); !st.ok()) return st.error().message;
  cx.report["seq"] = o.seq, cx.report["heads"] = o.heads, cx.report["hidden"] = o.hidden;
  return simulateModel(cx, model, runs);
}

// Figure 16 on Oclgrind: each strategy's forward, dA and dB products (explicit's conversions in
// the pass they precede) with the GPU tiling, one execution. Uploads and downloads are not counted.
std::string simulateMatmul(Context& cx, std::vector<SimulatedRun>* runs) {
  using namespace fbl::strategy;
  const CacheBenchOptions& o = cx.o;
  if (o.scale < 1 || 512 % o.scale || 2048 % o.scale || 8192 % o.scale)
    return fmt::format("--scale {} must divide M=512, K=2048 and N=8192", o.scale);
  const MatmulShape shape{512 / o.scale, 2048 / o.scale, 8192 / o.scale};
  auto prof = profile::loadProfile(o.profile);
  if (!prof.ok()) return prof.error().message;
  auto session = ClSession::open(-1);
  if (!session.ok()) return session.error().message;
  const codegen::MatmulTiling tiling = codegen::matmulTiling(codegen::DeviceClass::kGpu);
  std::mt19937 rng(static_cast<unsigned>(o.seed));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng);
    return v;
  };
  MatmulData data{random(shape.m * shape.k), random(shape.k * shape.n), random(shape.m * shape.n), {}, {}, {}};
  cx.report["M"] = shape.m, cx.report["K"] = shape.k, cx.report["N"] = shape.n;
  cx.report["tiling"] = fmt::format("{}x{}x{}/{}x{}", tiling.tm, tiling.tn, tiling.tk, tiling.rm, tiling.rn);
  std::vector<std::string> names;
  if (auto e = expandStrategies(o.strategies, &names); !e.empty()) return e;
  for (const std::string& name : names) {
    auto st = parseStrategy(name);
    if (!st.ok()) return st.error().message;
    auto plan = planMatmul(*st, shape, *prof);
    if (!plan.ok()) return fmt::format("{}: {}", name, plan.error().message);
    if (auto r = cx.device.take(); !r.ok()) return r.error().message;
    auto ran = runMatmulPlan(**session, *plan, tiling, data, /*repeats=*/0);
    if (!ran.ok()) return fmt::format("{}: {}", name, ran.error().message);
    auto recs = cx.device.take();
    if (!recs.ok()) return recs.error().message;
    // Kernel names say the pass: matmul_<pass>, splitk_<pass>; convert_* run before the
    // product of the pass they serve; fbl_upload/fbl_download are the harness's own.
    runs->push_back({});
    SimulatedRun& run = runs->back();
    run.strategy = name;
    std::vector<SimulatedLaunch> pendingConversions;
    for (const LaunchRecord& r : *recs) {
      SimulatedLaunch l{"", "compute", "", r.kernel, r.counters, sim::estimatedMs(r.counters, cx.model)};
      if (r.kernel.rfind("fbl_upload", 0) == 0 || r.kernel.rfind("fbl_download", 0) == 0) continue;
      if (r.kernel.rfind("convert_", 0) == 0) {
        l.kind = "conversion";
        pendingConversions.push_back(l);
        continue;
      }
      const size_t us = r.kernel.find('_');
      l.phase = us == std::string::npos ? r.kernel : r.kernel.substr(us + 1);
      l.node = r.kernel;
      for (SimulatedLaunch c : pendingConversions) {
        c.phase = l.phase;
        run.add(c);
      }
      pendingConversions.clear();
      run.add(l);
    }
    if (!pendingConversions.empty()) return fmt::format("{}: a conversion ran after the last product", name);
  }
  return "";
}

}  // namespace

int runCacheBench(const CacheBenchOptions& o) {
  auto fail = [](const std::string& e) {
    fmt::print(stderr, "error: {}\n", e);
    return 1;
  };
  auto model = sim::loadMemoryModel(o.profile);
  if (!model.ok()) return fail(model.error().message);
  auto dev = OclgrindDevice::useOclgrind();
  if (!dev.ok()) return fail(dev.error().message);
  Context cx{o, model.value(), std::move(dev.value()), nlohmann::json::object()};
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::error_code ec; fs::remove_all(dir, ec); }
  } cleanup{cx.device.folder()};
  if (Status st = cx.device.setModel(cx.model); !st.ok()) return fail(st.error().message);

  std::vector<SimulatedRun> runs;
  const auto t0 = Clock::now();
  std::string err;
  if (o.form == "model") err = simulateModel(cx, o.input, &runs);
  else if (o.form == "transforms") err = simulateTransforms(cx, &runs);
  else if (o.form == "matmul") err = simulateMatmul(cx, &runs);
  else if (o.form == "patterns") err = simulatePatterns(o, cx.model, cx.device, &runs, &cx.report);
  else err = fmt::format("unknown form '{}'", o.form);
  if (!err.empty()) return fail(err);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();

  sim::AccessCounters all;
  for (const SimulatedRun& r : runs) all += r.total;
  nlohmann::json& j = cx.report;
  j["command"] = "cache";
  j["form"] = o.form;
  if (o.form == "model") j["model"] = o.input;
  j["profile"] = o.profile;
  j["memory_model"] = sim::memoryModelToJson(cx.model);
  j["estimate"] = "roofline per launch: max(FLOPs / peak_gflops, DRAM bytes / bandwidth_gbps, L2 request bytes / "
                  "l2_bandwidth_gbps), summed over launches; no scheduler, compiler or driver effects";
  j["simulator"] = {{"wall_s", wall},
                    {"work_items", all.workItems},
                    {"instructions", all.instructions},
                    {"work_items_per_s", wall > 0 ? all.workItems / wall : 0.0},
                    {"instructions_per_s", wall > 0 ? all.instructions / wall : 0.0}};
  j["results"] = nlohmann::json::array();
  for (const SimulatedRun& r : runs) j["results"].push_back(resultJson(r, o.launches));

  const std::string title = fmt::format("fbl-bench cache {} on {} (simulated on Oclgrind: {} work-items in {:.1f} s)",
                                        o.form == "model" ? o.input : o.form, cx.model.profile, all.workItems, wall);
  if (o.json != "-") printRuns(title, runs);
  if (o.json == "-") fmt::print("{}\n", j.dump(1));
  else if (!o.json.empty())
    if (auto e = writeTextFile(o.json, j.dump(1) + "\n"); !e.empty()) return fail(e);
  if (!o.svg.empty()) {
    const std::string svg = o.form == "patterns" ? patternsSvg(title, runs) : figure15Svg(title, runs, "fblayout");
    if (auto e = writeTextFile(o.svg, svg); !e.empty()) return fail(e);
  }
  return 0;
}

}  // namespace fbl::bench
