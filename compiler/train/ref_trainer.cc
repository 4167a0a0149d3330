#include "compiler/train/ref_trainer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/onnx/external_data.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/passes/pack_saved.h"
#include "compiler/quant/base_weights.h"
#include "compiler/train/ref_dataset.h"

namespace fbl::train {

namespace fs = std::filesystem;

Result<autodiff::TrainingOptions> trainingOptions(const RunRefArgs& args) {
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = args.trainable;
  if (opts.trainableGlobs.empty()) opts.trainableGlobs = autodiff::peftTrainableGlobs();
  FBL_ASSIGN(opts.optimizer, autodiff::optimizerOptions(args));
  return opts;
}

Status applyBaseWeights(ir::Graph& forward, const autodiff::TrainingFlags& flags,
                        const std::vector<std::string>& trainableGlobs) {
  FBL_ASSIGN(const quant::BaseWeights base, quant::parseBaseWeights(flags.baseWeights, flags.baseWeightsGroup));
  FBL_ASSIGN(const auto encodings, quant::encodingsFor(forward, trainableGlobs, base));
  return quant::applyToData(forward, encodings);
}

Status applyPrecision(autodiff::TrainingGraph& tg, const std::string& precision) {
  const std::vector<ir::ValueId> keep{tg.loss};
  passes::PackSaved pack(keep);
  FBL_ASSIGN(pack.format, passes::parsePrecision(precision));
  FBL_TRY(pack.run(tg.graph));
  return Status::success();
}

Result<std::map<ir::ValueId, ir::Tensor>> loadInputs(const ir::Graph& g, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return makeError("--data '{}': not a directory", dir);
  std::map<ir::ValueId, ir::Tensor> feeds;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    std::string path = (fs::path(dir) / fmt::format("input_{}.pb", i)).string();
    if (!fs::exists(path, ec)) break;
    FBL_ASSIGN(onnx::NamedTensor t, onnx::readTensorProtoFile(path));
    ir::ValueId id = g.findValue(t.name);
    bool named = id != ir::kNoValue && g.values[id].kind == ir::ValueKind::Input;
    if (!named) id = g.inputs[i];
    const ir::Value& v = g.values[id];
    if (v.dtype != t.tensor.dtype() || (v.shapeKnown && v.shape != t.tensor.shape()))
      return makeError("{}: input '{}' is {} {}, the model wants {} {}", path, v.name,
                       ir::dtypeName(t.tensor.dtype()), ir::shapeToString(t.tensor.shape()),
                       ir::dtypeName(v.dtype), ir::shapeToString(v.shape));
    feeds[id] = std::move(t.tensor);
  }
  return feeds;
}

RefTrainer::RefTrainer(autodiff::TrainingGraph tg, const autodiff::OptimizerOptions& opts)
    : tg_(std::move(tg)), exec_(tg_.graph) {
  loop_.gradAccum = opts.gradAccum;
  loop_.clipGradNorm = opts.clipGradNorm;
  loop_.schedule = opts.lrSchedule;
  loop_.lr = opts.lr;
  loop_.warmupSteps = opts.warmupSteps;
  loop_.totalSteps = opts.totalSteps;
}

std::unique_ptr<RefTrainer> RefTrainer::create(autodiff::TrainingGraph tg, const autodiff::OptimizerOptions& opts) {
  return std::unique_ptr<RefTrainer>(new RefTrainer(std::move(tg), opts));
}

Result<StepResult> RefTrainer::step(const std::map<ir::ValueId, ir::Tensor>& batch) {
  const ir::Graph& g = tg_.graph;
  for (ir::ValueId in : g.inputs)
    if (in != tg_.step && in != tg_.lr && in != tg_.accumKeep && batch.find(in) == batch.end())
      return makeError("{}: no data for input '{}'", g.sourcePath, g.values[in].name);
  // As the runtime (runtime/session.cc): only a window's last micro-batch updates; the others
  // carry the accumulators and the updated buffers alone.
  const bool update = micro_ + 1 >= loop_.gradAccum;
  auto everyMicroBatch = [&](ir::ValueId v) {
    return std::find(tg_.accumulators.begin(), tg_.accumulators.end(), v) != tg_.accumulators.end() ||
           std::find(tg_.buffers.begin(), tg_.buffers.end(), v) != tg_.buffers.end();
  };
  std::map<ir::ValueId, ir::Tensor> feeds = batch;
  if (tg_.step != ir::kNoValue) feeds[tg_.step] = ir::Tensor::scalar<int64_t>(steps_ + 1);
  if (tg_.lr != ir::kNoValue)
    feeds[tg_.lr] = ir::Tensor::scalar<float>(static_cast<float>(planfile::scheduledLr(loop_, loop_.lr, steps_ + 1)));
  if (tg_.accumKeep != ir::kNoValue) feeds[tg_.accumKeep] = ir::Tensor::scalar<float>(micro_ == 0 ? 0.0f : 1.0f);
  std::vector<ir::ValueId> fetch{tg_.loss};
  for (const auto& t : tg_.trainables) fetch.push_back(t.grad);
  if (update)
    for (const auto& t : tg_.trainables) fetch.push_back(t.updated);
  for (const auto& s : tg_.state)
    if (update || everyMicroBatch(s.current)) fetch.push_back(s.updated);
  FBL_ASSIGN(std::vector<ir::Tensor> out, exec_.run(feeds, fetch));
  StepResult r;
  r.loss = static_cast<float>(out[0].at(0));
  size_t k = 1, n = tg_.trainables.size();
  for (size_t i = 0; i < n; ++i) r.grads.push_back(std::move(out[k++]));
  if (update)
    for (size_t i = 0; i < n; ++i) FBL_TRY(exec_.setValue(tg_.trainables[i].param, std::move(out[k++])));
  for (const auto& s : tg_.state)
    if (update || everyMicroBatch(s.current)) FBL_TRY(exec_.setValue(s.current, std::move(out[k++])));
  if (update) {
    ++steps_;
    micro_ = 0;
  } else {
    ++micro_;
  }
  return r;
}

Result<ir::Tensor> RefTrainer::parameter(size_t i) {
  FBL_ASSERT(i < tg_.trainables.size());
  return current(tg_.trainables[i].param);
}

Result<ir::Tensor> RefTrainer::current(ir::ValueId v) {
  FBL_ASSIGN(std::vector<ir::Tensor> out, exec_.run({}, {v}));
  return std::move(out[0]);
}

namespace {


Status dump(const std::string& dir, const autodiff::TrainingGraph& tg, const StepResult& r) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "grads", ec);
  if (ec) return makeError("--dump '{}': cannot create the folder: {}", dir, ec.message());
  const ir::Value& loss = tg.graph.values[tg.loss];
  ir::Tensor lossT(loss.dtype, loss.shape);
  lossT.set(0, r.loss);
  FBL_TRY(onnx::writeTensorProtoFile((fs::path(dir) / "loss.pb").string(), loss.name, lossT));
  for (size_t i = 0; i < tg.trainables.size(); ++i) {
    const std::string& name = tg.graph.values[tg.trainables[i].param].name;
    // The file is named after the initializer; a '/' in it cannot be part of one file name.
    std::string file = name + ".pb";
    for (char& ch : file)
      if (ch == '/' || ch == '\\') ch = '_';
    FBL_TRY(onnx::writeTensorProtoFile((fs::path(dir) / "grads" / file).string(), name,
                                       r.grads[i]));
  }
  return Status::success();
}

Status run(const RunRefArgs& args) {
  if (args.steps < 1) return makeError("--steps must be 1 or more, not {}", args.steps);
  FBL_ASSIGN(autodiff::TrainingOptions opts, trainingOptions(args));
  passes::LoadOptions load;
  load.shapeOverrides = args.shapes;
  FBL_ASSIGN(ir::Graph forward, passes::loadModel(args.model, load));
  FBL_TRY(onnx::requireInitializerData(forward));  // external data: read at import, or say what is missing
  FBL_ASSIGN(RefDataset data, RefDataset::load(forward, args.dataDir, args.seed));
  FBL_TRY(applyBaseWeights(forward, args, opts.trainableGlobs));
  FBL_ASSIGN(autodiff::TrainingGraph tg, autodiff::buildTrainingGraph(forward, opts));
  FBL_TRY(applyPrecision(tg, args.precision));
  auto trainer = RefTrainer::create(std::move(tg), opts.optimizer);
  for (int s = 1; s <= args.steps; ++s) {
    FBL_ASSIGN(StepResult r, trainer->step(data.batchAt(s - 1)));
    fmt::print("step {} loss {:.6f}\n", s, r.loss);
    std::fflush(stdout);
    if (s == 1 && !args.dumpDir.empty()) FBL_TRY(dump(args.dumpDir, trainer->training(), r));
  }
  return Status::success();
}

}  // namespace

int runRefCommand(const RunRefArgs& args) {
  Status st = run(args);
  if (!st.ok()) {
    fmt::print(stderr, "error: {}\n", st.error().message);
    return 1;
  }
  return 0;
}

}  // namespace fbl::train
