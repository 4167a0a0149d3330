// assign-storage (compiler/plan/assign_storage.h; step 4 of layout_lowering.h) on whole training
// graphs, compile only:
//  - Llama-3.2-1B (tests/data/llama-full, no weights needed) for Adreno 830: every frozen weight
//    a MatMul reads is stored in its R-Tile, the 128,256 x 2,048 lm_head included (read by the
//    embedding's Gather as well; its tile grid wraps to fit 16384 x 16384 texels), and so are
//    the LoRA A matrices, which the optimizer then updates in place in their layout;
//  - under image storage every image fits the device, no trainable is an image (an OpenCL 1.2
//    kernel cannot read and write one image), and the images are planned memory: tensors of equal
//    extent whose lifetimes do not overlap share an image object;
//  - the baselines keep row-major buffers unless images are asked for, then MNN's plain images
//    (reuse) and TFLite's textures (explicit);
//  - under the H200's profile (matmul.narrow.k_contiguous_weights) every lora_B and its AdamW
//    state are stored transposed, and nothing else is.
// That such plans still train exactly as PyTorch does is tests/device/strategies_test.cc's job.
#include <catch2/catch.hpp>

#include <set>

#include "compiler/driver/compile_command.h"
#include "compiler/report/explain.h"

namespace fbl::plan {

using driver::Compiled;
using driver::CompileArgs;
using driver::compileModel;
namespace {

Compiled compile(const std::string& model, const std::string& profile, const std::string& strategy,
                 const std::string& storage) {
  CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/" + profile + ".json";
  a.strategy = strategy;
  a.storage = storage;
  a.allowOverLimit = true;  // full-size plans for phone profiles: their layouts, not a device's load
  auto c = compileModel(a);
  if (!c.ok()) FAIL(c.error().message);
  return std::move(*c);
}

}  // namespace

TEST_CASE("Llama-3.2-1B stores every frozen MatMul weight in its R-Tile, lm_head included", "[plan][storage]") {
  for (const char* storage : {"buffer", "image"}) {
    INFO(storage);
    const Compiled c = compile("llama-full", "adreno-830", "fblayout", storage);
    const nlohmann::json& s = c.storage;
    INFO(s.dump());
    CHECK(s.at("matmul_weights").get<int64_t>() == 113);  // 16 layers x 7 projections + lm_head
    CHECK(s.at("matmul_weights_rtile") == s.at("matmul_weights"));
    CHECK(s.at("trainables_rtile").size() == 112);  // every lora_A
    for (const auto& name : s.at("trainables_rtile")) CHECK(name.get<std::string>().find("lora_A") != std::string::npos);
    const int32_t lmHead = c.plan.findTensor("m.base_model.model.lm_head.weight");
    REQUIRE(lmHead >= 0);
    const planfile::Tensor& t = c.plan.tensors[lmHead];
    CHECK(t.layout.rfind("rtile", 0) == 0);
    CHECK(t.pack >= 0);
    CHECK(t.unpack >= 0);
    if (std::string(storage) == "buffer") {
      CHECK(s.at("image_tensors") == 0);
      CHECK(c.plan.imageSlots.empty());
      continue;
    }
    CHECK(t.image());
    CHECK((t.imageWidth <= 16384 && t.imageHeight <= 16384));
    CHECK(t.imageWidth * t.imageHeight * 4 >= 128256LL * 2048);  // every element has a lane
    for (const auto& slot : c.plan.imageSlots) CHECK((slot[0] <= 16384 && slot[1] <= 16384));
    for (const planfile::Trainable& tr : c.plan.trainables) CHECK_FALSE(c.plan.tensors[tr.param].image());
    // Tensors whose lifetimes do not overlap share image objects; peak bytes count them. With
    // attention fused (fuse-attention) the images left are the persistent weights, one object
    // each: the score products that used to share objects are gone.
    CHECK(s.at("image_tensors").get<int64_t>() >= static_cast<int64_t>(c.plan.imageSlots.size()));
    CHECK(s.at("peak_bytes").get<int64_t>() == c.plan.arenaBytes + c.plan.imageBytes());
  }
}

TEST_CASE("the H200's profile stores every lora_B and its AdamW state transposed, nothing else", "[plan][storage]") {
  // matmul.narrow.k_contiguous_weights (on for the H200, off for the phones until measured
  // there): lora_B [out x r] is read along its columns by dy B, so it is stored [r x out]; lora_A
  // ([r x in], read along its rows by x A^T) and the frozen weights are not narrow weights.
  for (const char* profile : {"nvidia-h200", "adreno-830"}) {
    INFO(profile);
    const Compiled c = compile("llama-full", profile, "fblayout", "buffer");
    int64_t weights = 0, state = 0, other = 0;
    for (const planfile::Tensor& t : c.plan.tensors) {
      if (t.layout != "transposed") continue;
      INFO(t.name);
      CHECK(t.pack >= 0);
      CHECK(t.unpack >= 0);
      CHECK(t.shape.size() == 2);
      const bool loraB = t.name.find("lora_B") != std::string::npos;
      weights += loraB && t.role == planfile::Role::Trainable;
      state += loraB && t.role == planfile::Role::State;
      other += !loraB || (t.role != planfile::Role::Trainable && t.role != planfile::Role::State);
    }
    const bool h200 = std::string(profile) == "nvidia-h200";
    // fblc explain says so, and why.
    auto report = report::buildExplainReport(c.plan);
    REQUIRE(report.ok());
    int64_t explained = 0;
    for (const report::ExplainTensor& t : report->tensors)
      if (t.layout == "linear, transposed") {
        ++explained;
        CHECK(t.why.find("k_contiguous_weights") != std::string::npos);
      }
    CHECK(explained == weights + state);
    CHECK(weights == (h200 ? 112 : 0));  // 16 layers x 7 projections
    CHECK(state == (h200 ? 224 : 0));    // AdamW's m and v of each
    CHECK(other == 0);
  }
}

TEST_CASE("baselines store images the way MNN and TFLite do, only when images are asked for", "[plan][storage]") {
  for (const char* strategy : {"reuse", "explicit"}) {
    INFO(strategy);
    const Compiled buffers = compile("llama-tiny", "adreno-830", strategy, "buffer");
    for (const planfile::Tensor& t : buffers.plan.tensors) {
      CHECK(t.layout == "row_major");
      CHECK_FALSE(t.image());
    }
    const Compiled images = compile("llama-tiny", "adreno-830", strategy, "image");
    std::set<std::string> layouts;
    for (const planfile::Tensor& t : images.plan.tensors)
      if (t.image()) layouts.insert(t.layout);
    CHECK(layouts == std::set<std::string>{std::string(strategy) == "reuse" ? "image" : "texture"});
  }
  // auto follows the profile: images where reads go through a texture cache.
  CHECK_FALSE(compile("llama-tiny", "adreno-830", "fblayout", "auto").plan.imageSlots.empty());
  CHECK(compile("llama-tiny", "pocl-cpu", "fblayout", "auto").plan.imageSlots.empty());
}

}  // namespace fbl::plan
