// Measuring one strategy (see strategy_run.h):
//
//   1. Compile the model in-process with the strategy and write the plan to a temporary file
//      (the runtime opens plans by path).
//   2. Open it with launch profiling; load the model's weights, or, when the model ships without
//      them (llama-full's external data), small uniform random values from the fixed seed, drawn
//      in plan-tensor order so that every strategy trains the same numbers.
//   3. Train N steps on synthetic inputs (batch k of the seed for step k). Step 1 is timed apart:
//      drivers compile lazily at first launch (PoCL builds each work-group function then).
//      Every step's launch device times are summed by phase and by the launch's kind; steps
//      2..N (or step 1 alone when N = 1) give the per-step means.
//   4. With phaseRounds: N-1 more rounds of forward, backward and optimizer launches through
//      Session::runPhases, each ending in clFinish, so each phase is a wall-clock interval with
//      an idle queue at both ends. (The extra optimizer rounds update the trainables again;
//      the numbers are timings, not a training run.)
//   5. Static figures from the plan: launches, modelled bytes moved (every distinct tensor
//      argument of a launch read or written once, at its planned size), the transform and
//      conversion launches and their bytes, the planned peak (the arena), and a digest of the
//      program and launch list so that identical plans are recognised.
//   6. With unprofiled: the same N steps in a second session without launch profiling, timed by
//      wall clock (a profiling queue costs the driver time per launch: this is an app's step).
//
// Device times come from CL_PROFILING_COMMAND_START/END of each launch's event; they exclude
// the host's enqueue cost and the gaps between launches, which the wall-clock step time keeps.
#include "bench/strategy_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <fmt/format.h>

#include "compiler/driver/compile_command.h"
#include "compiler/quant/base_weights.h"
#include "compiler/strategy/strategy.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "runtime/plan_file.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"

namespace fbl::bench {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t planDigest(const planfile::Plan& p) {
  uint64_t h = planfile::fnv1a64(p.program.data(), p.program.size());
  auto mix = [&h](const std::string& s) { h = planfile::fnv1a64(s.data(), s.size(), h); };
  mix(std::to_string(p.arenaBytes));
  for (const planfile::Launch& l : p.launches) {
    mix(l.phase + "|" + p.kernelNames[l.kernel] + "|" + l.kind);
    for (const auto* v : {&l.global, &l.local})
      for (int64_t x : *v) mix(std::to_string(x));
    for (int32_t a : l.args)
      mix(std::to_string(p.tensors[a].offset) + ":" + std::to_string(p.tensors[a].bytes) + ":" + p.tensors[a].storage +
          std::to_string(p.tensors[a].imageSlot));
  }
  return h;
}

void staticFigures(const planfile::Plan& p, StrategyRun* r) {
  r->launchesPerStep = static_cast<int64_t>(p.launches.size());
  r->commits = static_cast<int64_t>(p.commits.size());
  r->kernels = static_cast<int64_t>(p.kernelNames.size());
  r->peakBytes = p.arenaBytes + p.imageBytes();
  r->imageBytes = p.imageBytes();
  r->storage = p.imageSlots.empty() ? "buffer" : "image";
  for (const planfile::Tensor& t : p.tensors) r->imageTensors += t.image();
  r->planDigest = planDigest(p);
  for (const planfile::Launch& l : p.launches) {
    ++r->launchesByPhase[l.phase];
    ++r->launchesByKind[l.kind];
    int64_t bytes = 0;
    for (int32_t a : std::set<int32_t>(l.args.begin(), l.args.end()))
      bytes += p.tensors[a].image() ? p.tensors[a].imageWidth * p.tensors[a].imageHeight * 16 : p.tensors[a].bytes;
    r->bytesMoved += bytes;
    if (isLayoutKind(l.kind)) {
      ++r->layoutLaunches;
      ++r->layoutLaunchesByPhase[l.phase];
      r->layoutBytes += bytes;
    }
  }
  for (const auto& c : p.commits) r->bytesMoved += 2 * p.tensors[c[1]].bytes;
}

// Small uniform values for every weight and trainable the plan names (floats; other dtypes 0).
Status randomWeights(const planfile::Plan& p, uint64_t seed, const std::string& path) {
  std::mt19937_64 rng(seed ^ 0x5eedf00dull);
  std::uniform_real_distribution<float> u(-0.02f, 0.02f);
  safetensors::File f;
  for (const planfile::Tensor& t : p.tensors) {
    if (t.source.empty() || f.tensors.count(t.source)) continue;
    safetensors::Entry e;
    e.dtype = safetensors::fromFblDType(t.dtype);
    e.shape = t.shape;
    e.data.assign(static_cast<size_t>(planfile::logicalBytes(t)), 0);
    if (t.dtype == "f32") {
      auto* x = reinterpret_cast<float*>(e.data.data());
      for (size_t i = 0; i < e.data.size() / sizeof(float); ++i) x[i] = u(rng);
    }
    if (!t.encoding.empty()) {
      // A base weight stored narrower: the random values encoded as the plan stores them.
      const layout::Encoding enc{planfile::encodingBits(t.encoding), t.groupSize, t.groupAxis, t.shape[0], t.shape[1]};
      auto bytes = quant::encode(t.source, {reinterpret_cast<const float*>(e.data.data()), e.data.size() / sizeof(float)}, enc);
      if (!bytes.ok()) return bytes.error();
      e.dtype = "U8";
      e.shape = {static_cast<int64_t>(bytes->size())};
      e.data.assign(bytes->begin(), bytes->end());
    }
    f.tensors[t.source] = std::move(e);
  }
  f.metadata["format"] = "pt";
  return safetensors::write(path, f);
}

// Batch `step` of the seed for every plan input; the plan's inputs are the graph's, in order.
Status feed(rt::Session& s, const ir::Graph& g, uint64_t seed, int64_t step) {
  const planfile::Plan& p = s.plan();
  if (g.inputs.size() != p.inputs.size())
    return Error{fmt::format("the graph has {} inputs but the plan {}", g.inputs.size(), p.inputs.size())};
  auto batch = zoo::syntheticInputs(g, seed, step);
  if (!batch.ok()) return batch.error();
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const planfile::Tensor& t = p.tensors[p.inputs[i]];
    const ir::Tensor& x = batch.value().at(g.inputs[i]);
    if (x.nbytes() != static_cast<size_t>(t.bytes) || std::string(ir::dtypeName(x.dtype())) != t.dtype)
      return Error{fmt::format("synthetic input {} does not match the plan's input '{}'", i, t.name)};
    FBL_TRY(s.writeTensor(t.name, x.raw(), x.nbytes()));
  }
  return Status::success();
}

struct TempFiles {
  std::vector<std::string> paths;
  std::string make(const std::string& what) {
    paths.push_back((fs::temp_directory_path() / fmt::format("fbl-bench-{}-{}", ::getpid(), what)).string());
    return paths.back();
  }
  ~TempFiles() {
    std::error_code ec;
    for (const auto& p : paths) fs::remove(p, ec);
  }
};

// Adds one call's launch times to the per-phase, per-kind and layout sums.
void addTimes(const rt::Session& s, StrategyRun* r) {
  const planfile::Plan& p = s.plan();
  for (const rt::LaunchTime& t : s.launchTimes()) {
    const planfile::Launch& l = p.launches[t.launch];
    r->deviceS += t.seconds;
    r->deviceSByPhase[l.phase] += t.seconds;
    r->deviceSByKind[l.kind] += t.seconds;
    const std::string& k = p.kernelNames[l.kernel];  // k<i>_<tag><entry>
    r->deviceSByKernel[l.phase + "/" + k.substr(k.find('_') + 1)] += t.seconds;
    r->deviceSByNode[l.phase + "/" + l.node] += t.seconds;
    if (isLayoutKind(l.kind)) {
      r->layoutS += t.seconds;
      r->layoutSByPhase[l.phase] += t.seconds;
    }
  }
}

void scaleTimes(double by, StrategyRun* r) {
  r->deviceS *= by;
  r->layoutS *= by;
  for (auto* m : {&r->deviceSByPhase, &r->deviceSByKind, &r->layoutSByPhase, &r->deviceSByKernel, &r->deviceSByNode})
    for (auto& [k, v] : *m) v *= by;
}

// Step 4: each phase alone, N-1 rounds, wall clock between idle queues.
Status timePhases(rt::Session& s, const ir::Graph& g, const RunOptions& o, StrategyRun* r) {
  std::map<std::string, std::vector<double>> phases;
  for (int k = 0; k < std::max(1, o.steps - 1); ++k) {
    FBL_TRY(feed(s, g, o.seed, k));
    for (const char* ph : {"forward", "backward", "optimizer"}) {
      const auto t0 = Clock::now();
      FBL_TRY(s.runPhases({ph}));
      phases[ph].push_back(secondsSince(t0));
    }
  }
  for (const auto& [ph, v] : phases) r->phaseS[ph] = median(v);
  return Status::success();
}

// Step 6: the same steps on a session without launch profiling, timed by wall clock; the median
// of steps 2..N (or step 1 alone) is what an app sees.
Status timeUnprofiled(const RunOptions& o, const ir::Graph& g, const std::string& planPath,
                      const std::string& weights, StrategyRun* r) {
  rt::OpenOptions oo;
  oo.device = o.device;
  FBL_ASSIGN(const std::unique_ptr<rt::Session> s, rt::Session::open(planPath, oo));
  FBL_TRY(s->loadWeights(weights));
  std::vector<double> times;
  for (int k = 0; k < o.steps; ++k) {
    FBL_TRY(feed(*s, g, o.seed, k));
    const auto t0 = Clock::now();
    float loss = 0;
    FBL_TRY(s->trainStep(&loss));
    if (k > 0 || o.steps == 1) times.push_back(secondsSince(t0));
  }
  r->unprofiledStepS = median(times);
  return Status::success();
}

}  // namespace

Status expandStrategies(const std::vector<std::string>& requested, std::vector<std::string>* out) {
  out->clear();
  for (const std::string& st : requested.empty() ? std::vector<std::string>{"all"} : requested) {
    if (st == "all") {
      for (strategy::Strategy s : strategy::kAllStrategies) out->push_back(strategy::strategyName(s));
    } else if (strategy::parseStrategy(st).ok()) {
      out->push_back(st);
    } else {
      return Error{fmt::format("--strategy must be all, {}, not '{}'", strategy::strategyNameList(), st)};
    }
  }
  return Status::success();
}

Status runStrategy(const RunOptions& o, const ir::Graph& g, StrategyRun* r) {
  TempFiles tmp;
  r->strategy = o.strategy;
  r->variant = o.variant;
  r->disabledPasses = o.disabledPasses;
  r->labelStorage = o.labelStorage;
  r->baseWeights = o.baseWeights;
  r->labelBaseWeights = o.labelBaseWeights;
  r->precision = o.precision;
  r->labelPrecision = o.labelPrecision;
  driver::CompileArgs ca;
  ca.model = o.model;
  ca.profile = o.profile;
  ca.allowOverLimit = true;  // benchmarks run on the machine at hand, whatever profile they tune for
  ca.strategy = o.strategy;
  ca.storage = o.storage;
  ca.disabledPasses = o.disabledPasses;
  ca.recomputeSegments = o.recompute;
  ca.stagingBytes = o.stagingBytes;
  ca.lossChunkRows = o.lossChunkRows;
  ca.baseWeights = o.baseWeights;
  ca.precision = o.precision;
  auto c = driver::compileModel(ca);
  if (!c.ok()) return c.error();
  r->recomputedSegments = c->recompute.segments;
  r->compileS = c->seconds;
  staticFigures(c->plan, r);
  const std::string planPath = tmp.make("plan.fbp");
  FBL_TRY(safetensors::writeFileAtomic(planPath, planfile::serialize(c->plan)));
  rt::OpenOptions oo;
  oo.device = o.device;
  oo.profileLaunches = true;
  FBL_ASSIGN(std::unique_ptr<rt::Session> s, rt::Session::open(planPath, oo));
  r->device = s->device().name + " (" + s->device().platform + ")";
  ca.weights = tmp.make("weights.safetensors");
  if (Status st = driver::writeWeights(ca, s->plan()); !st.ok()) {
    r->randomWeights = true;
    r->weightsNote = st.error().message;
    FBL_TRY(randomWeights(s->plan(), o.seed, ca.weights));
  }
  const auto loadStart = Clock::now();
  FBL_TRY(s->loadWeights(ca.weights));
  r->loadWeightsS = secondsSince(loadStart);

  const planfile::Plan& p = s->plan();
  r->stagingBytes = p.staging >= 0 ? p.tensors[p.staging].bytes : 0;
  const int64_t batch = p.inputs.empty() || p.tensors[p.inputs[0]].shape.empty() ? 1 : p.tensors[p.inputs[0]].shape[0];
  std::vector<double> stepTimes;
  for (int k = 0; k < o.steps; ++k) {
    FBL_TRY(feed(*s, g, o.seed, k));
    const auto t0 = Clock::now();
    float loss = 0;
    FBL_TRY(s->trainStep(&loss));
    const double t = secondsSince(t0);
    if (k == 0) r->firstStepS = t, r->firstLoss = loss;
    else stepTimes.push_back(t);
    r->lastLoss = loss;
    // Step 1's times count only when it is the only step.
    if (k > 0 || o.steps == 1) addTimes(*s, r), ++r->timedSteps;
  }
  scaleTimes(1.0 / r->timedSteps, r);
  r->stepS = stepTimes.empty() ? r->firstStepS : median(stepTimes);
  r->samplesPerS = r->stepS > 0 ? static_cast<double>(std::max<int64_t>(1, batch)) / r->stepS : 0.0;

  if (o.phaseRounds) {
    FBL_TRY(timePhases(*s, g, o, r));
  }
  if (!o.unprofiled) return Status::success();
  s.reset();  // one arena at a time on the device
  return timeUnprofiled(o, g, planPath, ca.weights, r);
}

nlohmann::json toJson(const StrategyRun& r) {
  nlohmann::json j{{"strategy", r.strategy},
                   {"compile_s", r.compileS},
                   {"load_weights_s", r.loadWeightsS},
                   {"staging_bytes", r.stagingBytes},
                   {"base_weights", r.baseWeights},
                   {"precision", r.precision},
                   {"first_step_s", r.firstStepS},
                   {"step_s", r.stepS},
                   {"unprofiled_step_s", r.unprofiledStepS},
                   {"samples_per_s", r.samplesPerS},
                   {"timed_steps", r.timedSteps},
                   {"device_s", r.deviceS},
                   {"device_s_by_phase", r.deviceSByPhase},
                   {"device_s_by_kind", r.deviceSByKind},
                   {"layout_time_s", r.layoutS},
                   {"layout_time_s_by_phase", r.layoutSByPhase},
                   {"launches_per_step", r.launchesPerStep},
                   {"launches_by_phase", r.launchesByPhase},
                   {"launches_by_kind", r.launchesByKind},
                   {"layout_launches", r.layoutLaunches},
                   {"layout_launches_by_phase", r.layoutLaunchesByPhase},
                   {"layout_bytes_modelled", r.layoutBytes},
                   {"commit_copies_per_step", r.commits},
                   {"kernels", r.kernels},
                   {"bytes_moved_modelled", r.bytesMoved},
                   {"peak_device_bytes", r.peakBytes},
                   {"storage", r.storage},
                   {"image_tensors", r.imageTensors},
                   {"image_bytes", r.imageBytes},
                   {"plan_digest", fmt::format("{:016x}", r.planDigest)},
                   {"first_loss", r.firstLoss},
                   {"last_loss", r.lastLoss},
                   {"random_weights", r.randomWeights}};
  if (!r.phaseS.empty()) j["phase_s"] = r.phaseS;
  if (!r.deviceSByKernel.empty()) {
    j["device_s_by_kernel"] = r.deviceSByKernel;
    std::vector<std::pair<double, std::string>> nodes;
    for (const auto& [n, t] : r.deviceSByNode) nodes.emplace_back(t, n);
    std::sort(nodes.rbegin(), nodes.rend());
    nlohmann::json top = nlohmann::json::array();
    for (size_t i = 0; i < nodes.size() && i < 12; ++i) top.push_back({{"node", nodes[i].second}, {"device_s", nodes[i].first}});
    j["slowest_nodes"] = top;
    j["device_s_by_node"] = r.deviceSByNode;
  }
  if (!r.variant.empty()) j["variant"] = r.variant;
  if (!r.disabledPasses.empty()) j["disabled_passes"] = r.disabledPasses;
  if (r.recomputedSegments > 0) j["recomputed_segments"] = r.recomputedSegments;
  if (r.randomWeights) j["weights_note"] = r.weightsNote;
  return j;
}

std::string planComparison(const std::vector<StrategyRun>& runs, bool* identical) {
  std::set<uint64_t> digests;
  std::set<int64_t> launchCounts;
  bool anyLayout = false;
  for (const StrategyRun& r : runs) {
    digests.insert(r.planDigest);
    launchCounts.insert(r.launchesPerStep);
    anyLayout = anyLayout || r.layoutLaunches > 0;
  }
  *identical = runs.size() > 1 && digests.size() == 1;
  std::string s;
  if (*identical)
    s = "the compiler produced the same plan for every strategy (same program and launches): "
        "differences between their rows are noise";
  else if (runs.size() > 1)
    s = fmt::format("{} distinct plans ({} distinct launch counts)", digests.size(), launchCounts.size());
  if (!anyLayout)
    s += std::string(s.empty() ? "" : "; ") +
         "no launch is marked transform or conversion, so the layout-transformation time is 0 by "
         "construction (the plans do not mark launch kinds, or run no movement kernel)";
  return s;
}

Status writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.good()) return Error{fmt::format("cannot write '{}'", path)};
  return Status::success();
}

Status finishReport(nlohmann::json& report, double wallSeconds, const std::string& jsonPath) {
  report["wall_s"] = wallSeconds;
  fmt::print("({:.1f} s)\n", wallSeconds);
  if (jsonPath.empty()) return Status::success();
  return writeTextFile(jsonPath, report.dump(1) + "\n");
}

}  // namespace fbl::bench
