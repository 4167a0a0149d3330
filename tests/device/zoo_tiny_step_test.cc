// Every convolutional zoo model at --tiny size (the CNNs and the SD-1.5 UNet) compiles for
// profiles/pocl-cpu.json and takes one training step on PoCL from the synthetic batch fbl-train
// draws without --data; its loss is finite and equals the reference executor's first-step loss
// on the same joint graph and batch, and so do the trainables' gradients.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compiler/autodiff/training_graph.h"
#include "compiler/driver/compile_command.h"
#include "compiler/passes/load_model.h"
#include "compiler/train/ref_trainer.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "compiler/zoo/zoo.h"
#include "runtime/synthetic_inputs.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

// Writes the tiny model, trains one step on PoCL and on the reference executor, and compares.
// `lossChunkRows` and `maxAllocBytes` (0: the profile's) shape the plan: the loss in chunks, and
// the frozen matrices larger than the largest allocation in row blocks.
void stepOnDevice(const std::string& name, const std::string& lossChunkRows = "auto", int64_t maxAllocBytes = 0) {
  INFO(name);
  zoo::ZooOptions o;
  o.tiny = true;
  auto built = zoo::buildZooModel(name, o);
  INFO((built.ok() ? std::string() : built.error().message));
  REQUIRE(built.ok());
  driver::CompileArgs a;
  a.model = tempDir() + "/" + name + ".onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/" + name + ".fbp";
  a.weights = tempDir() + "/" + name + ".safetensors";
  a.lossChunkRows = lossChunkRows;
  if (maxAllocBytes > 0) {
    std::ifstream pf(a.profile);
    auto profile = nlohmann::json::parse(pf);
    profile["memory"]["max_alloc_bytes"] = maxAllocBytes;
    a.profile = tempDir() + "/pocl-cpu-" + name + "-limited.json";
    std::ofstream(a.profile) << profile.dump(2);
  }
  REQUIRE((*built)->write(a.model).ok());
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  if (lossChunkRows != "auto") CHECK(c->lossChunks.size() == 1);
  if (maxAllocBytes > 0) CHECK(!c->rowBlocks.empty());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  auto s = openPlan(c->plan, name);
  REQUIRE_OK(s->loadWeights(a.weights));

  // The same joint graph on the reference executor, fed the same synthetic batch (seed 0,
  // step 0: fbl-train's first batch).
  auto fwd = passes::loadModel(a.model);
  REQUIRE(fwd.ok());
  auto globs = driver::trainableGlobs(a);
  REQUIRE(globs.ok());
  autodiff::TrainingOptions to;
  to.trainableGlobs = *globs;
  auto tg = autodiff::buildTrainingGraph(*fwd, to);
  REQUIRE(tg.ok());
  auto batch = zoo::syntheticInputs(*fwd, 0, 0);
  REQUIRE(batch.ok());
  // fbl-train draws it from the plan alone: the same bytes.
  std::vector<std::vector<unsigned char>> fromPlan = fbl::testing::requireValue(rt::syntheticBatch(rt::syntheticInputs(c->plan), 0, 0));
  REQUIRE(fromPlan.size() == fwd->inputs.size());
  for (size_t i = 0; i < fromPlan.size(); ++i) {
    const ir::Tensor& t = batch->at(fwd->inputs[i]);
    REQUIRE(fromPlan[i].size() == t.nbytes());
    CHECK(std::memcmp(fromPlan[i].data(), t.raw(), t.nbytes()) == 0);
  }
  std::map<ir::ValueId, ir::Tensor> feeds;
  for (const auto& [v, t] : *batch) {
    const std::string& input = fwd->values[v].name;
    REQUIRE_OK(s->writeTensor(input, t.raw(), t.nbytes()));
    for (ir::ValueId tv : tg->graph.inputs)
      if (tg->graph.values[tv].name == input) feeds[tv] = t;
  }
  REQUIRE(feeds.size() == batch->size());
  auto trainer = train::RefTrainer::create(std::move(tg).value());
  auto want = trainer->step(feeds);
  INFO((want.ok() ? std::string() : want.error().message));
  REQUIRE(want.ok());

  float loss = 0.0f;
  REQUIRE_OK(s->trainStep(&loss));
  CHECK(std::isfinite(loss));
  CHECK(std::fabs(loss - want->loss) <= 1e-4 * std::max(1.0f, std::fabs(want->loss)));
  // The loss only checks the forward; the trainables' gradients check the backward (through
  // every frozen convolution's fbl.ConvGradInput down to the first LoRA).
  std::map<std::string, size_t> refIndex;
  const autodiff::TrainingGraph& rtg = trainer->training();
  for (size_t i = 0; i < rtg.trainables.size(); ++i) refIndex[rtg.graph.values[rtg.trainables[i].param].name] = i;
  double worst = 0.0;
  for (const planfile::Trainable& t : c->plan.trainables) {
    const std::string& param = c->plan.tensors[t.param].name;
    INFO("gradient of " << param);
    REQUIRE(refIndex.count(param) == 1);
    std::vector<unsigned char> bytes;
    REQUIRE_OK(s->readTensor(t.grad, &bytes));
    ir::Tensor got(ir::DType::F32, c->plan.tensors[t.param].shape);
    REQUIRE(bytes.size() == got.nbytes());
    std::memcpy(got.raw(), bytes.data(), bytes.size());
    const double err = relativeToMaxAbs(got, want->grads[refIndex[param]]);
    CHECK(err <= 1e-3);
    worst = std::max(worst, err);
  }
  CHECK(c->plan.trainables.size() == rtg.trainables.size());
  if (c->attentionFused > 0) std::printf("%s --tiny: fuse-attention: %s\n", name.c_str(), c->attentionSummary.c_str());
  if (!c->rowBlocksSummary.empty()) std::printf("%s --tiny: split-rows: %s\n", name.c_str(), c->rowBlocksSummary.c_str());
  for (const passes::ChunkLoss::Chunked& l : c->lossChunks)
    std::printf("%s --tiny: the loss in %lld chunks of %lld rows\n", name.c_str(), static_cast<long long>(l.chunks),
                static_cast<long long>(l.rows));
  std::printf("%s --tiny: %zu launches, first-step loss %.6f on %s (reference %.6f), worst gradient error %.1e of "
              "max-abs over %zu tensors\n",
              name.c_str(), c->plan.launches.size(), loss, s->device().name.c_str(), want->loss, worst,
              c->plan.trainables.size());
}

TEST_CASE("tiny CNNs and the SD UNet take one training step on PoCL", "[runtime][zoo-step]") {
  for (const char* name : {"resnet34", "vgg19", "stable-diffusion-1.5"}) stepOnDevice(name);
}

// Depthwise convolutions: conv_emitters.cc's grouped Conv.
TEST_CASE("tiny mobilenetv2 (depthwise convolutions) takes one training step on PoCL",
          "[runtime][zoo-step]") {
  stepOnDevice("mobilenetv2");
}

// fblayout runs Gemma 2's softcapped, grouped-query causal attention and Whisper's causal self-
// and cross-attention (queries and keys of different lengths) as the flash kernel pair
// (fuse-attention); the reference trains the graphs as exported.
TEST_CASE("tiny Gemma 2 and Whisper (fused attention) take one training step on PoCL", "[runtime][zoo-step][attention]") {
  for (const char* name : {"gemma2-2b", "whisper-large"}) stepOnDevice(name);
}

// Gemma 2's tied embedding in two row blocks (40 KiB allocations of its 64), read by the lookup and
// by the head, whose final softcap runs in two chunks of 8 rows with their gradients taken in the
// forward pass.
TEST_CASE("tiny Gemma 2 with its loss in chunks and its embedding in row blocks steps on PoCL like the reference",
          "[runtime][zoo-step][chunk-loss][row-blocks]") {
  stepOnDevice("gemma2-2b", "8", 40960);
}

}  // namespace
}  // namespace fbl::testing
