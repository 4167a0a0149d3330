// Golden plans: the text form of each tiny corpus model's plan is kept in tests/golden/. Any
// difference fails; regenerate on purpose with
//   FBL_UPDATE_GOLDEN=1 build/bin/fbl_tests "[golden]"
// and say in the commit why the plans changed.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "compiler/driver/compile_command.h"
#include "compiler/plan/plan_printer.h"
#include "runtime/plan_check.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::plan {

using driver::CompileArgs;
using driver::compileModel;
namespace {

CompileArgs argsFor(const std::string& model) {
  CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  return a;
}

std::string firstDifference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string l1, l2;
  for (int line = 1;; ++line) {
    const bool m1 = static_cast<bool>(std::getline(x, l1)), m2 = static_cast<bool>(std::getline(y, l2));
    if (!m1 && !m2) return "";
    if (!m1 || !m2 || l1 != l2)
      return "line " + std::to_string(line) + ":\n  golden: " + (m1 ? l1 : "<end>") + "\n  now:    " + (m2 ? l2 : "<end>");
  }
}

TEST_CASE("plans of the tiny corpus models match their goldens", "[plan][golden]") {
  const bool update = std::getenv("FBL_UPDATE_GOLDEN") != nullptr;
  for (const char* model : {"llama-tiny", "bert-tiny", "vit-tiny", "bert-tiny-torchscript"}) {
    INFO(model);
    auto c = compileModel(argsFor(model));
    INFO((c.ok() ? std::string() : c.error().message));
    REQUIRE(c.ok());
    const std::string text = printPlan(c->plan);
    const std::string path = std::string(FBL_SOURCE_DIR) + "/tests/golden/" + model + ".plan.txt";
    if (update) {
      std::ofstream(path) << text;
      continue;
    }
    std::ifstream in(path);
    INFO("no golden at " << path << "; create it with FBL_UPDATE_GOLDEN=1 build/bin/fbl_tests \"[golden]\"");
    REQUIRE(in.good());
    std::stringstream golden;
    golden << in.rdbuf();
    const std::string diff = firstDifference(golden.str(), text);
    INFO("the plan differs from " << path << " at " << diff
         << "\nif the change is intended, regenerate: FBL_UPDATE_GOLDEN=1 build/bin/fbl_tests \"[golden]\"");
    CHECK(diff.empty());
  }
}

TEST_CASE("fblc print-plan prints a plan file as its golden, and refuses what the runtime refuses", "[plan][golden]") {
  const std::string dir = std::string(FBL_BIN_DIR) + "/../test-plans";
  const std::string plan = dir + "/print-plan.fbp", out = dir + "/print-plan.txt", err = dir + "/print-plan.err";
  std::system(("mkdir -p " + dir).c_str());
  auto c = compileModel(argsFor("llama-tiny"));
  REQUIRE(c.ok());
  std::ofstream(plan, std::ios::binary) << planfile::serialize(c->plan);
  auto run = [&](const std::string& file) {
    const int st = std::system((std::string(FBL_BIN_DIR) + "/fblc print-plan " + file + " > " + out + " 2> " + err).c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  auto slurp = [](const std::string& path) {
    std::stringstream s;
    s << std::ifstream(path, std::ios::binary).rdbuf();
    return s.str();
  };
  REQUIRE(run(plan) == 0);
  CHECK(firstDifference(slurp(std::string(FBL_SOURCE_DIR) + "/tests/golden/llama-tiny.plan.txt"), slurp(out)).empty());
  std::ofstream(plan, std::ios::binary | std::ios::trunc) << "not a plan";
  CHECK(run(plan) == 1);
  CHECK(slurp(err) == "error: plan '" + plan + "': not an fbl plan (bad magic); compile one with `fblc compile`\n");
  // A directory is refused by name, as the runtime refuses it (rt::readPlanFile).
  CHECK(run(std::string(FBL_SOURCE_DIR) + "/tests") == 1);
  CHECK(slurp(err) == "error: '" FBL_SOURCE_DIR "/tests' is a directory, not a plan file\n");
}

// tests/runtime/c_api_test.cc drives the C API over a plan the repository keeps, so that
// fbl_runtime_tests builds without the compiler. It need not be today's plan, only one that
// today's runtime reads: that changes with the plan format's version, when this regenerates it.
TEST_CASE("the C API tests' plan is one today's runtime reads", "[plan][golden]") {
  const std::string dir = std::string(FBL_TEST_DATA_DIR) + "/c_api";
  const std::string plan = dir + "/llama-tiny.fbp", weights = dir + "/llama-tiny.safetensors";
  if (std::getenv("FBL_UPDATE_GOLDEN") != nullptr) {
    const std::string cmd = fmt::format("{}/fblc compile {}/llama-tiny/model.onnx --profile {}/profiles/pocl-cpu.json "
                                        "-o {} --weights {} > /dev/null",
                                        FBL_BIN_DIR, FBL_TEST_DATA_DIR, FBL_SOURCE_DIR, plan, weights);
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  std::stringstream bytes;
  bytes << std::ifstream(plan, std::ios::binary).rdbuf();
  const Result<planfile::Plan> p = rt::loadPlan(bytes.str(), plan, nullptr);
  INFO(fbl::testing::errorText(p) << "\nregenerate it: FBL_UPDATE_GOLDEN=1 build/bin/fbl_tests \"[golden]\"");
  REQUIRE(p.ok());
  CHECK(p->model.find("llama") != std::string::npos);
}

TEST_CASE("the same inputs give a byte-identical plan", "[plan]") {
  auto a = compileModel(argsFor("bert-tiny"));
  auto b = compileModel(argsFor("bert-tiny"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(planfile::serialize(a->plan) == planfile::serialize(b->plan));
}

TEST_CASE("a plan file round-trips and refuses other versions and corruption", "[plan]") {
  auto c = compileModel(argsFor("bert-tiny"));
  REQUIRE(c.ok());
  const std::string bytes = planfile::serialize(c->plan);
  planfile::Plan back = fbl::testing::requireValue(planfile::parse(bytes));
  CHECK(planfile::serialize(back) == bytes);
  for (const uint32_t version : {planfile::kVersion - 1, planfile::kVersion + 1}) {
    std::string other = bytes;
    other[8] = static_cast<char>(version);
    CHECK_THAT(fbl::testing::errorText(planfile::parse(other)), Catch::Contains(fmt::format("version {} is not supported", version)));
  }
  // Image storage, packed tensors and their transfers round-trip too.
  CompileArgs images = argsFor("bert-tiny");
  images.storage = "image";
  auto ci = compileModel(images);
  REQUIRE(ci.ok());
  REQUIRE_FALSE(ci->plan.imageSlots.empty());
  REQUIRE_FALSE(ci->plan.transfers.empty());
  const std::string imageBytes = planfile::serialize(ci->plan);
  planfile::Plan imageBack = fbl::testing::requireValue(planfile::parse(imageBytes));
  CHECK(planfile::serialize(imageBack) == imageBytes);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x20;
  CHECK_THAT(fbl::testing::errorText(planfile::parse(flipped)), Catch::Contains("checksum"));
  CHECK_THAT(fbl::testing::errorText(planfile::parse(bytes.substr(0, 100))), Catch::Contains("truncated"));
  CHECK_THAT(fbl::testing::errorText(planfile::parse("hello")), Catch::Contains("not an fbl plan"));
}

}  // namespace
}  // namespace fbl::plan
