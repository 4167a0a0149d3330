// fblc compile's passes (driver/compile_command.h): one PassManager from fold-and-infer to
// assign-storage, so --dump-after, --disable-pass and the verifier see every stage, and a
// required pass refuses to be disabled with one line that says why.
#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/plan/plan_printer.h"

using namespace fbl;

namespace {

driver::CompileArgs llamaTiny() {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  return a;
}

const std::vector<std::string> kPasses = {
    "fold-and-infer",       "decompose-ops",      "drop-noops",   "dead-code",
    "fuse-attention",       "chunk-loss",         "split-rows",   "autodiff",
    "recompute",            "schedule-loss-chunks", "pack-saved", "classify-operators", "assign-rtile",
    "tile-index-elimination", "global-layout-selection", "layout-assignment", "lower-layouts",
    "low-rank-terms",       "fusion",             "assign-storage"};

std::vector<std::string> ranPasses(const driver::Compiled& c) {
  std::vector<std::string> ran;
  for (const passes::PassRun& r : c.passes)
    if (r.ran) ran.push_back(r.name);
  return ran;
}

}  // namespace

TEST_CASE("compile: every stage after the import is a pass of one pipeline", "[driver][passes]") {
  CHECK(driver::compilePassNames() == kPasses);
  driver::CompileArgs a = llamaTiny();
  a.verifyPasses = true;  // the IR verifier after every pass, the assignment's check after each layout pass
  auto c = driver::compileModel(a);
  INFO((c.ok() ? "" : c.error().message));
  REQUIRE(c.ok());
  CHECK(ranPasses(*c) == kPasses);

  a.strategy = "reuse";
  auto reuse = driver::compileModel(a);
  INFO((reuse.ok() ? "" : reuse.error().message));
  REQUIRE(reuse.ok());
  CHECK(ranPasses(*reuse) == std::vector<std::string>{"fold-and-infer", "decompose-ops", "drop-noops", "dead-code", "split-rows", "autodiff",
                                                      "recompute", "pack-saved", "classify-operators", "layout-assignment", "lower-layouts",
                                                      "assign-storage"});
}

TEST_CASE("compile: a required pass refuses --disable-pass and says why", "[driver][passes]") {
  driver::CompileArgs a = llamaTiny();
  a.disabledPasses = {"fold-and-infer"};
  auto c = driver::compileModel(a);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message ==
        "--disable-pass fold-and-infer: the pipeline cannot run without it (every later pass needs static shapes and "
        "dtypes)");
  for (const char* required :
       {"autodiff", "classify-operators", "layout-assignment", "lower-layouts", "assign-storage"}) {
    a.disabledPasses = {required};
    auto r = driver::compileModel(a);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.rfind(fmt::format("--disable-pass {}: the pipeline cannot run without it (", required), 0) == 0);
    CHECK(r.error().message.find('\n') == std::string::npos);
  }
  a.disabledPasses = {"fold-and-infr"};
  auto typo = driver::compileModel(a);
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().message ==
        "--disable-pass fold-and-infr: no such pass or plan step (passes: fold-and-infer, decompose-ops, drop-noops, "
        "dead-code, fuse-attention, chunk-loss, split-rows, autodiff, recompute, schedule-loss-chunks, pack-saved, "
        "classify-operators, assign-rtile, tile-index-elimination, global-layout-selection, layout-assignment, "
        "lower-layouts, low-rank-terms, fusion, assign-storage; plan steps: select-kernels, batch-launches, "
        "merge-kernels, bind-runtime, add-transfers, plan-memory, emit-program)");
  // The plan builder's steps are required but one, each with its reason.
  for (const plan::PlanStep& step : plan::planSteps()) {
    if (step.name == "batch-launches") continue;
    a.disabledPasses = {step.name};
    auto r = driver::compileModel(a);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message ==
          fmt::format("--disable-pass {}: the plan cannot be built without it ({})", step.name, step.requiredBecause));
  }
}

TEST_CASE("compile: --disable-pass batch-launches leaves every narrow product its own launch", "[driver][passes]") {
  // The H200's profile batches LoRA's independent narrow products (matmul.narrow.batch_products).
  driver::CompileArgs a = llamaTiny();
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/nvidia-h200.json";
  auto batched = driver::compileModel(a);
  a.disabledPasses = {"batch-launches"};
  auto single = driver::compileModel(a);
  INFO((batched.ok() ? "" : batched.error().message) << (single.ok() ? "" : single.error().message));
  REQUIRE(batched.ok());
  REQUIRE(single.ok());
  CHECK(single->stats.launches > batched->stats.launches);
}

TEST_CASE("compile: the optional load passes may be disabled", "[driver][passes]") {
  driver::CompileArgs a = llamaTiny();
  a.verifyPasses = true;
  a.disabledPasses = {"drop-noops", "dead-code"};
  auto c = driver::compileModel(a);
  INFO((c.ok() ? "" : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->stats.launches > 0);
}

TEST_CASE("compile: --dump-after a plan builder step prints the plan as far as it is built", "[driver][passes]") {
  std::vector<std::string> steps;
  for (const plan::PlanStep& step : plan::planSteps()) steps.push_back(step.name);
  CHECK(steps == std::vector<std::string>{"select-kernels", "batch-launches", "merge-kernels", "bind-runtime",
                                          "add-transfers", "plan-memory", "emit-program"});
  driver::CompileArgs a = llamaTiny();
  std::string dump;
  a.dumpSink = [&](std::string_view s) { dump += s; };
  a.dumpAfter = {"select-kernels", "plan-memory", "emit-program", "fusion"};
  auto c = driver::compileModel(a);
  INFO((c.ok() ? "" : c.error().message));
  REQUIRE(c.ok());
  // In pipeline order: the pass's IR dump, then the builder's steps.
  const size_t fusion = dump.find("// ---- IR after fusion ----\n");
  const size_t selected = dump.find("// ---- plan after select-kernels ----\n");
  const size_t memory = dump.find("// ---- plan after plan-memory ----\n");
  const size_t program = dump.find("// ---- plan after emit-program ----\n");
  REQUIRE(fusion != std::string::npos);
  REQUIRE(selected != std::string::npos);
  REQUIRE(memory != std::string::npos);
  REQUIRE(program != std::string::npos);
  CHECK(fusion < selected);
  CHECK(selected < memory);
  CHECK(memory < program);
  // Before merge-kernels the launches have no kernel yet, and the program is empty until the end.
  const std::string atSelect = dump.substr(selected, memory - selected);
  CHECK(atSelect.find("(kernel not yet named)") != std::string::npos);
  CHECK(atSelect.find("// fbl plan for") == std::string::npos);
  // After the last step the plan is the one written.
  CHECK(dump.substr(program + std::string("// ---- plan after emit-program ----\n").size()) ==
        plan::printPlan(c->plan));
}

TEST_CASE("compile: --dump-after an unknown name lists the passes and the plan steps", "[driver][passes]") {
  driver::CompileArgs a = llamaTiny();
  a.dumpAfter = {"plan-memry"};
  auto c = driver::compileModel(a);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message.rfind("--dump-after plan-memry: no such pass or plan step (passes: fold-and-infer, ", 0) == 0);
  CHECK(c.error().message.find("; plan steps: select-kernels, batch-launches, merge-kernels, bind-runtime, "
                               "add-transfers, plan-memory, emit-program)") != std::string::npos);
}
