#include "compiler/driver/compile_command.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "compiler/driver/compile_report.h"
#include "compiler/onnx/external_data.h"
#include "compiler/passes/differentiate.h"
#include "compiler/passes/fuse_attention.h"
#include "compiler/passes/layout_assignment_printer.h"
#include "compiler/passes/layout_pipeline.h"
#include "compiler/passes/load_model.h"
#include "compiler/passes/pack_saved.h"
#include "compiler/passes/recompute.h"
#include "compiler/plan/layout_lowering.h"
#include "compiler/profile/profile.h"
#include "compiler/quant/base_weights.h"
#include "compiler/report/explain.h"
#include "compiler/strategy/strategy.h"
#include "runtime/plan_check.h"
#include "runtime/safetensors.h"

namespace fbl::driver {

// What the driver takes from the planner (compiler/plan/).
using plan::BuildStats;
using plan::buildPlan;
using plan::LayoutLowering;
using plan::LoweringOptions;
using plan::LoweringPasses;
using plan::Plan;
using plan::PlanInputs;
using plan::plannerProfile;
using plan::Profile;
using plan::trainingInputs;

namespace {

std::string weightsPath(const CompileArgs& a) {
  if (!a.weights.empty()) return a.weights;
  return std::filesystem::path(a.output).replace_extension(".safetensors").string();
}

std::string modelName(const std::string& path) {
  // tests/data/llama-tiny/model.onnx -> llama-tiny: the folder names a corpus model.
  std::filesystem::path p(path);
  if (p.stem() == "model" && p.has_parent_path()) return p.parent_path().filename().string();
  return p.stem().string();
}

std::vector<std::string> splitGlobs(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string g = s.substr(start, end - start);
    g.erase(0, g.find_first_not_of(" \t"));
    g.erase(g.find_last_not_of(" \t") + 1);
    if (!g.empty()) out.push_back(g);
    start = end + 1;
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> trainableGlobs(const CompileArgs& args) {
  if (!args.trainable.empty()) return args.trainable;
  // The metadata lives in the ModelProto, which the graph does not keep: parse it once more
  // (external weights stay on disk, so this is the graph's size, not the model's).
  std::ifstream in(args.model, std::ios::binary);
  ::onnx::ModelProto m;
  if (in && m.ParseFromIstream(&in))
    for (const auto& p : m.metadata_props())
      if (p.key() == "fbl.trainable") {
        std::vector<std::string> globs = splitGlobs(p.value());
        if (globs.empty()) return makeError("{}: metadata fbl.trainable names no glob", args.model);
        return globs;
      }
  // An unreadable model falls through: loadModel reports it with its own message.
  return autodiff::peftTrainableGlobs();
}

Result<bool> useImages(const std::string& storage, const profile::HardwareProfile& hw) {
  if (storage == "buffer") return false;
  if (storage == "auto") return hw.imageStorage.supported && hw.imageStorage.textureCache;
  if (storage != "image") return makeError("--storage must be buffer, image or auto, not '{}'", storage);
  if (!hw.imageStorage.supported) return makeError("--storage image: profile '{}' says the device has no images", hw.name);
  return true;
}

namespace {

// Every pass of `fblc compile`, in order, over one graph that autodiff turns from the forward
// into the joint graph: load (load_model.h: fold-and-infer, decompose-ops, drop-noops,
// dead-code), fuse-attention and chunk-loss (fblayout only), autodiff (differentiate.h),
// recompute (recompute.h), schedule-loss-chunks (chunk_loss.h), pack-saved (pack_saved.h), the
// layout pipeline (layout_pipeline.h), the lowering (plan/layout_lowering.h).
struct CompilePipeline {
  CompilePipeline(strategy::Strategy strategy, const profile::HardwareProfile& hw, const autodiff::TrainingOptions& to)
      : autodiff(to, mustExist, lowerOpts.host), layout(assignment, hw), lowering(assignment, mustExist, lowerOpts) {
    assignment.strategy = strategy;
    assignment.profile = hw.name;
  }
  // Adds the passes; a baseline strategy disables fuse-attention and the optional layout passes.
  void addTo(passes::PassManager& pm) {
    load.addTo(pm);
    pm.add(fuseAttention);
    pm.add(chunkLoss);
    pm.add(splitRows);
    pm.add(autodiff, passes::PassSpec::required("the plan trains: every later pass works on the joint graph"));
    pm.add(recompute);
    pm.add(scheduleLossChunks);
    pm.add(packSaved);
    layout.addTo(pm);
    lowering.addTo(pm);
  }
  void disableForStrategy(passes::PassOptions& po) const {
    if (assignment.strategy != strategy::Strategy::kFBLayout)
      for (std::string_view name : {passes::FuseAttention::name(), passes::ChunkLoss::name(), passes::ScheduleLossChunks::name()})
        po.disabled.insert(std::string(name));
    layout.disableForStrategy(po);
    lowering.disableForStrategy(po);
  }

  passes::LoadPasses load;
  passes::FuseAttention fuseAttention;
  passes::ChunkLoss chunkLoss;
  passes::SplitRows splitRows{chunkLoss};
  passes::ScheduleLossChunks scheduleLossChunks{chunkLoss};
  std::vector<ir::ValueId> mustExist;
  passes::PackSaved packSaved{mustExist};
  LoweringOptions lowerOpts;
  passes::Differentiate autodiff;
  passes::Recompute recompute{chunkLoss};
  passes::LayoutAssignment assignment;
  passes::LayoutPasses layout;
  LoweringPasses lowering;
};

}  // namespace

std::vector<std::string> compilePassNames() {
  profile::HardwareProfile hw;
  autodiff::TrainingOptions to;
  CompilePipeline p(strategy::Strategy::kFBLayout, hw, to);
  passes::PassManager pm;
  p.addTo(pm);
  return pm.names();
}

// The runtime's own checks (runtime/plan_check.h) on the plan as it will read it: a plan it would
// refuse is refused here (a gradient whose shape is not its trainable's among them).
static Status checkForRuntime(const CompileArgs& args, const Plan& plan) {
  const Result<planfile::Plan> read = rt::loadPlan(planfile::serialize(plan), args.output, nullptr);
  if (!read.ok()) return makeError("{}: the plan fails the runtime's checks: {}", args.model, read.error().message);
  return Status::success();
}

// The report's `loss_chunks`: each loss the head runs in chunks for (chunk_loss.h).
static nlohmann::json lossChunksJson(const Compiled& c) {
  nlohmann::json j = nlohmann::json::array();
  for (const passes::ChunkLoss::Chunked& l : c.lossChunks)
    j.push_back({{"loss", l.loss}, {"rows", l.rows}, {"chunks", l.chunks}, {"tokens", l.tokens}, {"vocab", l.vocab},
                 {"backward_nodes_moved", c.lossChunkNodesMoved}});
  return j;
}

// The whole pipeline once, recomputing `recompute` segments (passes::Recompute::count).
static Result<Compiled> compileWith(const CompileArgs& args, const profile::HardwareProfile& hw, int64_t recompute) {
  FBL_ASSIGN(Profile profile, plannerProfile(hw, args.profile));
  passes::LoadOptions lo;
  lo.shapeOverrides = args.shapes;
  lo.simplify = false;  // the load passes run in the pipeline below
  FBL_ASSIGN(ir::Graph g, passes::loadModel(args.model, lo));
  Compiled c;
  autodiff::TrainingOptions to;
  FBL_ASSIGN(to.trainableGlobs, trainableGlobs(args));
  FBL_ASSIGN(to.optimizer, autodiff::optimizerOptions(args));
  FBL_ASSIGN(strategy::Strategy strategy, strategy::parseStrategy(args.strategy));
  CompilePipeline p(strategy, hw, to);
  p.recompute.count = recompute;
  p.autodiff.keepOutputs = args.keepOutputs;
  // Outputs kept for the app are the whole logits. Chunks re-read the head's weight once per
  // chunk (a step 1.07x longer on an H100, docs/results/memory.md), so auto takes them only where
  // memory is capped: a profile with an app budget (a phone), or a --memory-budget.
  FBL_ASSIGN(p.chunkLoss.rows, passes::parseLossChunkRows(args.lossChunkRows));
  if (p.chunkLoss.rows < 0 && !hw.memory.appBudgetBytes && args.memoryBudget.empty()) p.chunkLoss.rows = 0;
  if (args.keepOutputs) p.chunkLoss.rows = 0;
  p.chunkLoss.trainableGlobs = to.trainableGlobs;
  p.autodiff.adapterOpts.loraAlpha = args.loraAlpha;
  FBL_ASSIGN(p.autodiff.baseWeights, quant::parseBaseWeights(args.baseWeights, args.baseWeightsGroup));
  // No tensor's slot may straddle a pool (plan/memory_planner.h): blocks fit the aligned limit.
  if (hw.memory.maxAllocBytes)
    p.splitRows.maxBytes = *hw.memory.maxAllocBytes / profile.bufferAlignment * profile.bufferAlignment;
  p.splitRows.base = p.autodiff.baseWeights;
  p.splitRows.trainableGlobs = to.trainableGlobs;
  FBL_ASSIGN(p.packSaved.format, passes::parsePrecision(args.precision));
  FBL_ASSIGN(p.lowerOpts.storage.images, useImages(args.storage, hw));
  p.lowerOpts.storage.maxImageWidth = hw.image2dMaxWidth;
  p.lowerOpts.storage.maxImageHeight = hw.image2dMaxHeight;
  p.lowerOpts.storage.maxImageBytes = hw.memory.maxAllocBytes.value_or(0);
  p.lowerOpts.storage.blockW = hw.textureBlock.w;
  p.lowerOpts.storage.blockH = hw.textureBlock.h;
  if (profile.matmul.narrow.kContiguousWeights) p.lowerOpts.narrowWeightSide = profile.matmul.narrow.maxSide;
  passes::PassOptions po;
  // --dump-after names a pass or a plan builder step (plan_builder.h), or "all"; the pass
  // manager checks the names.
  po.dumpAfter.insert(args.dumpAfter.begin(), args.dumpAfter.end());
  po.planSteps = plan::planSteps();
  po.sink = args.dumpSink;
  po.disabled.insert(args.disabledPasses.begin(), args.disabledPasses.end());
  if (args.verifyPasses) po.verify = true;
  p.disableForStrategy(po);
  passes::PassManager pm(po);
  p.addTo(pm);
  FBL_ASSIGN(c.passes, pm.run(g));
  autodiff::TrainingGraph& tg = p.autodiff.tg;
  tg.graph = std::move(g);
  const passes::LayoutAssignment& assignment = p.assignment;
  p.layout.noteDisabled(c.passes);
  c.transforms = passes::transformsToJson(tg.graph, assignment);
  c.passTimesMs = nlohmann::json::object();
  const std::vector<std::string> layoutNames = passes::layoutPassNames();
  for (const passes::PassRun& run : c.passes)
    if (std::find(layoutNames.begin(), layoutNames.end(), run.name) != layoutNames.end())
      c.passTimesMs[run.name] = run.ran ? run.ms : 0.0;
  auto ran = [&](std::string_view name) {
    return std::any_of(c.passes.begin(), c.passes.end(), [&](const passes::PassRun& r) { return r.name == name && r.ran; });
  };
  if (ran(passes::FuseAttention::name())) {
    c.attentionFused = p.fuseAttention.counts().fused;
    c.attentionSummary = p.fuseAttention.summary();
  }
  if (ran(passes::ChunkLoss::name())) c.lossChunks = p.chunkLoss.chunked();
  if (ran(passes::ScheduleLossChunks::name())) c.lossChunkNodesMoved = p.scheduleLossChunks.moved();
  c.precision = args.precision;
  c.packedValues = p.packSaved.packed();
  c.packedBytes = p.packSaved.packedBytes();
  if (ran(passes::SplitRows::name()) && !p.splitRows.blocks().empty()) {
    c.rowBlocks = p.splitRows.blocks();
    c.rowBlocksSummary = p.splitRows.summary();
  }
  LayoutLowering& lowering = p.lowering.result();
  c.lowering = lowering.counts;
  PlanInputs in = trainingInputs(tg, modelName(args.model));
  in.adapterConfig = p.autodiff.adapter.config;
  in.adapterRefusal = p.autodiff.adapter.refusal;
  in.adapterFrozen = p.autodiff.adapter.frozen;
  in.outputs = p.autodiff.outputs;
  in.lostInputBounds = p.splitRows.lostBounds();
  in.lowering = &lowering;
  in.stagingBytes = args.stagingBytes;
  FBL_ASSIGN(c.plan, buildPlan(in, profile, &c.stats, &po));
  c.plan.explain = report::explainSection(tg.graph, assignment);  // for `fblc explain`
  for (const auto& [v, why] : lowering.storageWhy) c.plan.explain["storage_why"][tg.graph.values[v].name] = why;
  c.storage = storageReport(tg, c.plan, c.stats);
  c.storage["base_weights"] = baseWeightsReport(args.baseWeights, p.autodiff.encodings, p.autodiff.encodingsSkipped, c.plan);
  // What the weights file holds for each encoded initializer (collectWeights), and what explain shows.
  for (const auto& [name, e] : p.autodiff.encodings)
    c.plan.explain["base_weights"][name] = {{"bits", e.bits}, {"group", e.group}, {"axis", e.axis}};
  // Where each row block's data comes from (collectWeights), and what explain shows.
  for (const passes::SplitRows::Block& b : c.rowBlocks)
    c.plan.explain["row_blocks"][b.name] = {{"of", b.of}, {"row", b.row}, {"rows", b.rows}};
  c.plan.optimizer["kind"] = args.optimizer;
  c.plan.optimizer["lr"] = args.lr;
  c.plan.optimizer["weight_decay"] = args.weightDecay;
  if (args.optimizer == "sgd") c.plan.optimizer["momentum"] = args.momentum;
  c.plan.loop.gradAccum = args.gradAccum;
  c.plan.loop.clipGradNorm = args.clipGradNorm;
  c.plan.loop.schedule = args.lrSchedule;
  if (!args.lrSchedule.empty()) {
    c.plan.loop.lr = args.lr;
    c.plan.loop.warmupSteps = args.warmupSteps;
    c.plan.loop.totalSteps = args.totalSteps;
  }
  FBL_TRY(checkForRuntime(args, c.plan));
  c.memory = report::memoryReport(c.plan, hw.memory);
  c.recompute = p.recompute.summary;
  return c;
}

Result<int64_t> memoryBudgetBytes(const std::string& budget, const profile::HardwareProfile& hw) {
  if (budget.empty() || budget == "none") return int64_t{0};
  if (budget == "auto") {
    if (!hw.memory.appBudgetBytes)
      return makeError("--memory-budget auto: profile '{}' gives no memory.app_budget_bytes; give the budget in bytes", hw.name);
    return *hw.memory.appBudgetBytes;
  }
  // Bytes, or a number with a decimal (kB, MB, GB) or binary (KiB, MiB, GiB) unit.
  static const std::pair<const char*, double> units[] = {{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                                                         {"kB", 1e3},     {"MB", 1e6},        {"GB", 1e9}};
  double scale = 1;
  std::string number = budget;
  for (const auto& [unit, factor] : units) {
    const std::string u(unit);
    if (number.size() > u.size() && number.compare(number.size() - u.size(), u.size(), u) == 0) {
      number.resize(number.size() - u.size());
      scale = factor;
      break;
    }
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !(value > 0) || value * scale > 9e18)
    return makeError("--memory-budget '{}' is not a positive number of bytes (e.g. 5500000000, 5.5GB, 4GiB), auto or none",
                     budget);
  return static_cast<int64_t>(value * scale);
}

// `given` with the profile's compile_defaults in the options CompileArgs::fromProfile names, and
// --memory-budget none as no budget; `applied` gets the defaults taken, as options.
static CompileArgs withProfileDefaults(const CompileArgs& given, const profile::HardwareProfile& hw, std::string* applied) {
  CompileArgs args = given;
  const profile::CompileDefaults& d = hw.compileDefaults;
  if (given.fromProfile.baseWeights && !d.baseWeights.empty()) {
    args.baseWeights = d.baseWeights;
    *applied += " --base-weights " + d.baseWeights;
  }
  if (given.fromProfile.precision && !d.precision.empty()) {
    args.precision = d.precision;
    *applied += " --precision " + d.precision;
  }
  // Without a base on the command line or in the profile, an fp16 plan stores its frozen base fp16.
  if (given.fromProfile.baseWeights && d.baseWeights.empty() && args.precision == "fp16") args.baseWeights = "fp16";
  if (given.fromProfile.memoryBudget && !d.memoryBudget.empty()) {
    args.memoryBudget = d.memoryBudget;
    *applied += " --memory-budget " + d.memoryBudget;
  }
  if (!applied->empty()) applied->erase(0, 1);
  if (args.memoryBudget == "none") args.memoryBudget.clear();
  return args;
}

Result<Compiled> compileModel(const CompileArgs& given) {
  const auto start = std::chrono::steady_clock::now();
  FBL_ASSIGN(profile::HardwareProfile hw, profile::loadProfile(given.profile));
  std::string applied;
  const CompileArgs args = withProfileDefaults(given, hw, &applied);
  FBL_ASSIGN(const int64_t budget, memoryBudgetBytes(args.memoryBudget, hw));
  FBL_ASSIGN(Compiled c, compileWith(args, hw, args.recomputeSegments.value_or(0)));
  if (budget > 0 && !args.recomputeSegments && c.memory.peakBytes > budget) {
    // Whole segments, the largest first: all of them must fit, then as few as fit (the peak
    // falls with each segment, so the search halves the count).
    FBL_ASSIGN(Compiled all, compileWith(args, hw, -1));
    if (all.memory.peakBytes > budget) {
      const report::MemoryReport& m = all.memory;
      const std::pair<const char*, int64_t> roles[] = {{"frozen weights", m.frozenWeightBytes},
                                                       {"the transient peak", m.transientBytes},
                                                       {"trainables and optimizer state", m.trainableBytes + m.optimizerStateBytes},
                                                       {"inputs and constants", m.inputBytes + m.constantBytes}};
      const auto* top = std::max_element(std::begin(roles), std::end(roles),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
      // Frozen weights that dominate at fp32 or fp16 shrink with a narrower base (docs/precision.md).
      const bool narrower = top->second == m.frozenWeightBytes && args.baseWeights != "int4";
      return makeError("{}: --memory-budget {} ({} bytes) cannot be met: with all {} segments recomputed the peak is {}, "
                       "{} over; {} dominate with {} (frozen weights {}, transient peak {}){}",
                       args.model, report::humanBytes(budget), budget, all.recompute.segments,
                       report::humanBytes(m.peakBytes), report::humanBytes(m.peakBytes - budget), top->first,
                       report::humanBytes(top->second), report::humanBytes(m.frozenWeightBytes),
                       report::humanBytes(m.transientBytes),
                       narrower ? fmt::format("; --base-weights int4 stores the frozen weights that products read in "
                                              "about a seventh of fp32's bytes (now {})", args.baseWeights)
                                : "");
    }
    int64_t lo = 1, hi = all.recompute.segments;
    c = std::move(all);
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      FBL_ASSIGN(Compiled fewer, compileWith(args, hw, mid));
      if (fewer.memory.peakBytes <= budget) {
        hi = mid;
        c = std::move(fewer);
      } else {
        lo = mid + 1;
      }
    }
  }
  c.memoryBudget = budget;
  c.profileDefaults = applied;
  if (c.memory.fitsMaxAlloc == false && !args.allowOverLimit) {
    const std::string& source = hw.provenance.at("memory.max_alloc_bytes");
    return makeError("{}: the plan's largest allocation, {} ({} bytes), exceeds the max_alloc_bytes of {}, {} bytes "
                     "({}), so no device of that profile can allocate it; the peak is {}, frozen weights {}, the "
                     "transient region {}. --allow-over-limit writes it anyway, for analysis",
                     args.model, c.memory.largestAllocation, c.memory.largestAllocationBytes, hw.name,
                     *hw.memory.maxAllocBytes, source.substr(0, source.find(':')), report::humanBytes(c.memory.peakBytes),
                     report::humanBytes(c.memory.frozenWeightBytes), report::humanBytes(c.memory.transientBytes));
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

Result<safetensors::File> collectWeights(const CompileArgs& args, const Plan& plan) {
  // A raw import keeps every initializer under its ONNX name; importModel read its external
  // data, and for one whose file is absent loadExternalTensor says so.
  passes::LoadOptions lo;
  lo.simplify = false;
  lo.shapeOverrides = args.shapes;
  FBL_ASSIGN(ir::Graph g, passes::loadModel(args.model, lo));
  // Row blocks (passes/split_rows.h): rows [row, row + rows) of initializer `of`.
  struct RowBlock {
    std::string of;
    int64_t row = 0, rows = 0;
  };
  std::map<std::string, RowBlock> rowBlocks;
  if (plan.explain.is_object() && plan.explain.contains("row_blocks"))
    for (const auto& [name, b] : plan.explain["row_blocks"].items())
      rowBlocks[name] = {b.at("of").get<std::string>(), b.at("row").get<int64_t>(), b.at("rows").get<int64_t>()};
  // The model's matrix a plan tensor is (a row block: its rows), and its [rows, cols].
  auto matrixOf = [&](const std::string& name) -> std::tuple<ir::ValueId, int64_t, int64_t> {
    auto b = rowBlocks.find(name);
    const ir::ValueId v = g.findValue(b == rowBlocks.end() ? name : b->second.of);
    if (v == ir::kNoValue || g.values[v].shape.size() != 2) return {v, 0, 0};
    return {v, b == rowBlocks.end() ? g.values[v].shape[0] : b->second.rows, g.values[v].shape[1]};
  };
  std::map<std::string, layout::Encoding> encodings;
  if (plan.explain.is_object() && plan.explain.contains("base_weights"))
    for (const auto& [name, e] : plan.explain["base_weights"].items()) {
      const int bits = e.at("bits").get<int>();
      const auto [v, rows, cols] = matrixOf(name);
      if (v == ir::kNoValue || cols == 0)
        return makeError("{}: base weight '{}' is not a matrix of the model", args.model, name);
      encodings[name] = layout::Encoding{bits, e.at("group").get<int64_t>(), e.at("axis").get<int>(), rows, cols};
    }
  std::string loadedName;  // the last whole matrix loaded, for its next row block
  ir::Tensor loaded;
  safetensors::File f;
  for (const planfile::Tensor& t : plan.tensors) {
    if (t.source.empty()) continue;
    const auto block = rowBlocks.find(t.source);
    const std::string& whole = block == rowBlocks.end() ? t.source : block->second.of;
    const ir::ValueId v = g.findValue(whole);
    if (v == ir::kNoValue) return makeError("{}: initializer '{}' not found", args.model, whole);
    ir::Tensor data;
    if (loadedName != whole) {
      if (g.values[v].data) {
        loaded = *g.values[v].data;
      } else if (g.values[v].external) {
        FBL_ASSIGN(loaded, onnx::loadExternalTensor(g, v));
      } else {
        return makeError("{}: initializer '{}' has no data", args.model, whole);
      }
      loadedName = whole;
    }
    if (block == rowBlocks.end()) {
      data = loaded;
    } else {
      const RowBlock& b = block->second;
      if (loaded.rank() != 2 || b.row < 0 || b.rows < 1 || b.row + b.rows > loaded.shape()[0])
        return makeError("{}: row block '{}' is not rows of '{}'", args.model, t.source, whole);
      data = ir::Tensor(loaded.dtype(), {b.rows, loaded.shape()[1]});
      const size_t rowBytes = loaded.nbytes() / static_cast<size_t>(loaded.shape()[0]);
      std::memcpy(data.raw(), loaded.raw() + static_cast<size_t>(b.row) * rowBytes, static_cast<size_t>(b.rows) * rowBytes);
    }
    safetensors::Entry e;
    e.dtype = safetensors::fromFblDType(std::string(ir::dtypeName(data.dtype())));
    e.shape = data.shape();
    const auto* p = reinterpret_cast<const unsigned char*>(data.raw());
    e.data.assign(p, p + data.nbytes());
    // --base-weights: the encoded bytes, or the values they decode to where the plan keeps f32.
    if (auto enc = encodings.find(t.source); enc != encodings.end()) {
      if (data.dtype() != ir::DType::F32) return makeError("{}: initializer '{}' is not f32", args.model, t.source);
      FBL_ASSIGN(std::vector<uint8_t> bytes,
                 quant::encode(t.source, {data.data<float>(), static_cast<size_t>(data.numel())}, enc->second));
      if (!t.encoding.empty()) {
        e.dtype = "U8";
        e.shape = {static_cast<int64_t>(bytes.size())};
        e.data.assign(bytes.begin(), bytes.end());
      } else {
        const std::vector<float> decoded = quant::decode(bytes, enc->second);
        e.data.assign(reinterpret_cast<const unsigned char*>(decoded.data()),
                      reinterpret_cast<const unsigned char*>(decoded.data() + decoded.size()));
      }
    }
    f.tensors[t.source] = std::move(e);
  }
  f.metadata["format"] = "pt";
  f.metadata["source"] = std::filesystem::path(args.model).filename().string();
  safetensors::addChecksum(&f);  // the runtime refuses the file if a bit of it changes
  return f;
}

Status writeWeights(const CompileArgs& args, const Plan& plan) {
  FBL_ASSIGN(safetensors::File f, collectWeights(args, plan));
  return safetensors::write(weightsPath(args), f);
}

int runCompile(const CompileArgs& args) {
  if (args.noWeights && !args.weights.empty()) {
    fmt::print(stderr, "error: give --weights or --no-weights, not both\n");
    return 2;
  }
  auto c = compileModel(args);
  if (!c.ok()) {
    fmt::print(stderr, "error: {}\n", c.error().message);
    return 1;
  }
  const std::string bytes = planfile::serialize(c->plan);
  // The weights first, read whole before anything is written: a plan is written only once its
  // weights are (each file atomically), so a failed compile leaves no new plan without weights.
  std::string weightsNote = "not written (--no-weights)";
  if (!args.noWeights) {
    auto w = collectWeights(args, c->plan);
    if (!w.ok()) {
      fmt::print(stderr, "error: {}; nothing written (--no-weights writes the plan alone, for a model without weights)\n",
                 w.error().message);
      return 1;
    }
    weightsNote = weightsPath(args);
    if (Status e = safetensors::write(weightsNote, *w, "the weights"); !e.ok()) {
      fmt::print(stderr, "error: weights: {}; the plan was not written\n", e.error().message);
      return 1;
    }
  }
  if (Status e = safetensors::writeFileAtomic(args.output, bytes, "the plan"); !e.ok()) {
    fmt::print(stderr, "error: {}{}\n", e.error().message, args.noWeights ? "" : fmt::format(" (the weights were written to '{}')", weightsNote));
    return 1;
  }
  if (c->transforms.is_object() && c->transforms.contains("total"))
    fmt::print("layout ({}): {} transformations, {} eliminated, {} explicit; plan: {} movement kernels, {} "
               "conversion copies, {} reads through maps ({} transposed), {} movement ops not executed, {} R-Tile "
               "tensors ({} kept row-major); {} elementwise nodes fused into {} MatMuls and {} other kernels; {} low-rank "
               "products added inside others\n",
               args.strategy, c->transforms.value("total", 0), c->transforms.value("eliminated", 0),
               c->transforms.value("explicit", 0), c->lowering.movementKernels, c->lowering.materialised,
               c->lowering.readsThrough, c->lowering.transposedReads, c->lowering.skippedNodes,
               c->lowering.rtileValues, c->lowering.rtileDemoted, c->lowering.fusedNodes, c->lowering.fusedMatmuls,
               c->lowering.fusedElementwise, c->lowering.lowRankTerms);
  if (!c->attentionSummary.empty()) fmt::print("fuse-attention: {}\n", c->attentionSummary);
  if (!c->rowBlocksSummary.empty()) fmt::print("split-rows: {}\n", c->rowBlocksSummary);
  for (const passes::ChunkLoss::Chunked& l : c->lossChunks)
    fmt::print("chunk-loss: {} in {} chunks of {} rows ({} x {} logits), each chunk's gradient taken in the forward "
               "pass ({} nodes moved)\n",
               l.loss, l.chunks, l.rows, l.tokens, l.vocab, c->lossChunkNodesMoved);
  fmt::print("{}: {} kernels, {} launches, arena {} bytes ({} persistent), {} images ({} bytes), {:.2f} s\nweights: {}\n",
             args.output, c->stats.kernels, c->stats.launches, c->plan.arenaBytes, c->stats.persistentBytes,
             c->plan.imageSlots.size(), c->plan.imageBytes(), c->seconds, weightsNote);
  fmt::print("{}\n", report::memorySummaryLine(c->memory, c->plan.profile));
  if (!c->profileDefaults.empty())
    fmt::print("{}'s compile defaults: {} (docs/profiles.md; the command line overrides them: --base-weights fp32, "
               "--precision fp32, --memory-budget none)\n",
               c->plan.profile, c->profileDefaults);
  if (const nlohmann::json& b = c->storage["base_weights"]; b["option"] != "fp32") {
    const size_t decoded = b["decoded_but_stored_f32"].size(), left = b["left_f32"].size();
    fmt::print("base weights: {} matrices stored {}, {} ({} as f32){}{}\n", b["encoded"].get<int64_t>(),
               b["option"].get<std::string>(), report::humanBytes(b["encoded_bytes"].get<int64_t>()),
               report::humanBytes(b["f32_bytes_of_those"].get<int64_t>()),
               decoded ? fmt::format("; {} decoded but stored f32", decoded) : "",
               left ? fmt::format("; {} frozen matrices left f32 (the report's storage.base_weights says why)", left) : "");
  }
  if (c->precision != "fp32")
    fmt::print("precision: {} values the backward pass reads kept {} between the passes, {} ({} as f32); "
               "everything computes in f32\n",
               c->packedValues, c->precision, report::humanBytes(c->packedBytes / 2), report::humanBytes(c->packedBytes));
  if (c->recompute.segments > 0 || c->memoryBudget > 0)
    fmt::print("recompute: {} of {} forward segments ({} nodes cloned, {} no longer kept){}\n", c->recompute.segments,
               c->recompute.candidates, c->recompute.clonedNodes, report::humanBytes(c->recompute.savedBytes),
               c->memoryBudget > 0 ? fmt::format(", for --memory-budget {}", report::humanBytes(c->memoryBudget)) : "");
  if (!args.report.empty()) {
    nlohmann::json r{{"model", args.model},
                     {"profile", c->plan.profile},
                     {"compile_seconds", c->seconds},
                     {"kernels", c->stats.kernels},
                     {"launches", c->stats.launches},
                     {"tensors", c->plan.tensors.size()},
                     {"peak_bytes", c->memory.peakBytes},
                     {"memory", report::memoryReportJson(c->memory)},
                     {"recompute",
                      {{"memory_budget_bytes", c->memoryBudget > 0 ? nlohmann::json(c->memoryBudget) : nlohmann::json(nullptr)},
                       {"segments", c->recompute.segments},
                       {"candidate_segments", c->recompute.candidates},
                       {"cloned_nodes", c->recompute.clonedNodes},
                       {"saved_bytes", c->recompute.savedBytes}}},
                     {"loss_chunks", lossChunksJson(*c)},
                     {"profile_defaults", c->profileDefaults},
                     {"precision",
                      {{"option", c->precision}, {"packed_values", c->packedValues}, {"packed_f32_bytes", c->packedBytes}}},
                     {"row_blocks", c->plan.explain.value("row_blocks", nlohmann::json::object())},
                     {"persistent_bytes", c->stats.persistentBytes},
                     {"transient_bytes", c->stats.transientBytes},
                     {"plan_bytes", bytes.size()},
                     {"strategy", args.strategy},
                     {"transforms", c->transforms},
                     {"storage", c->storage},
                     {"layout_pass_ms", c->passTimesMs},
                     {"lowering",
                      {{"movement_kernels", c->lowering.movementKernels},
                       {"conversion_copies", c->lowering.materialised},
                       {"reads_through_maps", c->lowering.readsThrough},
                       {"transposed_reads", c->lowering.transposedReads},
                       {"movement_ops_not_executed", c->lowering.skippedNodes},
                       {"rtile_tensors", c->lowering.rtileValues},
                       {"rtile_tensors_kept_row_major", c->lowering.rtileDemoted},
                       {"fused_nodes", c->lowering.fusedNodes},
                       {"fused_matmuls", c->lowering.fusedMatmuls},
                       {"fused_elementwise_kernels", c->lowering.fusedElementwise},
                       {"low_rank_terms", c->lowering.lowRankTerms},
                       {"fused_attention", c->attentionFused}}}};
    if (Status e = safetensors::writeFileAtomic(args.report, r.dump(2) + "\n"); !e.ok()) {
      fmt::print(stderr, "error: {}\n", e.error().message);
      return 1;
    }
  }
  return 0;
}

}  // namespace fbl::driver
