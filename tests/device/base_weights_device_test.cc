// Frozen base weights stored fp16, int8 and int4 (compiler/quant/base_weights.h) on PoCL. The
// plan's kernels dequantize them in the forward and backward products and in the embedding
// gather, so a step must give the reference executor's loss and gradients at the same decoded
// weights (what `fblc run-ref --base-weights` computes), to the tolerance of an fp32 plan.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include "compiler/autodiff/training_graph.h"
#include "compiler/driver/compile_command.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/train/ref_trainer.h"
#include "tests/device/corpus_steps.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

constexpr int kSteps = 3;

struct Trained : CorpusSteps {
  planfile::Plan plan;  // onDevice's
};

// kSteps on PoCL from a plan compiled with `baseWeights`; also checks the plan stores every
// chosen weight encoded, in less memory than f32 would take.
Trained onDevice(const std::string& arch, const std::string& style, const std::string& baseWeights,
                 const std::string& profile) {
  driver::CompileArgs a;
  a.model = corpusDir(arch) + "/" + style + "/model.onnx";
  a.profile = profile;
  a.output = tempDir() + "/base-" + arch + "-" + baseWeights + ".fbp";
  a.weights = tempDir() + "/base-" + arch + "-" + baseWeights + ".safetensors";
  a.baseWeights = baseWeights;
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  const nlohmann::json& report = c->storage["base_weights"];
  CHECK(report["encoded"].get<int64_t>() > 0);
  CHECK(report["decoded_but_stored_f32"].empty());
  int64_t encoded = 0;
  for (const planfile::Tensor& t : c->plan.tensors)
    if (!t.encoding.empty()) {
      CHECK(t.encoding == baseWeights);
      CHECK(t.bytes < planfile::logicalBytes(t));
      ++encoded;
    }
  CHECK(encoded == report["encoded"].get<int64_t>());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  auto s = openPlan(c->plan, "base-" + arch + "-" + baseWeights);
  REQUIRE_OK(s->loadWeights(a.weights));
  writeCorpusInputs(*s, c->plan, arch);
  // An encoded weight is not read back as f32: its values are in the weights file.
  for (const planfile::Tensor& t : c->plan.tensors)
    if (!t.encoding.empty()) {
      std::vector<unsigned char> bytes;
      CHECK(fbl::testing::errorText(s->readTensor(t.name, &bytes)).find("is stored " + baseWeights) != std::string::npos);
      break;
    }
  Trained out;
  static_cast<CorpusSteps&>(out) = trainOnDevice(*s, c->plan, kSteps);
  out.plan = c->plan;
  return out;
}

// kSteps of the reference executor at the weights `baseWeights` decodes to.
Trained onReference(const std::string& arch, const std::string& style, const std::string& baseWeights) {
  auto forward = passes::loadModel(corpusDir(arch) + "/" + style + "/model.onnx");
  REQUIRE(forward.ok());
  autodiff::TrainingFlags flags;
  flags.baseWeights = baseWeights;
  autodiff::TrainingOptions opts;
  REQUIRE(train::applyBaseWeights(*forward, flags, opts.trainableGlobs).ok());
  auto batch = train::loadInputs(*forward, corpusDir(arch) + "/test_data_set_0");
  REQUIRE(batch.ok());
  auto tg = autodiff::buildTrainingGraph(*forward, opts);
  REQUIRE(tg.ok());
  Trained out;
  static_cast<CorpusSteps&>(out) = trainOnReference(std::move(*tg), opts.optimizer, *batch, kSteps);
  return out;
}

// Launches that read an encoded weight in a kernel of rtile_matmul_narrow.cl (its body declares
// the group's `shared` texels).
int64_t narrowReadsOfEncoded(const planfile::Plan& p) {
  int64_t n = 0;
  for (const planfile::Launch& l : p.launches) {
    if (std::none_of(l.args.begin(), l.args.end(), [&](int32_t a) { return !p.tensors[a].encoding.empty(); })) continue;
    const size_t at = p.program.find(" " + p.kernelNames[l.kernel] + "(");
    REQUIRE(at != std::string::npos);
    n += p.program.substr(at, p.program.find("\n}\n", at) - at).find("shared[LOCAL_TEXELS]") != std::string::npos;
  }
  return n;
}

Trained trainsLikeReference(const std::string& arch, const std::string& style, const std::string& baseWeights,
                            const std::string& profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json") {
  INFO(arch << "/" << style << " --base-weights " << baseWeights << " --profile " << profile);
  const Trained device = onDevice(arch, style, baseWeights, profile), ref = onReference(arch, style, baseWeights);
  double worstLoss = 0, worstGrad = 0;
  for (int k = 0; k < kSteps; ++k)
    worstLoss = std::max<double>(worstLoss, std::abs(device.losses[k] - ref.losses[k]) / std::abs(ref.losses[k]));
  REQUIRE(device.grads.size() == ref.grads.size());
  for (const auto& [name, g] : ref.grads) {
    INFO("gradient of " << name);
    REQUIRE(device.grads.count(name) == 1);
    worstGrad = std::max(worstGrad, relativeToMaxAbs(device.grads.at(name), g));
  }
  CHECK(worstLoss <= 1e-5);
  CHECK(worstGrad <= 1e-4);
  std::printf("base weights %s, corpus %s/%s on PoCL: %d steps, worst relative loss difference %.1e, worst gradient "
              "error %.1e (against run-ref at the same weights)\n",
              baseWeights.c_str(), arch.c_str(), style.c_str(), kSteps, worstLoss, worstGrad);
  return device;
}

}  // namespace

TEST_CASE("a Llama with its base stored fp16, int8 and int4 trains on PoCL like the reference at those weights",
          "[runtime][base-weights]") {
  for (const char* bw : {"fp16", "int8", "int4"}) {
    const Trained t = trainsLikeReference("llama_rslora", "opt", bw);
    CHECK(narrowReadsOfEncoded(t.plan) == 0);  // PoCL's profile has no narrow block: the tiled kernel reads them
  }
}

// The PoCL profile with the H200's narrow-product block: the corpus Llama's 16 tokens make its
// base products narrow, so the encoded weights are read by rtile_matmul_narrow.cl (batched
// launches, K in chunks) instead of the tiled kernel.
TEST_CASE("an int4 base read by the narrow product kernel trains on PoCL like the reference", "[runtime][base-weights]") {
  std::ifstream pf(std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json"), hf(std::string(FBL_SOURCE_DIR) + "/profiles/nvidia-h200.json");
  auto profile = nlohmann::json::parse(pf);
  profile["matmul"]["narrow"] = nlohmann::json::parse(hf)["matmul"]["narrow"];
  profile["matmul"]["provenance"] = "the PoCL profile with the H200's narrow block, for this test";
  const std::string path = tempDir() + "/pocl-cpu-narrow.json";
  std::ofstream(path) << profile.dump(2);
  const Trained t = trainsLikeReference("llama_rslora", "opt", "int4", path);
  CHECK(narrowReadsOfEncoded(t.plan) > 0);
}

TEST_CASE("a tied-head GPT-2, a BERT classifier and a ViT with an int4 base train on PoCL like the reference",
          "[runtime][base-weights]") {
  trainsLikeReference("gpt2", "opt", "int4");
  trainsLikeReference("bert_seqcls", "opt", "int4");
  trainsLikeReference("deit", "opt", "int4");
}

}  // namespace fbl::testing
