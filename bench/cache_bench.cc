// `fbl-bench cache`, see cache_bench.h.
//
//  1. Point this process's OpenCL at Oclgrind with the plugin (bench/oclgrind_device.h).
//  2. Group the profiles by the work they run: a plan (or MatMul plan) compiled for each
//     profile; profiles whose plans are identical share one Oclgrind execution, the plugin
//     feeding the same accesses to each one's memory model.
//  3. Per group: write the group's models, run the work once (a plan's launches phase by phase
//     through Session::runPhases, so every launch runs whatever the loss; the MatMul plans of
//     harness/operator_plans.h; the pattern kernels), and pair the plugin's records with
//     what ran.
//  4. Sum per phase and strategy per profile and report (bench/cache_report.h).
// Values do not change the simulated traffic of these kernels (no data-dependent addresses but
// token ids, which come from the synthetic inputs), so plans run on whatever weights they hold.
#include "bench/cache_bench.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/cache_patterns.h"
#include "bench/cache_report.h"
#include "bench/oclgrind_device.h"
#include "bench/strategy_run.h"
#include "compiler/driver/compile_command.h"
#include "compiler/passes/load_model.h"
#include "compiler/profile/profile.h"
#include "compiler/strategy/strategy.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "compiler/zoo/zoo.h"
#include "harness/matmul_run.h"
#include "runtime/plan_file.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"
#include "sim/memory_model.h"

namespace fbl::bench {

using namespace fbl::harness;  // the kernel harness: strategy plans, their traffic, ClSession

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Context {
  const CacheBenchOptions& o;
  OclgrindDevice device;
  ProfileRuns all;
  nlohmann::json report;
  // The profile file each model's work is compiled for: a bracket variant shares its profile's
  // plans (the compiler cannot see which end is real), so it shares its execution too.
  std::vector<std::string> paths;

  Status begin(const std::vector<size_t>& group, const std::string& name) {
    return device.setModels(all.begin(group, name));
  }
  void add(const std::vector<size_t>& group, const SimulatedLaunch& l, const std::vector<sim::AccessCounters>& counters) {
    all.add(group, l, counters);
  }
};

// Profiles grouped by `key` (equal keys: the same work), in first-seen order.
std::vector<std::vector<size_t>> groupBy(const std::vector<std::string>& keys) {
  std::vector<std::vector<size_t>> groups;
  std::map<std::string, size_t> index;
  for (size_t p = 0; p < keys.size(); ++p) {
    auto [it, fresh] = index.emplace(keys[p], groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(p);
  }
  return groups;
}

// What the simulator runs of a plan: its program and its launches.
std::string planKey(const planfile::Plan& p) {
  std::string k = p.program;
  for (const planfile::Launch& l : p.launches) {
    k += fmt::format("|{} {} {}", l.phase, p.kernelNames[l.kernel], l.kind);
    for (int64_t x : l.global) k += fmt::format(" g{}", x);
    for (int64_t x : l.local) k += fmt::format(" l{}", x);
    for (int32_t a : l.args) k += fmt::format(" a{}:{}", p.tensors[a].offset, p.tensors[a].bytes);
  }
  return k;
}

// Runs every launch of the plan at `planPath`, phase by phase, for the profiles of `group`.
Status simulatePlan(Context& cx, const std::string& planPath, const ir::Graph* g, const std::vector<size_t>& group) {
  rt::OpenOptions oo;
  oo.cacheDir = cx.device.folder();  // Oclgrind's programs are built with its own options: never reuse them
  FBL_ASSIGN(const std::unique_ptr<rt::Session> s, rt::Session::open(planPath, oo));
  const planfile::Plan& p = s->plan();
  if (g) {
    auto batch = zoo::syntheticInputs(*g, cx.o.seed, 0);
    if (!batch.ok()) return batch.error();
    if (g->inputs.size() != p.inputs.size()) return Error{"the graph's inputs do not match the plan's"};
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const ir::Tensor& x = batch.value().at(g->inputs[i]);
      FBL_TRY(s->writeTensor(p.tensors[p.inputs[i]].name, x.raw(), x.nbytes()));
    }
  }
  if (auto r = cx.device.take(); !r.ok()) return r.error();  // the session's own kernels, if any
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    std::vector<size_t> mine;
    for (size_t i = 0; i < p.launches.size(); ++i)
      if (p.launches[i].phase == phase) mine.push_back(i);
    if (mine.empty()) continue;
    FBL_TRY(s->runPhases({phase}));
    auto recs = cx.device.take();
    if (!recs.ok()) return recs.error();
    if (recs->size() != mine.size())
      return Error{fmt::format("phase {}: {} launches but the simulator saw {}", phase, mine.size(), recs->size())};
    for (size_t k = 0; k < mine.size(); ++k) {
      const planfile::Launch& l = p.launches[mine[k]];
      cx.add(group, {l.phase, l.kind, l.node, p.kernelNames[l.kernel], {}, 0, {}}, (*recs)[k].counters);
    }
  }
  return Status::success();
}

Status simulateModel(Context& cx, const std::string& model) {
  const CacheBenchOptions& o = cx.o;
  std::vector<size_t> every(cx.all.models.size());
  for (size_t p = 0; p < every.size(); ++p) every[p] = p;
  if (model.size() > 4 && model.substr(model.size() - 4) == ".fbp") {
    if (!fs::exists(model)) return Error{fmt::format("{}: no such plan", model)};
    FBL_TRY(cx.begin(every, "plan"));
    return simulatePlan(cx, model, nullptr, every);
  }
  std::vector<std::string> strategies;
  FBL_TRY(expandStrategies(o.strategies, &strategies));
  auto g = passes::loadModel(model);
  if (!g.ok()) return g.error();
  for (const std::string& st : strategies) {
    std::vector<planfile::Plan> plans;
    std::vector<std::string> keys;
    for (const std::string& prof : cx.paths) {
      driver::CompileArgs ca;
      ca.model = model;
      ca.profile = prof;
      ca.allowOverLimit = true;  // a simulation of the profile's GPU, not a plan for a device
      ca.strategy = st;
      ca.storage = o.storage;
      auto c = driver::compileModel(ca);
      if (!c.ok()) return Error{fmt::format("strategy {}: {}", st, c.error().message)};
      keys.push_back(planKey(c->plan));
      plans.push_back(std::move(c->plan));
    }
    for (const std::vector<size_t>& group : groupBy(keys)) {
      const std::string path = cx.device.folder() + "/" + st + ".fbp";
      FBL_TRY(safetensors::writeFileAtomic(path, planfile::serialize(plans[group[0]])));
      FBL_TRY(cx.begin(group, st));
      if (Status e = simulatePlan(cx, path, &g.value(), group); !e.ok()) return Error{fmt::format("strategy {}: {}", st, e.error().message)};
    }
  }
  return Status::success();
}

Status simulateTransforms(Context& cx) {
  const CacheBenchOptions& o = cx.o;
  zoo::ZooOptions zo;
  zo.tiny = true;  // random weights inside the file; the sizes below override the tiny ones
  zo.seq = o.seq, zo.heads = o.heads, zo.hidden = o.hidden, zo.batch = 1, zo.seed = o.seed;
  auto b = zoo::buildZooModel("llama-attention", zo);
  if (!b.ok()) return b.error();
  const std::string model = cx.device.folder() + "/attention.onnx";
  FBL_TRY((*b)->write(model));
  cx.report["seq"] = o.seq, cx.report["heads"] = o.heads, cx.report["hidden"] = o.hidden;
  return simulateModel(cx, model);
}

// Figure 16 on Oclgrind: each strategy's forward, dA and dB products (explicit's conversions in
// the pass they precede) with the GPU tiling, one execution. Uploads and downloads are not
// counted; the products find their inputs in L2 as the uploads left them.
Status simulateMatmul(Context& cx) {
  using strategy::parseStrategy;
  const CacheBenchOptions& o = cx.o;
  if (o.scale < 1 || 512 % o.scale || 2048 % o.scale || 8192 % o.scale)
    return Error{fmt::format("--scale {} must divide M=512, K=2048 and N=8192", o.scale)};
  const MatmulShape shape{512 / o.scale, 2048 / o.scale, 8192 / o.scale};
  const codegen::MatmulTiling tiling = codegen::matmulTiling(profile::DeviceClass::kGpu);
  std::mt19937 rng(static_cast<unsigned>(o.seed));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng);
    return v;
  };
  const MatmulData data{random(shape.m * shape.k), random(shape.k * shape.n), random(shape.m * shape.n), {}, {}, {}};
  cx.report["M"] = shape.m, cx.report["K"] = shape.k, cx.report["N"] = shape.n;
  cx.report["tiling"] = fmt::format("{}x{}x{}/{}x{}", tiling.tm, tiling.tn, tiling.tk, tiling.rm, tiling.rn);
  std::vector<profile::HardwareProfile> profiles;
  for (const std::string& path : cx.paths) {
    auto prof = profile::loadProfile(path);
    if (!prof.ok()) return prof.error();
    profiles.push_back(*prof);
  }
  std::vector<std::string> names;
  FBL_TRY(expandStrategies(o.strategies, &names));
  for (const std::string& name : names) {
    auto st = parseStrategy(name);
    if (!st.ok()) return st.error();
    std::vector<MatmulPlan> plans;
    std::vector<std::string> keys;
    for (const profile::HardwareProfile& prof : profiles) {
      auto plan = planMatmul(*st, shape, prof);
      if (!plan.ok()) return Error{fmt::format("{}: {}", name, plan.error().message)};
      std::string key;
      for (const auto& [t, pl] : plan->tensors) key += t + "=" + pl.layout.str() + ";";
      keys.push_back(key);
      plans.push_back(std::move(*plan));
    }
    for (const std::vector<size_t>& group : groupBy(keys)) {
      FBL_TRY(cx.begin(group, name));
      auto session = ClSession::open(-1);  // a context of its own: the plugin reads the group's models
      if (!session.ok()) return session.error();
      (*session)->convertOnDevice(true);  // the products find their inputs where the uploads left them
      if (auto r = cx.device.take(); !r.ok()) return r.error();
      auto ran = runMatmulPlan(**session, plans[group[0]], fixedTiling(tiling, (*session)->computeUnits()), data, /*repeats=*/0);
      if (!ran.ok()) return Error{fmt::format("{}: {}", name, ran.error().message)};
      auto recs = cx.device.take();
      if (!recs.ok()) return recs.error();
      // Kernel names say the pass: matmul_<pass>, splitk_<pass>; convert_* run before the
      // product of the pass they serve; fbl_upload/fbl_download are the harness's own.
      std::vector<const LaunchRecord*> conversions;
      for (const LaunchRecord& r : *recs) {
        if (r.kernel.rfind("fbl_upload", 0) == 0 || r.kernel.rfind("fbl_download", 0) == 0) continue;
        if (r.kernel.rfind("convert_", 0) == 0) {
          conversions.push_back(&r);
          continue;
        }
        const size_t us = r.kernel.find('_');
        const std::string pass = us == std::string::npos ? r.kernel : r.kernel.substr(us + 1);
        for (const LaunchRecord* c : conversions) cx.add(group, {pass, "conversion", c->kernel, c->kernel, {}, 0, {}}, c->counters);
        conversions.clear();
        cx.add(group, {pass, "compute", r.kernel, r.kernel, {}, 0, {}}, r.counters);
      }
      if (!conversions.empty()) return Error{fmt::format("{}: a conversion ran after the last product", name)};
    }
  }
  return Status::success();
}

// The memory model at every other combination of the profile's bracket (texture-L1 size, line
// shape, L2 bandwidth), named "<profile>@l1=B,line=HxW,l2=G".
std::vector<sim::MemoryModel> bracketVariants(const sim::MemoryModel& m, const profile::HardwareProfile& hw) {
  auto orOwn = [](auto list, auto own) { return list.empty() ? decltype(list){own} : list; };
  std::vector<sim::MemoryModel> out;
  for (profile::TextureBlock b : orOwn(hw.bracket.textureBlocks, hw.textureBlock))
    for (int64_t l1 : orOwn(hw.bracket.l1TextureBytes, hw.l1TextureCacheBytes))
      for (double l2 : orOwn(hw.bracket.l2GBs, m.l2GBs)) {
        if (b.h == m.textureBlock.h && b.w == m.textureBlock.w && l1 == m.textureL1.bytes && l2 == m.l2GBs) continue;
        sim::MemoryModel v = m;
        v.textureBlock = {b.h, b.w};
        v.textureL1.bytes = l1;
        v.textureL1.lineBytes = int64_t{16} * b.h * b.w;
        v.l2GBs = l2;
        v.profile = fmt::format("{}@l1={},line={}x{},l2={:g}", m.profile, l1, b.h, b.w, l2);
        out.push_back(std::move(v));
      }
  return out;
}

// `path` with "-<profile>" before its extension, when several profiles share one --svg.
std::string perProfilePath(const std::string& path, const std::string& profile, bool several) {
  if (!several) return path;
  const fs::path p(path);
  return (p.parent_path() / (p.stem().string() + "-" + profile + p.extension().string())).string();
}

}  // namespace

int runCacheBench(const CacheBenchOptions& o) {
  auto fail = [](const std::string& e) {
    fmt::print(stderr, "error: {}\n", e);
    return 1;
  };
  if (o.profiles.empty()) return fail("give at least one --profile");
  std::vector<sim::MemoryModel> models;
  std::vector<std::string> paths;
  for (const std::string& path : o.profiles) {
    auto m = sim::loadMemoryModel(path);
    if (!m.ok()) return fail(m.error().message);
    models.push_back(*m);
    paths.push_back(path);
    if (!o.bracket) continue;
    auto hw = profile::loadProfile(path);
    if (!hw.ok()) return fail(hw.error().message);
    for (sim::MemoryModel v : bracketVariants(*m, *hw)) {
      models.push_back(std::move(v));
      paths.push_back(path);
    }
  }
  auto dev = OclgrindDevice::useOclgrind();
  if (!dev.ok()) return fail(dev.error().message);
  Context cx{o, std::move(dev.value()), {models, std::vector<std::vector<SimulatedRun>>(models.size()), 0, 0},
             nlohmann::json::object(), paths};
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::error_code ec; fs::remove_all(dir, ec); }
  } cleanup{cx.device.folder()};

  const auto t0 = Clock::now();
  Status ran;
  if (o.form == "model") ran = simulateModel(cx, o.input);
  else if (o.form == "transforms") ran = simulateTransforms(cx);
  else if (o.form == "matmul") ran = simulateMatmul(cx);
  else if (o.form == "patterns") ran = simulatePatterns(o, cx.device, &cx.all, &cx.report);
  else ran = Error{fmt::format("unknown form '{}'", o.form)};
  if (!ran.ok()) return fail(ran.error().message);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t workItems = cx.all.workItems, instructions = cx.all.instructions;
  const auto& runs = cx.all.runs;

  nlohmann::json& j = cx.report;
  j["command"] = "cache";
  j["form"] = o.form;
  if (o.form == "model") j["model"] = o.input;
  j["profile"] = models.front().profile;
  j["profiles"] = nlohmann::json::array();
  for (const sim::MemoryModel& m : models) j["profiles"].push_back(m.profile);
  j["memory_model"] = sim::memoryModelToJson(models.front());
  j["memory_models"] = nlohmann::json::object();
  for (const sim::MemoryModel& m : models) j["memory_models"][m.profile] = sim::memoryModelToJson(m);
  j["estimate"] = "roofline per launch: max(FLOPs / peak_gflops, DRAM bytes / bandwidth_gbps, L2 request bytes / "
                  "l2_bandwidth_gbps), summed over launches; no latency, scheduler, compiler or driver effects";
  j["simulator"] = {{"wall_s", wall},
                    {"work_items", workItems},
                    {"instructions", instructions},
                    {"work_items_per_s", wall > 0 ? workItems / wall : 0.0},
                    {"instructions_per_s", wall > 0 ? instructions / wall : 0.0}};
  j["results"] = nlohmann::json::array();
  for (size_t p = 0; p < runs.size(); ++p)
    for (const SimulatedRun& r : runs[p]) {
      nlohmann::json e = resultJson(r, o.launches);
      e["profile"] = models[p].profile;
      j["results"].push_back(e);
    }

  const bool several = models.size() > 1;
  for (size_t p = 0; p < runs.size(); ++p) {
    const std::string title = fmt::format("fbl-bench cache {} on {} (simulated on Oclgrind: {} work-items in {:.1f} s)",
                                          o.form == "model" ? o.input : o.form, models[p].profile, workItems, wall);
    if (o.json != "-") printRuns(title, runs[p]);
    if (!o.svg.empty()) {
      const std::string svg = o.form == "patterns" ? patternsSvg(title, runs[p]) : figure15Svg(title, runs[p], "fblayout");
      if (Status e = writeTextFile(perProfilePath(o.svg, models[p].profile, several), svg); !e.ok()) return fail(e.error().message);
    }
  }
  if (o.json == "-") fmt::print("{}\n", j.dump(1));
  else if (!o.json.empty())
    if (Status e = writeTextFile(o.json, j.dump(1) + "\n"); !e.ok()) return fail(e.error().message);
  return 0;
}

}  // namespace fbl::bench
