// --precision fp16 and bf16 (compiler/passes/pack_saved.h) on PoCL. Two checks:
//  - the kernels: a plan whose graph run-ref can reproduce (no fused attention: the reference
//    packs the values of the unfused graph) gives run-ref's loss and gradients at that precision
//    to the tolerance of an f32 plan;
//  - the training: 10 AdamW steps of a decoder, an encoder and a ViT follow PyTorch's f32
//    trajectory within 1e-2 relative at every step, with no value that is not finite.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

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

using Trained = CorpusSteps;

nlohmann::json trajectory(const std::string& arch) {
  std::ifstream tf(corpusDir(arch) + "/trajectory.json");
  REQUIRE(tf.good());
  return nlohmann::json::parse(tf);
}

Trained onDevice(const std::string& arch, const std::string& precision, int steps, bool fuseAttention) {
  const nlohmann::json traj = trajectory(arch);
  driver::CompileArgs a;
  a.model = corpusDir(arch) + "/opt/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/precision-" + arch + "-" + precision + ".fbp";
  a.weights = tempDir() + "/precision-" + arch + "-" + precision + ".safetensors";
  a.precision = precision;
  a.lr = traj["lr"].get<float>();
  a.weightDecay = traj["weight_decay"].get<float>();
  if (!fuseAttention) a.disabledPasses.push_back("fuse-attention");
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->packedValues > 0);
  int64_t packed = 0;
  for (const planfile::Tensor& t : c->plan.tensors) packed += t.dtype == (precision == "fp16" ? "f16" : "bf16");
  CHECK(packed >= c->packedValues / 2);  // tensors may share slots, not values: each packed copy is a 16-bit tensor
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  auto s = openPlan(c->plan, "precision-" + arch + "-" + precision);
  REQUIRE_OK(s->loadWeights(a.weights));
  writeCorpusInputs(*s, c->plan, arch);
  return trainOnDevice(*s, c->plan, steps);
}

Trained onReference(const std::string& arch, const std::string& precision, int steps) {
  const nlohmann::json traj = trajectory(arch);
  auto forward = passes::loadModel(corpusDir(arch) + "/opt/model.onnx");
  REQUIRE(forward.ok());
  auto batch = train::loadInputs(*forward, corpusDir(arch) + "/test_data_set_0");
  REQUIRE(batch.ok());
  autodiff::TrainingOptions opts;
  opts.optimizer.lr = traj["lr"].get<float>();
  opts.optimizer.weightDecay = traj["weight_decay"].get<float>();
  auto tg = autodiff::buildTrainingGraph(*forward, opts);
  REQUIRE(tg.ok());
  REQUIRE(train::applyPrecision(*tg, precision).ok());
  return trainOnReference(std::move(*tg), opts.optimizer, *batch, steps);
}

}  // namespace

TEST_CASE("a Llama keeping its saved activations fp16 or bf16 trains on PoCL like the reference at that precision",
          "[runtime][precision]") {
  constexpr int kSteps = 3;
  for (const char* precision : {"fp16", "bf16"}) {
    INFO("--precision " << precision);
    const Trained device = onDevice("llama_rslora", precision, kSteps, /*fuseAttention=*/false);
    const Trained ref = onReference("llama_rslora", precision, kSteps), f32 = onReference("llama_rslora", "fp32", 1);
    double worstLoss = 0, worstGrad = 0, worstF32 = 0;
    for (int k = 0; k < kSteps; ++k)
      worstLoss = std::max<double>(worstLoss, std::abs(device.losses[k] - ref.losses[k]) / std::abs(ref.losses[k]));
    REQUIRE(device.grads.size() == ref.grads.size());
    for (const auto& [name, g] : ref.grads) {
      INFO("gradient of " << name);
      REQUIRE(device.grads.count(name) == 1);
      worstGrad = std::max(worstGrad, relativeToMaxAbs(device.grads.at(name), g));
      worstF32 = std::max(worstF32, relativeToMaxAbs(device.grads.at(name), f32.grads.at(name)));
    }
    // The device's f32 values differ from the reference's in the last bits, so now and then one
    // rounds to the neighbouring 16-bit value: an error of one 16-bit step in a few elements,
    // well below what the rounding itself does to the gradients.
    CHECK(worstLoss <= 1e-5);
    CHECK(worstGrad <= 3e-4);
    CHECK(worstGrad * 3 <= worstF32);
    std::printf("precision %s, corpus llama_rslora/opt on PoCL: %d steps, worst relative loss difference %.1e, worst "
                "gradient error %.1e against run-ref at the same precision, %.1e against f32\n",
                precision, kSteps, worstLoss, worstGrad, worstF32);
  }
}

TEST_CASE("a decoder, an encoder and a ViT keeping saved activations in 16 bits follow PyTorch's f32 trajectory",
          "[runtime][precision]") {
  for (const auto& [arch, precision] : std::vector<std::pair<std::string, std::string>>{
           {"llama_rslora", "fp16"}, {"llama_rslora", "bf16"}, {"bert_seqcls", "fp16"}, {"deit", "fp16"}}) {
    INFO(arch << " --precision " << precision);
    const std::vector<double> torch = trajectory(arch)["losses"].get<std::vector<double>>();
    const Trained device = onDevice(arch, precision, static_cast<int>(torch.size()), /*fuseAttention=*/true);
    double worst = 0;
    for (size_t k = 0; k < torch.size(); ++k) {
      REQUIRE(std::isfinite(device.losses[k]));
      worst = std::max(worst, std::abs(device.losses[k] - torch[k]) / std::abs(torch[k]));
    }
    for (const auto& [name, g] : device.grads)
      for (int64_t e = 0; e < g.numel(); ++e) REQUIRE(std::isfinite(g.at(e)));
    CHECK(worst <= 1e-2);
    std::printf("precision %s, corpus %s/opt on PoCL: %zu AdamW steps, worst relative loss difference %.1e against "
                "PyTorch's f32 trajectory\n",
                precision.c_str(), arch.c_str(), torch.size(), worst);
  }
}

}  // namespace fbl::testing
