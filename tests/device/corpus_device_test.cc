// One export of the architecture corpus (tests/data/corpus) end to end on PoCL: compiled by
// fblc's pipeline with the trajectory's AdamW settings, it must give PyTorch's first-step loss and
// gradients, follow PyTorch's 10-step loss trajectory and export peft's adapters (keys, shapes and
// values). An evaluation step before each train step must give PyTorch's loss at those weights.
// T5's optimize=True export runs here: its LoRA names come from node metadata, its labels are
// shifted right by a ScatterElements kernel, and it has an encoder, a decoder and a relative
// position bias; so does a left-padded decoder batch (below). tests/data/corpus/measure.py runs
// every export the same way.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/autodiff/peft_adapter.h"
#include "compiler/train/ref_trainer.h"
#include "runtime/plan_check.h"
#include "tests/autodiff/tensor_diff.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;

// The bytes of the plan's largest allocation a tensor needs: its aligned slot, or its image.
int64_t largestTensorAllocation(const planfile::Plan& p) {
  int64_t largest = 0;
  for (const planfile::Tensor& t : p.tensors)
    largest = std::max(largest, t.image() ? planfile::argumentBytes(t) : (t.bytes + p.alignment - 1) / p.alignment * p.alignment);
  return largest;
}

// How the plan uses memory: as the profile gives it; with a largest allocation no larger than
// the model's largest tensor, so that the arena is many pools, and a staging tensor of 1 KiB, so
// that weights load and adapters leave in chunks; with every forward segment recomputed in the
// backward pass; or with that and the head and loss in chunks of 20 rows (the last shorter),
// each chunk's gradient taken in the forward pass (passes/chunk_loss.h); or with a largest
// allocation smaller than the embedding and the head (12 KiB of their 16), which split-rows then
// stores as row blocks (passes/split_rows.h), the loss in chunks of 16 rows so that no activation
// is larger.
enum class Memory { Profile, SmallPools, Recompute, ChunkedLoss, RowBlocks };

// Trains the export 10 steps on PoCL against PyTorch and peft; returns the first step's
// gradients by trainable.
std::map<std::string, ir::Tensor> trainsLikePyTorch(const std::string& arch, const std::string& style,
                                                    Memory memory = Memory::Profile) {
  const std::string dir = std::string(FBL_TEST_DATA_DIR) + "/corpus/" + arch;
  std::ifstream tf(dir + "/trajectory.json");
  REQUIRE(tf.good());
  const auto traj = nlohmann::json::parse(tf);
  driver::CompileArgs a;
  a.model = dir + "/" + style + "/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/corpus-" + arch + "-" + style + ".fbp";
  a.weights = tempDir() + "/corpus-" + arch + "-" + style + ".safetensors";
  a.lr = traj["lr"].get<float>();
  a.weightDecay = traj["weight_decay"].get<float>();
  REQUIRE(traj["betas"][0].get<double>() == Approx(0.9));  // fbl's AdamW defaults
  REQUIRE(traj["betas"][1].get<double>() == Approx(0.999));
  REQUIRE(traj["eps"].get<double>() == Approx(1e-8));
  if (memory == Memory::Recompute || memory == Memory::ChunkedLoss) a.recomputeSegments = -1;
  if (memory == Memory::ChunkedLoss) a.lossChunkRows = "20";
  if (memory == Memory::RowBlocks) {
    std::ifstream pf(a.profile);
    auto profile = nlohmann::json::parse(pf);
    profile["memory"]["max_alloc_bytes"] = 12288;
    a.profile = tempDir() + "/pocl-cpu-rows-" + arch + ".json";
    std::ofstream(a.profile) << profile.dump(2);
    a.lossChunkRows = "16";
    a.stagingBytes = 1024;
  }
  if (memory == Memory::SmallPools) {
    auto whole = driver::compileModel(a);
    REQUIRE(whole.ok());
    REQUIRE(whole->plan.poolCount() == 1);
    std::ifstream pf(a.profile);
    auto profile = nlohmann::json::parse(pf);
    profile["memory"]["max_alloc_bytes"] = largestTensorAllocation(whole->plan);
    a.profile = tempDir() + "/pocl-cpu-pools-" + arch + ".json";
    std::ofstream(a.profile) << profile.dump(2);
    a.stagingBytes = 1024;
  }
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  if (memory == Memory::Recompute) {
    CHECK(c->recompute.segments > 0);
    std::printf("corpus %s/%s: %lld forward segments recomputed (%lld nodes), arena of %lld bytes\n", arch.c_str(),
                style.c_str(), static_cast<long long>(c->recompute.segments),
                static_cast<long long>(c->recompute.clonedNodes), static_cast<long long>(c->plan.arenaBytes));
  }
  if (memory == Memory::ChunkedLoss) {
    REQUIRE(c->lossChunks.size() == 1);
    CHECK(c->lossChunks[0].chunks >= 2);
    CHECK(c->lossChunkNodesMoved > 0);
    // The labels are checked before any launch as the whole loss's are: the chunks read them too.
    CHECK(std::count_if(c->plan.inputChecks.begin(), c->plan.inputChecks.end(),
                        [](const planfile::InputCheck& k) { return k.kind == "label"; }) == 1);
    std::printf("corpus %s/%s: the loss in %lld chunks of %lld rows, %lld backward nodes moved into the forward pass\n",
                arch.c_str(), style.c_str(), static_cast<long long>(c->lossChunks[0].chunks),
                static_cast<long long>(c->lossChunks[0].rows), static_cast<long long>(c->lossChunkNodesMoved));
  }
  if (memory == Memory::RowBlocks) {
    CHECK(c->rowBlocks.size() >= 4);  // two matrices, each in two blocks at least
    CHECK(c->memory.largestAllocationBytes <= 12288);
    // The ids no longer reach a Gather of the whole table; the plan still checks them against it.
    CHECK(std::count_if(c->plan.inputChecks.begin(), c->plan.inputChecks.end(),
                        [](const planfile::InputCheck& k) { return k.kind == "index" && k.lo == 0; }) == 1);
    std::printf("corpus %s/%s: %s\n", arch.c_str(), style.c_str(), c->rowBlocksSummary.c_str());
  }
  if (memory == Memory::SmallPools) {
    // Every pool holds whole tensors (the loader checks it too), and there are many.
    CHECK(c->plan.poolCount() >= 4);
    std::printf("corpus %s/%s: arena of %lld bytes in %lld pools of %lld bytes\n", arch.c_str(), style.c_str(),
                static_cast<long long>(c->plan.arenaBytes), static_cast<long long>(c->plan.poolCount()),
                static_cast<long long>(c->plan.poolBytes));
  }
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  auto s = openPlan(c->plan, "corpus-" + arch);
  REQUIRE_OK(s->loadWeights(a.weights));
  for (size_t i = 0; i < c->plan.inputs.size(); ++i) {
    auto t = onnx::readTensorProtoFile(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    REQUIRE_OK(s->writeTensor(c->plan.tensors[c->plan.inputs[i]].name, t->tensor.raw(), t->tensor.nbytes()));
  }
  std::map<std::string, ir::Tensor> torch;
  for (const auto& f : fs::directory_iterator(dir + "/grads")) {
    auto g = onnx::readTensorProtoFile(f.path().string());
    REQUIRE(g.ok());
    torch["m." + g->name] = g->tensor;
  }
  const auto losses = traj["losses"].get<std::vector<double>>();
  double worstLoss = 0, worstGrad = 0, worstEval = 0;
  std::map<std::string, ir::Tensor> firstGradients;
  for (size_t k = 0; k < losses.size(); ++k) {
    float eval = 0, loss = 0;
    REQUIRE_OK(s->evalStep(&eval));
    worstEval = std::max(worstEval, std::abs(eval - losses[k]) / std::abs(losses[k]));
    REQUIRE_OK(s->trainStep(&loss));
    worstLoss = std::max(worstLoss, std::abs(loss - losses[k]) / std::abs(losses[k]));
    if (k > 0) continue;
    CHECK(std::abs(loss - losses[0]) <= 1e-4 * std::abs(losses[0]));
    REQUIRE(c->plan.trainables.size() == torch.size());
    for (const planfile::Trainable& t : c->plan.trainables) {
      const std::string& name = c->plan.tensors[t.param].name;
      INFO("gradient of " << name);
      REQUIRE(torch.count(name) == 1);
      std::vector<unsigned char> bytes;
      REQUIRE_OK(s->readTensor(t.grad, &bytes));
      ir::Tensor g(ir::DType::F32, c->plan.tensors[t.grad].shape);
      REQUIRE(bytes.size() == g.nbytes());
      std::memcpy(g.raw(), bytes.data(), bytes.size());
      firstGradients.emplace(name, g);
      const double err = relativeToMaxAbs(g, torch.at(name));
      CHECK(err <= 1e-4);
      worstGrad = std::max(worstGrad, err);
    }
  }
  CHECK(worstLoss <= 5e-4);  // as tests/train/corpus_test.cc: Adam amplifies rounding near g = 0
  CHECK(worstEval <= 5e-4);
  // The buffers the 10 train-mode forwards updated (BatchNorm's running statistics), as PyTorch's.
  double worstBuffer = 0;
  if (fs::exists(dir + "/buffers.safetensors")) {
    const auto torchBuffers = readSafetensors(dir + "/buffers.safetensors");
    REQUIRE(c->plan.updatedBuffers.size() == torchBuffers.size());
    for (const auto& [name, want] : torchBuffers) {
      INFO("buffer " << name);
      const int32_t t = c->plan.findTensor("m." + name);
      REQUIRE(std::find(c->plan.updatedBuffers.begin(), c->plan.updatedBuffers.end(), t) != c->plan.updatedBuffers.end());
      std::vector<unsigned char> bytes;
      REQUIRE_OK(s->readTensor(t, &bytes));
      ir::Tensor mine(ir::DType::F32, want.shape());
      REQUIRE(bytes.size() == mine.nbytes());
      std::memcpy(mine.raw(), bytes.data(), bytes.size());
      worstBuffer = std::max(worstBuffer, relativeToMaxAbs(mine, want));
    }
    CHECK(worstBuffer <= 1e-5);
  } else {
    CHECK(c->plan.updatedBuffers.empty());
  }
  const std::string out = tempDir() + "/corpus-adapter-" + arch;
  fs::create_directories(out);
  REQUIRE_OK(s->exportAdapter(out));
  const auto mine = readSafetensors(out + "/adapter_model.safetensors");
  const auto peft = readSafetensors(dir + "/adapter/adapter_model.safetensors");
  REQUIRE(mine.size() == peft.size());
  // PyTorch's first-step gradient by adapter key (testing::adamParamError).
  std::map<std::string, const ir::Tensor*> firstGrad;
  for (const auto& [name, g] : torch) firstGrad[autodiff::peftAdapterKey(name)] = &g;
  double worstAdapter = 0, worstUnresolved = 0;
  for (const auto& [key, want] : peft) {
    INFO(key);
    REQUIRE(mine.count(key) == 1);
    REQUIRE(mine.at(key).shape() == want.shape());
    REQUIRE(firstGrad.count(key) == 1);
    const AdamParamError e = adamParamError(mine.at(key), want, *firstGrad.at(key));
    worstAdapter = std::max(worstAdapter, e.resolved);
    worstUnresolved = std::max(worstUnresolved, e.unresolved);
  }
  CHECK(worstAdapter <= 5e-4);
  CHECK(worstUnresolved <= 2 * a.lr * static_cast<double>(losses.size()));
  std::printf("corpus %s/%s on PoCL: worst gradient error %.1e, 10 steps worst relative loss difference %.1e "
              "(evaluation steps %.1e), adapters %.1e of max-abs (%.1e where the first gradient is rounding "
              "noise), updated buffers %.1e\n",
              arch.c_str(), style.c_str(), worstGrad, worstLoss, worstEval, worstAdapter, worstUnresolved, worstBuffer);
  return firstGradients;
}

TEST_CASE("the corpus's T5 (optimize=True export) trains on PoCL like PyTorch and peft", "[runtime][hf-corpus]") {
  trainsLikePyTorch("t5", "opt");
}

// Left padding gives query rows that see no key (HF's finfo.min mask over the pads and the
// future): PyTorch attends uniformly there, and the last pad's logits carry the first real
// token's label, so those rows' gradients count. The fused attention must keep them.
TEST_CASE("the corpus's left-padded Qwen2 batch (optimize=True export) trains on PoCL like PyTorch and peft",
          "[runtime][hf-corpus]") {
  trainsLikePyTorch("qwen2_left", "opt");
}

// BatchNorm in train mode normalizes with the batch's statistics (restored from the export's
// metadata, decomposed into a LayerNormalization over the batch) and updates its running
// statistics each step (the optimizer merged every layer's equal starting buffers into one
// initializer; the metadata gives each layer its own again). The stem's MaxPool becomes
// strided Slices and a Max whose ties go to the first element, as PyTorch's do.
TEST_CASE("the corpus's left-padded Qwen2 batch trains like PyTorch with its arena in pools no larger than its largest tensor",
          "[runtime][hf-corpus][pools]") {
  trainsLikePyTorch("qwen2_left", "opt", Memory::SmallPools);
}

TEST_CASE("the corpus's rsLoRA Llama trains like PyTorch with every forward segment recomputed, to the same gradients",
          "[runtime][hf-corpus][recompute]") {
  const auto kept = trainsLikePyTorch("llama_rslora", "opt");
  const auto recomputed = trainsLikePyTorch("llama_rslora", "opt", Memory::Recompute);
  REQUIRE(kept.size() == recomputed.size());
  double worst = 0;
  int64_t differing = 0;
  for (const auto& [name, g] : kept) {
    const ir::Tensor& r = recomputed.at(name);
    REQUIRE(r.nbytes() == g.nbytes());
    differing += std::memcmp(r.raw(), g.raw(), g.nbytes()) != 0;
    worst = std::max(worst, relativeToMaxAbs(r, g));
  }
  std::printf("corpus llama_rslora/opt: %lld of %zu gradients differ with recomputation, worst %.1e of max-abs\n",
              static_cast<long long>(differing), kept.size(), worst);
  CHECK(worst <= 1e-6);
}

TEST_CASE("the corpus's left-padded Qwen2 batch trains like PyTorch with its loss in chunks and every segment recomputed",
          "[runtime][hf-corpus][chunk-loss]") {
  trainsLikePyTorch("qwen2_left", "opt", Memory::ChunkedLoss);
}

TEST_CASE("the corpus's left-padded Qwen2 batch trains like PyTorch with its embedding and head in row blocks",
          "[runtime][hf-corpus][row-blocks]") {
  trainsLikePyTorch("qwen2_left", "opt", Memory::RowBlocks);
}

TEST_CASE("the corpus's ResNet (BatchNorm in train mode, MaxPool, optimize=True) trains on PoCL like PyTorch and peft",
          "[runtime][hf-corpus]") {
  trainsLikePyTorch("resnet", "opt");
}

// PyTorch updates the running statistics on every forward, so with gradient accumulation every
// micro-batch commits them, not only the optimizer's: after one optimizer step and one more
// micro-batch the device holds what the reference trainer does, and a checkpoint carries them.
TEST_CASE("the corpus's ResNet updates its running statistics every micro-batch, and checkpoints keep them",
          "[runtime][hf-corpus]") {
  const std::string dir = std::string(FBL_TEST_DATA_DIR) + "/corpus/resnet";
  driver::CompileArgs a;
  a.model = dir + "/opt/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/resnet-accum.fbp";
  a.weights = tempDir() + "/resnet-accum.safetensors";
  a.gradAccum = 2;
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  REQUIRE(c->plan.updatedBuffers.size() == 12);
  auto s = openPlan(c->plan, "resnet-accum");
  REQUIRE_OK(s->loadWeights(a.weights));
  auto forward = passes::loadModel(a.model);
  REQUIRE(forward.ok());
  auto batch = train::loadInputs(*forward, dir + "/test_data_set_0");
  REQUIRE(batch.ok());
  for (size_t i = 0; i < c->plan.inputs.size(); ++i) {
    auto t = onnx::readTensorProtoFile(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    REQUIRE_OK(s->writeTensor(c->plan.tensors[c->plan.inputs[i]].name, t->tensor.raw(), t->tensor.nbytes()));
  }
  autodiff::TrainingOptions opts;
  opts.optimizer.gradAccum = 2;
  auto tg = autodiff::buildTrainingGraph(*forward, opts);
  REQUIRE(tg.ok());
  auto ref = train::RefTrainer::create(std::move(*tg), opts.optimizer);
  for (int k = 0; k < 3; ++k) {
    REQUIRE_OK(s->trainStep(nullptr));
    REQUIRE(ref->step(*batch).ok());
  }
  REQUIRE(s->step() == 1);
  REQUIRE(s->accumulated() == 1);
  auto buffers = [&](rt::Session& session) {
    std::map<std::string, ir::Tensor> out;
    for (int32_t t : c->plan.updatedBuffers) {
      std::vector<unsigned char> bytes;
      REQUIRE_OK(session.readTensor(t, &bytes));
      ir::Tensor v(ir::DType::F32, c->plan.tensors[t].shape);
      REQUIRE(bytes.size() == v.nbytes());
      std::memcpy(v.raw(), bytes.data(), bytes.size());
      out[c->plan.tensors[t].name] = std::move(v);
    }
    return out;
  };
  const auto device = buffers(*s);
  double worst = 0;
  for (const auto& [name, mine] : device) {
    INFO(name);
    const ir::ValueId v = ref->training().graph.findValue(name);
    REQUIRE(v != ir::kNoValue);
    auto want = ref->current(v);
    REQUIRE(want.ok());
    worst = std::max(worst, relativeToMaxAbs(mine, *want));
  }
  CHECK(worst <= 1e-5);
  const std::string ckpt = tempDir() + "/resnet-accum.checkpoint.safetensors";
  REQUIRE_OK(s->saveCheckpoint(ckpt));
  auto resumed = openPlan(c->plan, "resnet-accum-resumed");
  REQUIRE_OK(resumed->loadWeights(a.weights));
  REQUIRE_OK(resumed->loadCheckpoint(ckpt));
  const auto restored = buffers(*resumed);
  for (const auto& [name, mine] : device) CHECK(std::memcmp(restored.at(name).raw(), mine.raw(), mine.nbytes()) == 0);
  // The loader's checks: an updated buffer starts from the weights file, and only one does.
  planfile::Plan unsourced = c->plan;
  unsourced.tensors[unsourced.updatedBuffers[0]].source.clear();
  CHECK_THAT(fbl::testing::errorText(rt::checkPlan(unsourced)), Catch::Contains("an updated buffer must be listed state with a source key"));
  planfile::Plan unlisted = c->plan;
  unlisted.updatedBuffers.erase(unlisted.updatedBuffers.begin());
  CHECK_THAT(fbl::testing::errorText(rt::checkPlan(unlisted)), Catch::Contains("a state tensor with a source key must be an updated buffer"));
  std::printf("corpus resnet/opt on PoCL, grad_accum 2, 3 micro-batches: running statistics %.1e of max-abs from the "
              "reference trainer's\n", worst);
}

// GroupNorm, exported as InstanceNormalization over the groups, after a 1-D Conv.
TEST_CASE("the corpus's wav2vec2 with GroupNorm (TorchScript export) trains on PoCL like PyTorch and peft",
          "[runtime][hf-corpus]") {
  trainsLikePyTorch("wav2vec2_group", "ts");
}

// A top-2-of-4 MoE: TopK picks each token's experts, whose weights GatherND collects; the router's
// gradient comes back through TopK's values.
TEST_CASE("the corpus's Mixtral (MoE, optimize=True) trains on PoCL like PyTorch and peft", "[runtime][hf-corpus]") {
  trainsLikePyTorch("mixtral", "opt");
}

// IA3's [out, 1] vectors get their gradients through the flatten peft applies: the plan records
// them in the trainable's shape, and the adapter is peft's IA3 format.
TEST_CASE("the corpus's IA3 Llama trains on PoCL like PyTorch and peft", "[runtime][hf-corpus]") {
  trainsLikePyTorch("llama_ia3", "noopt");
}

}  // namespace
}  // namespace fbl::testing
