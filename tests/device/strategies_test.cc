// The three whole-model strategies (compiler/plan/layout_lowering.h) on PoCL, each with buffer and
// with image storage: each compiles its own plan from the same joint graph, and all six give
// PyTorch's first-step loss and LoRA gradients on every tiny corpus model (llama-tiny-folded's
// LoRA names and orientation recovered from its node metadata at import). The plans must really
// differ: fblayout executes fewer movement ops than explicit, runs attention as the flash kernel
// pair (fuse-attention) and stores R-Tile tensors tile-major (weights packed at load included),
// reuse reads MatMul operands through the transposed path, and image storage puts
// tensors in image2d objects under every strategy.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "compiler/onnx/tensor_proto.h"
#include "compiler/driver/compile_command.h"
#include "compiler/profile/profile.h"
#include "compiler/strategy/strategy.h"
#include "runtime/plan_check.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;

const char* const kStorages[] = {"buffer", "image"};

struct StepResult {
  plan::LoweringCounts counts;
  int64_t transformLaunches = 0, conversionLaunches = 0, launches = 0, imageTensors = 0, packedTensors = 0;
  int64_t attentionFused = 0;  // attention blocks run as the flash kernel pair (fuse-attention)
  float loss = 0.0f;
  std::map<std::string, ir::Tensor> grads;  // by PyTorch name
  std::string program;
  std::vector<std::string> kernels;  // the kernel of each launch
};

// `inspect` (optional) sees the session with the weights and inputs written, before the step
// (stepped false) and after it (stepped true).
using Inspect = std::function<void(rt::Session&, const planfile::Plan&, bool stepped)>;

StepResult firstStep(const std::string& model, const std::string& strategy, const std::string& storage,
                     const std::string& profile = FBL_SOURCE_DIR "/profiles/pocl-cpu.json",
                     const Inspect& inspect = {}) {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx";
  a.profile = profile;
  a.output = tempDir() + "/" + model + "." + strategy + "." + storage + ".fbp";
  a.weights = tempDir() + "/" + model + ".safetensors";
  a.strategy = strategy;
  a.storage = storage;
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  StepResult r;
  r.counts = c->lowering;
  r.attentionFused = c->attentionFused;
  for (const planfile::Launch& l : c->plan.launches) {
    r.transformLaunches += l.kind == "transform";
    r.conversionLaunches += l.kind == "conversion";
    r.kernels.push_back(c->plan.kernelNames[l.kernel]);
  }
  r.launches = static_cast<int64_t>(c->plan.launches.size());
  r.program = c->plan.program;
  for (const planfile::Tensor& t : c->plan.tensors) {
    r.imageTensors += t.image();
    r.packedTensors += t.pack >= 0;
  }
  auto s = openPlan(c->plan, model + "-" + strategy + "-" + storage);
  REQUIRE_OK(s->loadWeights(a.weights));
  const std::string dir = std::string(FBL_TEST_DATA_DIR) + "/" + model + "/test_data_set_0";
  for (size_t i = 0; i < c->plan.inputs.size(); ++i) {
    auto t = onnx::readTensorProtoFile(dir + "/input_" + std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    REQUIRE_OK(s->writeTensor(c->plan.tensors[c->plan.inputs[i]].name, t->tensor.raw(), t->tensor.nbytes()));
  }
  if (inspect) inspect(*s, c->plan, false);
  REQUIRE_OK(s->trainStep(&r.loss));
  if (inspect) inspect(*s, c->plan, true);
  for (const planfile::Trainable& t : c->plan.trainables) {
    std::string name = c->plan.tensors[t.param].name;
    if (name.rfind("m.", 0) == 0) name = name.substr(2);
    std::vector<unsigned char> bytes;
    REQUIRE_OK(s->readTensor(t.grad, &bytes));
    ir::Tensor g(ir::DType::F32, c->plan.tensors[t.grad].shape);
    REQUIRE(bytes.size() == g.nbytes());
    std::memcpy(g.raw(), bytes.data(), bytes.size());
    r.grads[name] = std::move(g);
  }
  return r;
}

// PyTorch's first-step loss and LoRA gradients of `model`.
std::pair<float, std::map<std::string, ir::Tensor>> torchStep(const std::string& model) {
  auto expected = onnx::readTensorProtoFile(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/test_data_set_0/output_0.pb");
  REQUIRE(expected.ok());
  std::map<std::string, ir::Tensor> torch;
  for (const auto& f : fs::directory_iterator(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/grads")) {
    auto g = onnx::readTensorProtoFile(f.path().string());
    REQUIRE(g.ok());
    torch[g->name] = g->tensor;
  }
  return {static_cast<float>(expected->tensor.at(0)), std::move(torch)};
}

// `r`'s loss and gradients against PyTorch's (torchStep); the worst gradient error, relative to
// the largest |gradient| of its tensor.
double checkAgainstTorch(const StepResult& r, float torchLoss, const std::map<std::string, ir::Tensor>& torch) {
  CHECK(std::fabs(r.loss - torchLoss) <= 1e-4 * std::max(1.0, std::fabs(static_cast<double>(torchLoss))));
  double worst = 0.0;
  for (const auto& [name, want] : torch) {
    INFO("gradient of " << name);
    REQUIRE(r.grads.count(name) == 1);
    const double err = relativeToMaxAbs(r.grads.at(name), want);
    CHECK(err <= 1e-4);
    worst = std::max(worst, err);
  }
  return worst;
}

// Every strategy and storage of one model against PyTorch's loss and gradients, and the plans'
// differences. The models are split over test cases so that ctest runs them in parallel, each
// well inside its per-test timeout.
void checkStrategies(const std::vector<const char*>& models) {
  for (const char* model : models) {
    INFO(model);
    const auto [torchLoss, torch] = torchStep(model);
    std::map<std::string, StepResult> results;
    for (strategy::Strategy st : strategy::kAllStrategies)
    for (const char* storage : kStorages) {
      const char* strategy = strategy::strategyName(st);
      INFO(strategy << " / " << storage);
      StepResult r = firstStep(model, strategy, storage);
      const double worst = checkAgainstTorch(r, torchLoss, torch);
      std::printf("%s %-8s %-6s: %3lld launches (%3lld movement, %2lld conversions), %3lld reads through maps "
                  "(%lld transposed), %2lld packed, %2lld images, %lld fused attention blocks, loss %.7f, worst gradient "
                  "error %.2e\n",
                  model, strategy, storage, static_cast<long long>(r.launches),
                  static_cast<long long>(r.transformLaunches), static_cast<long long>(r.conversionLaunches),
                  static_cast<long long>(r.counts.readsThrough), static_cast<long long>(r.counts.transposedReads),
                  static_cast<long long>(r.packedTensors), static_cast<long long>(r.imageTensors),
                  static_cast<long long>(r.attentionFused), r.loss, worst);
      if (std::string(storage) == "buffer") CHECK(r.imageTensors == 0);
      else CHECK(r.imageTensors > 0);
      results[std::string(strategy) + "/" + storage] = std::move(r);
    }
    // The plans differ the way the strategies say.
    const StepResult &fb = results["fblayout/buffer"], &re = results["reuse/buffer"], &ex = results["explicit/buffer"];
    // fblayout runs every attention block (2 per corpus model) as the flash kernel pair; the
    // baselines run the exported ops.
    CHECK(fb.attentionFused == 2);
    CHECK(re.attentionFused == 0);
    CHECK(ex.attentionFused == 0);
    CHECK(fb.packedTensors > 0);  // weights and trainables in their R-Tile, packed at load
    CHECK(re.packedTensors == 0);
    CHECK(ex.counts.readsThrough == 0);
    CHECK(ex.counts.skippedNodes == 0);
    CHECK(fb.transformLaunches + fb.conversionLaunches < ex.transformLaunches);
    CHECK(fb.counts.readsThrough > 0);
    CHECK(fb.counts.rtileValues > 0);  // some tensors live tile-major in the arena
    CHECK(re.counts.rtileValues == 0);
    if (std::string(model) == "llama-tiny") {
      CHECK(re.counts.transposedReads > 0);
      CHECK(re.transformLaunches < ex.transformLaunches);
    }
  }
}

TEST_CASE("fblayout, reuse and explicit plans give PyTorch's loss and gradients: the Llama models", "[runtime][strategies]") {
  checkStrategies({"llama-tiny", "llama-tiny-folded"});
}

TEST_CASE("fblayout, reuse and explicit plans give PyTorch's loss and gradients: the BERT exports", "[runtime][strategies]") {
  checkStrategies({"bert-tiny", "bert-tiny-torchscript"});
}

TEST_CASE("fblayout, reuse and explicit plans give PyTorch's loss and gradients: vit-tiny", "[runtime][strategies]") {
  checkStrategies({"vit-tiny"});
}

TEST_CASE("a plan with four elements a work-item gives PyTorch's loss and gradients", "[runtime][elementwise]") {
  // The PoCL profile with kernels.elementwise_items = 4 (as the H200's): every elementwise
  // kernel, layout copy and fused group of llama-tiny's whole step runs elementwise_items.cl.
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  nlohmann::json j = profile::profileToJson(*hw);
  j["kernels"]["elementwise_items"] = 4;
  const std::string path = tempDir() + "/pocl-items4.json";
  std::ofstream(path) << j.dump(2);
  const auto [loss, torch] = torchStep("llama-tiny");
  for (const char* storage : kStorages) {
    INFO(storage);
    StepResult r = firstStep("llama-tiny", "fblayout", storage, path);
    CHECK(r.program.find("uint at[4];") != std::string::npos);
    checkAgainstTorch(r, loss, torch);
  }
}

TEST_CASE("a plan whose attention splits and whose row terms are trees gives PyTorch's loss and gradients",
          "[runtime][attention]") {
  // The PoCL profile with 4-row attention tiles, splits wherever a kernel has four tiles to
  // share (kernels.attention.min_groups_per_unit, as the H200's) and tree reductions: llama-tiny's
  // 16 tokens run every attention kernel 2 ways split, with _combine, _dq_sum and _dkdv_sum, in
  // a whole plan (scratch, arguments, launch order).
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  nlohmann::json j = profile::profileToJson(*hw);
  j["kernels"]["attention"]["max_tile"] = 4;
  j["kernels"]["attention"]["min_groups_per_unit"] = 64;
  j["kernels"]["reduce_max_workgroup"] = 16;
  const std::string path = tempDir() + "/pocl-attention-splits.json";
  std::ofstream(path) << j.dump(2);
  const auto [loss, torch] = torchStep("llama-tiny");
  StepResult r = firstStep("llama-tiny", "fblayout", "buffer", path);
  CHECK(r.attentionFused == 2);
  for (const std::string suffix : {"_combine", "_dq_sum", "_dkdv_sum"}) {
    INFO("a launch of a kernel named *" << suffix);
    CHECK(std::any_of(r.kernels.begin(), r.kernels.end(), [&](const std::string& k) {
      return k.size() > suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0;
    }));
  }
  CHECK(r.program.find("#define RT_WG ") != std::string::npos);  // the row terms' trees
  CHECK(r.program.find("#define RT_WG 1u") == std::string::npos);
  checkAgainstTorch(r, loss, torch);
}

TEST_CASE("narrow products batched into shared launches give the same step as one launch each",
          "[runtime][batching]") {
  // The PoCL profile with narrow products (as the H200's) and matmul.narrow.batch_products 1 and
  // 8: llama-tiny's LoRA products run through rtile_matmul_narrow.cl, and with batching q, k and
  // v's (and gate and up's) independent products share launches (compiler/plan/launch_batching.h).
  // Without a fill target each product's sums run in the same order either way, so the steps
  // must agree bit for bit, and both with PyTorch. With one (fill_work_items 64: x A's 8 blocks
  // take 8 slices alone, 4 when three share a launch) a batched launch is tiled for all its
  // products, so its slices differ: the steps must still match PyTorch. That pair runs with
  // image storage only (the H200's plans keep narrow outputs in images; the tiling does not
  // depend on storage), which keeps the test's time down, and with a narrow M's row blocks in
  // one group (rows_in_group_min_side 1: every t^T dy, M = 8, is tiled 8 rows high, where one
  // more plan without it tiles some 4 high).
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  const auto [loss, torch] = torchStep("llama-tiny");
  // The K slices of the plan's narrow kernels for 16 x 64 x 8 products (x A: 16 tokens, hidden
  // 64, rank 8; q and o's dy B have the same sides).
  auto defines = [](const std::string& program, const std::string& head, const std::string& name) {
    std::set<std::string> values;
    const std::string define = "#define " + name + " ";
    for (size_t at = program.find(head); at != std::string::npos; at = program.find(head, at + 1)) {
      const size_t k = program.find(define, at);
      values.insert(program.substr(k + define.size(), program.find('\n', k) - k - define.size()));
    }
    return values;
  };
  auto xASlices = [&](const std::string& program) {
    return defines(program, "#define M 16u\n#define N 8u\n#define K 64u\n", "KS");
  };
  auto tTdyRows = [&](const std::string& program) { return defines(program, "#define M 8u\n", "TM"); };
  auto narrowProfile = [&](int64_t limit, int64_t fill, int64_t rowsInGroup) {
    nlohmann::json j = profile::profileToJson(*hw);
    j["matmul"] = {{"provenance", "test: narrow products on PoCL"},
                   {"narrow", {{"max_side", 16}, {"work_items", 64}, {"batch_products", limit},
                               {"fill_work_items", fill}, {"rows_in_group_min_side", rowsInGroup},
                               {"provenance", "test"}}}};
    const std::string path = tempDir() + "/pocl-narrow-batch" + std::to_string(limit) + "-fill" +
                             std::to_string(fill) + "-rows" + std::to_string(rowsInGroup) + ".json";
    std::ofstream(path) << j.dump(2);
    return path;
  };
  for (const char* storage : kStorages) {
    INFO(storage);
    std::map<std::pair<int64_t, int64_t>, StepResult> byLimit;
    const bool image = std::string(storage) == "image";
    for (const int64_t fill : image ? std::vector<int64_t>{0, 64} : std::vector<int64_t>{0})
      for (const int64_t limit : {1, 8}) {
        byLimit[{limit, fill}] = firstStep("llama-tiny", "fblayout", storage, narrowProfile(limit, fill, fill ? 1 : 0));
        checkAgainstTorch(byLimit[{limit, fill}], loss, torch);
      }
    // Alone, x A's 8 blocks take 8 slices each (64 work-items); three or two in a launch, 4.
    if (image) {
      CHECK(xASlices(byLimit[{1, 64}].program) == std::set<std::string>{"8u"});
      CHECK(xASlices(byLimit[{8, 64}].program).count("4u") == 1);
      CHECK(tTdyRows(byLimit[{1, 64}].program) == std::set<std::string>{"8u"});
      const StepResult rowsApart = firstStep("llama-tiny", "fblayout", storage, narrowProfile(1, 64, 0));
      checkAgainstTorch(rowsApart, loss, torch);
      CHECK(tTdyRows(rowsApart.program).count("4u") == 1);
    }
    CHECK(xASlices(byLimit[{1, 0}].program) == xASlices(byLimit[{8, 0}].program));
    const StepResult &one = byLimit[{1, 0}], &batched = byLimit[{8, 0}];
    CHECK(one.program.find("#define KS ") != std::string::npos);  // narrow kernels in both plans
    auto batchedLaunches = [](const StepResult& r) {
      return std::count_if(r.kernels.begin(), r.kernels.end(), [](const std::string& k) {
        return k.find("_matmul_x") != std::string::npos;
      });
    };
    CHECK(batchedLaunches(one) == 0);
    CHECK(batchedLaunches(batched) >= 8);  // x A for q, k, v and for gate, up in each of 2 layers, ...
    CHECK(batched.launches < one.launches);
    CHECK(batched.loss == one.loss);
    for (const auto& [name, g] : one.grads) {
      INFO("gradient of " << name);
      REQUIRE(batched.grads.count(name) == 1);
      CHECK(std::memcmp(g.raw(), batched.grads.at(name).raw(), g.nbytes()) == 0);
    }
  }
}

TEST_CASE("narrow products with K in chunks or the narrow side whole in a work-item give PyTorch's loss and "
          "gradients and leave their counts at zero",
          "[runtime][chunks]") {
  // The PoCL profile with narrow products, matmul.narrow.chunk_min_k and wide_run: llama-tiny's
  // narrow-N products whose K is at least 32 (x A, dy B; 16 x 64 x 8 and wider) run with K in
  // chunks, a group each, the last group of a tile adding the chunks' sums (rtile_matmul_narrow.cl,
  // KC); its weight gradients (x^T dt, t^T dy) with a work-item holding all 8 of the rank side
  // (BM, BN), K in chunks as the fill target asks.
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  const auto [loss, torch] = torchStep("llama-tiny");
  nlohmann::json j = profile::profileToJson(*hw);
  j["matmul"] = {{"provenance", "test: narrow products on PoCL"},
                 {"narrow", {{"max_side", 16}, {"work_items", 16}, {"fill_work_items", 64}, {"chunk_min_k", 32},
                             {"chunk_rows", 8}, {"wide_run", 4}, {"provenance", "test"}}}};
  const std::string path = tempDir() + "/pocl-narrow-chunks.json";
  std::ofstream(path) << j.dump(2);
  for (const char* storage : kStorages) {
    INFO(storage);
    int64_t counters = 0;
    // After the step every count is zero again: the next launch of each kernel starts clean.
    auto countsLeftZero = [&](rt::Session& s, const planfile::Plan& plan, bool stepped) {
      if (!stepped) {
        // The loader takes a counter only as an i32 buffer it fills itself.
        planfile::Plan bad = plan;
        for (planfile::Tensor& t : bad.tensors)
          if (t.role == planfile::Role::Counter) {
            t.dtype = "f32";
            CHECK_THAT(fbl::testing::errorText(rt::checkPlan(bad)), Catch::Contains("a counter must be an i32 buffer"));
            break;
          }
        return;
      }
      for (size_t t = 0; t < plan.tensors.size(); ++t) {
        if (plan.tensors[t].role != planfile::Role::Counter) continue;
        ++counters;
        std::vector<unsigned char> bytes;
        REQUIRE_OK(s.readTensor(static_cast<int32_t>(t), &bytes));
        INFO(plan.tensors[t].name);
        CHECK(std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; }));
      }
    };
    const StepResult r = firstStep("llama-tiny", "fblayout", storage, path, countsLeftZero);
    checkAgainstTorch(r, loss, torch);
    CHECK(counters >= 4);  // a count tensor per chunked product
    CHECK(r.program.find("#define KC 1u") != std::string::npos);  // the rest walk all of K
    CHECK(r.program.find("#define KC 2u") != std::string::npos);
    CHECK(r.program.find("#define BN 2u") != std::string::npos);  // x^T dt
    CHECK(r.program.find("#define BM 2u") != std::string::npos);  // t^T dy
  }
}

TEST_CASE("narrow weights stored transposed train as PyTorch does and update as row-major ones do",
          "[runtime][storage]") {
  // The PoCL profile with narrow products (as the H200's), matmul.narrow.k_contiguous_weights
  // off and on. On, every lora_B ([out x r]: dy B reduces along its columns) and its AdamW state
  // are stored transposed, packed at load and unpacked wherever bytes leave the device, and
  // dy B reads B as x A^T reads lora_A. Both plans must give PyTorch's loss and gradients, the
  // weights as loaded, and after a step (AdamW updating p, m and v in their storage) the same
  // parameters and state, with buffer and with image storage.
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  const auto [loss, torch] = torchStep("llama-tiny");
  struct Run {
    StepResult step;
    std::map<std::string, std::vector<unsigned char>> loaded, updated;  // lora_B and its state
    std::map<std::string, std::string> layouts;                          // every tensor's
  };
  auto run = [&](bool transpose, const std::string& storage) {
    nlohmann::json j = profile::profileToJson(*hw);
    j["matmul"] = {{"provenance", "test: narrow products on PoCL"},
                   {"narrow", {{"max_side", 16}, {"work_items", 64}, {"k_contiguous_weights", transpose},
                               {"provenance", "test"}}}};
    const std::string path = tempDir() + "/pocl-narrow-kcontig" + std::to_string(transpose) + ".json";
    std::ofstream(path) << j.dump(2);
    Run r;
    // lora_B and its state as loaded, then after the step; every tensor's layout.
    auto readLoraB = [](rt::Session& s, const planfile::Plan& plan,
                        std::map<std::string, std::vector<unsigned char>>& into) {
      for (const planfile::Tensor& t : plan.tensors)
        if (t.name.find("lora_B") != std::string::npos && (t.role == planfile::Role::Trainable || t.role == planfile::Role::State))
          REQUIRE_OK(s.readTensor(t.name, &into[t.name]));
    };
    r.step = firstStep("llama-tiny", "fblayout", storage, path,
                       [&](rt::Session& s, const planfile::Plan& plan, bool stepped) {
                         readLoraB(s, plan, stepped ? r.updated : r.loaded);
                         if (!stepped)
                           for (const planfile::Tensor& t : plan.tensors) r.layouts[t.name] = t.layout;
                       });
    return r;
  };
  // Buffer storage, and image storage as the H200 compiles by default (lora_B, updated in place,
  // stays a buffer; the products' other operands are images).
  for (const char* storage : kStorages) {
    INFO(storage);
    const Run rowMajor = run(false, storage), transposed = run(true, storage);
    checkAgainstTorch(rowMajor.step, loss, torch);
    checkAgainstTorch(transposed.step, loss, torch);
    int64_t loraB = 0, state = 0;
    for (const auto& [name, layout] : transposed.layouts) {
      INFO(name);
      const bool narrowWeight = name.find("lora_B") != std::string::npos && transposed.updated.count(name);
      CHECK(rowMajor.layouts.at(name) != "transposed");
      CHECK((layout == "transposed") == narrowWeight);
      loraB += narrowWeight && name.find("adamw") == std::string::npos;
      state += narrowWeight && name.find("adamw") != std::string::npos;
    }
    CHECK(loraB == 14);      // 2 layers x 7 projections
    CHECK(state == 2 * 14);  // AdamW's m and v of each
    CHECK(transposed.step.packedTensors > rowMajor.step.packedTensors);
    for (const auto& [name, bytes] : rowMajor.loaded) {
      INFO(name);
      REQUIRE(transposed.loaded.count(name) == 1);
      CHECK(transposed.loaded.at(name) == bytes);  // packed and unpacked, bit for bit
      const std::vector<unsigned char>& a = rowMajor.updated.at(name);
      const std::vector<unsigned char>& b = transposed.updated.at(name);
      REQUIRE(a.size() == b.size());
      ir::Tensor ta(ir::DType::F32, {static_cast<int64_t>(a.size() / 4)}), tb = ta;
      std::memcpy(ta.raw(), a.data(), a.size());
      std::memcpy(tb.raw(), b.data(), b.size());
      CHECK(relativeToMaxAbs(tb, ta) <= 1e-4);
    }
  }
}

}  // namespace
}  // namespace fbl::testing
