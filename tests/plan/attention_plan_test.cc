// fuse-attention in whole plans: fblayout replaces every attention block of the corpus models by
// the flash kernel pair, so no [B, H, S, S] tensor is left in the plan (forward or backward);
// the baselines and --disable-pass fuse-attention keep the exported ops. That the fused plans
// train as PyTorch does is tests/device/strategies_test.cc's job (every tiny corpus model) and
// zoo_tiny_step_test.cc's (Gemma 2's softcap); the kernels are checked in
// tests/codegen/attention_kernel_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>

#include <set>

#include "compiler/driver/compile_command.h"
#include "compiler/passes/load_model.h"
#include "compiler/zoo/zoo.h"
#include <filesystem>

namespace fbl::plan {

using driver::Compiled;
using driver::CompileArgs;
using driver::compileModel;
namespace {

Compiled compile(const std::string& model, const std::string& strategy, std::vector<std::string> disabled = {}) {
  CompileArgs a;
  a.model = model.find('/') == std::string::npos ? std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx" : model;
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.strategy = strategy;
  a.disabledPasses = std::move(disabled);
  auto c = compileModel(a);
  if (!c.ok()) FAIL(c.error().message);
  return std::move(*c);
}

// Launches of the flash kernels, by entry ("" forward, "_rowterm", "_dq", "_dkdv").
std::map<std::string, int> attentionLaunches(const Plan& p) {
  std::map<std::string, int> n;
  for (const planfile::Launch& l : p.launches) {
    const std::string& k = p.kernelNames[l.kernel];
    const size_t at = k.find("_attention");
    if (at != std::string::npos) ++n[k.substr(at + 10)];
  }
  return n;
}

// Tensors of the plan shaped [B, H, S, S].
int scoreTensors(const Plan& p, const ir::Shape& scores) {
  return static_cast<int>(std::count_if(p.tensors.begin(), p.tensors.end(),
                                        [&](const planfile::Tensor& t) { return t.shape == scores; }));
}

int launchesOf(const Plan& p, const std::string& op) {
  return static_cast<int>(std::count_if(p.launches.begin(), p.launches.end(), [&](const planfile::Launch& l) {
    return l.node.find(op) != std::string::npos;
  }));
}

}  // namespace

TEST_CASE("fblayout plans run attention as the flash pair and keep no [B,H,S,S] tensor", "[plan][attention]") {
  SECTION("llama-tiny: both causal GQA blocks") {
    const Compiled c = compile("llama-tiny", "fblayout");
    CHECK(c.attentionFused == 2);
    const auto n = attentionLaunches(c.plan);
    CHECK(n.at("") == 2);
    CHECK(n.at("_rowterm") == 2);
    CHECK(n.at("_dkdv") == 2);
    CHECK(n.count("_dq") == 1);
    // No Softmax, SoftmaxGrad or score product runs: the only softmax left is the loss's.
    CHECK(launchesOf(c.plan, "Softmax_") == 0);
    CHECK(launchesOf(c.plan, "fbl.SoftmaxGrad") == 0);
    // head_dim = S = 16 here, so shape alone cannot tell scores from q: no plan tensor is a value
    // of the exported score chains (q k^T, scale, mask, Softmax, P v) or the gradient of one.
    auto fwd = passes::loadModel(std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx");
    REQUIRE(fwd.ok());
    std::set<std::string> chain;
    for (const ir::Node& n : fwd->nodes) {
      if (n.op != "Softmax") continue;
      for (const ir::Node* x = &n; x != nullptr;) {
        chain.insert(fwd->values[x->outputs[0]].name);
        chain.insert(x->name + "/grad");
        if (x->op == "MatMul") break;
        const ir::NodeId p = fwd->values[x->inputs[0]].producer;
        x = p == ir::kNoNode ? nullptr : &fwd->nodes[p];
      }
    }
    CHECK(chain.size() == 16);  // 2 layers x (MatMul, Mul, Add, Softmax) x (value, gradient)
    auto fromChain = [&](const Plan& p) {
      int n = 0;
      for (const planfile::Tensor& t : p.tensors)
        for (const std::string& x : chain) n += t.name.rfind(x, 0) == 0;
      return n;
    };
    CHECK(fromChain(c.plan) == 0);
    CHECK(fromChain(compile("llama-tiny", "fblayout", {"fuse-attention"}).plan) > 0);
    std::printf("llama-tiny fblayout: %s; %zu launches\n", c.attentionSummary.c_str(), c.plan.launches.size());
  }
  SECTION("vit-tiny: S = 17 != head_dim, so no [2,4,17,17] tensor at all") {
    const ir::Shape scores{2, 4, 17, 17};
    const Compiled fused = compile("vit-tiny", "fblayout");
    CHECK(fused.attentionFused == 2);
    CHECK(scoreTensors(fused.plan, scores) == 0);
    CHECK(scoreTensors(compile("vit-tiny", "reuse").plan, scores) > 0);
    const Compiled off = compile("vit-tiny", "fblayout", {"fuse-attention"});
    CHECK(off.attentionFused == 0);
    CHECK(attentionLaunches(off.plan).empty());
    CHECK(scoreTensors(off.plan, scores) > 0);
  }
  SECTION("bert-tiny and its TorchScript export (k^T by one [0,2,3,1] Transpose)") {
    for (const char* m : {"bert-tiny", "bert-tiny-torchscript"}) {
      INFO(m);
      const Compiled c = compile(m, "fblayout");
      CHECK(c.attentionFused == 2);
      std::printf("%s fblayout: %s\n", m, c.attentionSummary.c_str());
    }
  }
  SECTION("the baselines keep the exported attention") {
    for (const char* s : {"reuse", "explicit"}) {
      const Compiled c = compile("llama-tiny", s);
      CHECK(c.attentionFused == 0);
      CHECK(attentionLaunches(c.plan).empty());
    }
  }
}

TEST_CASE("fuse-attention on the zoo's tiny Llama 3.2, Qwen 2.5 and Gemma 2 (softcap)", "[plan][attention]") {
  for (const char* name : {"llama3.2-1b", "qwen2.5-1.5b", "gemma2-2b"}) {
    INFO(name);
    zoo::ZooOptions o;
    o.tiny = true;
    auto built = zoo::buildZooModel(name, o);
    REQUIRE(built.ok());
    const std::string path = (std::filesystem::temp_directory_path() / (std::string(name) + "-attention.onnx")).string();
    REQUIRE((*built)->write(path).ok());
    const Compiled c = compile(path, "fblayout");
    const auto n = attentionLaunches(c.plan);
    CHECK(c.attentionFused > 0);
    CHECK(n.at("") == c.attentionFused);
    CHECK(n.at("_dkdv") == c.attentionFused);
    if (std::string(name) == "gemma2-2b") CHECK(c.attentionSummary.find(std::to_string(c.attentionFused) + " softcapped") != std::string::npos);
    std::printf("%s --tiny fblayout: %s\n", name, c.attentionSummary.c_str());
  }
}

}  // namespace fbl::plan
