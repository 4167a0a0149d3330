// Fusion (compiler/plan/fusion.h) on the whole llama-tiny training graph: what fuses, what the
// plan loses (launches, intermediate tensors, arena bytes), and that it is fblayout's alone and
// switched off by --disable-pass fusion. That fused plans still train exactly as PyTorch does is
// tests/device/strategies_test.cc's job (every tiny corpus model, every strategy); the fused
// kernels themselves are checked element by element in tests/codegen/fused_elementwise_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "compiler/driver/compile_command.h"

namespace fbl::plan {

using driver::Compiled;
using driver::CompileArgs;
using driver::compileModel;
namespace {

Compiled compile(const std::string& strategy, std::vector<std::string> disabled = {}) {
  CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.strategy = strategy;
  a.disabledPasses = std::move(disabled);
  auto c = compileModel(a);
  if (!c.ok()) FAIL(c.error().message);
  return std::move(*c);
}

int64_t count(const Plan& p, const std::string& suffix) {
  return std::count_if(p.launches.begin(), p.launches.end(), [&](const planfile::Launch& l) {
    return l.node.size() > suffix.size() && l.node.compare(l.node.size() - suffix.size(), suffix.size(), suffix) == 0;
  });
}

}  // namespace

TEST_CASE("fusion runs LoRA's scale and add, gradient sums and elementwise trees inside other kernels", "[fusion][plan]") {
  // Without the low-rank terms (tested below), so that LoRA's B products keep their launches.
  const Compiled fused = compile("fblayout", {"low-rank-terms"}), plain = compile("fblayout", {"fusion"});
  const LoweringCounts& f = fused.lowering;
  INFO("fused: " << f.fusedNodes << " nodes into " << f.fusedMatmuls << " MatMuls and " << f.fusedElementwise
                 << " elementwise kernels; launches " << fused.plan.launches.size() << " vs "
                 << plain.plan.launches.size() << ", arena " << fused.plan.arenaBytes << " vs " << plain.plan.arenaBytes);
  CHECK(plain.lowering.fusedNodes == 0);
  CHECK(plain.lowering.fusedMatmuls == 0);
  CHECK(f.fusedMatmuls > 0);
  CHECK(f.fusedElementwise > 0);
  // Every fused node is one launch fewer (a group or an epilogue replaces its nodes' launches).
  CHECK(static_cast<int64_t>(plain.plan.launches.size() - fused.plan.launches.size()) == f.fusedNodes);
  CHECK(fused.plan.tensors.size() < plain.plan.tensors.size());
  CHECK(fused.plan.arenaBytes <= plain.plan.arenaBytes);
  // llama-tiny adapts q, k, v, o, gate, up and down in both layers: 14 LoRA branches. Forward,
  // each B product applies `* scale` (the Mul after it) and each base product adds the branch.
  int64_t scaled = 0, added = 0;
  for (const planfile::Launch& l : fused.plan.launches) {
    if (l.phase != "forward") continue;
    if (l.node.find("lora") == std::string::npos && l.node.find("linear") == std::string::npos) continue;
    scaled += l.node.size() > 4 && l.node.compare(l.node.size() - 4, 4, "+Mul") == 0;
    added += l.node.find("+Add") != std::string::npos;
  }
  CHECK(scaled == 14);
  CHECK(added == 14);
  // Backward, the scale on dY moves into the products that read it (dA's and the input's).
  CHECK(count(fused.plan, "+Mul") > 14);
}

TEST_CASE("low-rank terms: LoRA's B products and dt A products run inside the base products", "[fusion][plan]") {
  const Compiled terms = compile("fblayout"), none = compile("fblayout", {"low-rank-terms"});
  const Compiled noFusion = compile("fblayout", {"fusion"});
  const int64_t n = terms.lowering.lowRankTerms;
  INFO("terms " << n << "; launches " << terms.plan.launches.size() << " vs " << none.plan.launches.size());
  // Forward, every one of the 14 LoRA branches (q, k, v, o, gate, up, down in two layers): the B
  // product and its `* scale` leave the plan, the base product adds them. Backward, a dt A
  // product joins the input gradient's product where that product's sum starts with it.
  int64_t forwardScaled = 0;
  for (const planfile::Launch& l : terms.plan.launches)
    forwardScaled += l.phase == "forward" && l.node.find("linear") != std::string::npos && l.node.size() > 4 &&
                     l.node.compare(l.node.size() - 4, 4, "+Mul") == 0;
  CHECK(forwardScaled == 0);
  CHECK(n >= 14 + 2);
  CHECK(n <= 28);
  // Each term is one launch fewer (its product's, with any scale fused into it) and one M x N
  // value fewer. (The arena itself is first-fit, which is not monotone: one tensor fewer may
  // move the others by a slot either way.)
  CHECK(static_cast<int64_t>(none.plan.launches.size() - terms.plan.launches.size()) == n);
  CHECK(static_cast<int64_t>(none.plan.tensors.size() - terms.plan.tensors.size()) == n);
  auto allBytes = [](const planfile::Plan& p) {
    int64_t b = 0;
    for (const planfile::Tensor& t : p.tensors) b += t.bytes;
    return b;
  };
  CHECK(allBytes(terms.plan) < allBytes(none.plan));
  CHECK(none.lowering.lowRankTerms == 0);
  // They ride on fusion's epilogues: without fusion they are withdrawn.
  CHECK(noFusion.lowering.lowRankTerms == 0);
  CHECK(noFusion.plan.launches.size() == compile("fblayout", {"fusion", "low-rank-terms"}).plan.launches.size());
}

TEST_CASE("fusion is fblayout's and leaves reuse and explicit plans alone", "[fusion][plan]") {
  for (const char* s : {"reuse", "explicit"}) {
    const Compiled c = compile(s), off = compile(s, {"fusion"});
    INFO(s);
    CHECK(c.lowering.fusedNodes == 0);
    CHECK(c.lowering.lowRankTerms == 0);
    CHECK(c.plan.launches.size() == off.plan.launches.size());
  }
}

}  // namespace fbl::plan
