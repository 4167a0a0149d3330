// Every export of the architecture corpus (tests/data/corpus), and every zoo model at test size,
// compiles under every committed profile into a plan that the runtime's load-time checks accept
// (runtime/plan_check.h: every tensor a launch reads is written first, sizes, roles). No device
// runs here: this is the plan side of docs/ops.md's "Architectures verified", for the layouts and
// fusions each profile picks. It found DeBERTa-v2's plan reading a materialised view before its
// copy, and Swin's Mali-G925 plan launching one kernel at two work sizes.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/zoo/zoo.h"
#include "runtime/plan_check.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> sortedEntries(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (directories ? e.is_directory() : e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> profiles() {
  std::vector<fs::path> all = sortedEntries(fs::path(FBL_SOURCE_DIR) / "profiles", false);
  REQUIRE(all.size() >= 4);
  return all;
}

// Compiles `model` for `profile` and loads the plan as an app does: the written bytes parsed and
// checked (the writer fills arg_bytes).
void compilesToLoadablePlan(const fs::path& model, const fs::path& profile) {
  INFO(model.string() << " for " << profile.filename().string());
  driver::CompileArgs a;
  a.model = model.string();
  a.profile = profile.string();
  a.output = tempDir() + "/plan-check.fbp";
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  planfile::Plan loaded = fbl::testing::requireValue(rt::loadPlan(planfile::serialize(c->plan), a.output, nullptr));
}

TEST_CASE("every corpus export compiles into plans the runtime accepts, under every profile", "[runtime][hf-corpus]") {
  int plans = 0;
  for (const fs::path& arch : sortedEntries(fs::path(FBL_TEST_DATA_DIR) / "corpus", true))
    for (const char* style : {"noopt", "opt", "ts"}) {
      const fs::path model = arch / style / "model.onnx";
      if (!fs::exists(model)) continue;
      // Refused by design (tests/train/corpus_test.cc's list): in one line, naming what is lost.
      const bool dora = arch.filename() == "llama_dora";
      if (dora || (arch.filename() == "llama_ia3" && std::string(style) == "opt")) {
        driver::CompileArgs a;
        a.model = model.string();
        a.profile = profiles().front().string();
        a.output = tempDir() + "/plan-check.fbp";
        auto c = driver::compileModel(a);
        REQUIRE_FALSE(c.ok());
        CHECK_THAT(c.error().message, Catch::Contains(dora ? "lora_magnitude_vector" : "ia3_l"));
        CHECK(c.error().message.find('\n') == std::string::npos);
        continue;
      }
      for (const fs::path& profile : profiles()) {
        compilesToLoadablePlan(model, profile);
        ++plans;
      }
    }
  CHECK(plans >= 20 * 4);  // 11 architectures, 23 exports
}

TEST_CASE("every zoo model at test size compiles into plans the runtime accepts, under every profile", "[runtime][zoo]") {
  for (const zoo::ZooEntry& e : zoo::zooEntries()) {
    zoo::ZooOptions o;
    o.tiny = true;
    auto b = zoo::buildZooModel(e.name, o);
    INFO(e.name << ": " << (b.ok() ? std::string() : b.error().message));
    REQUIRE(b.ok());
    const fs::path model = tempDir() + "/zoo-" + e.name + ".onnx";
    {
      std::ofstream f(model, std::ios::binary);
      f << (*b)->serialize(model.string());
      REQUIRE(f.good());
    }
    for (const fs::path& profile : profiles()) compilesToLoadablePlan(model, profile);
  }
}

}  // namespace
}  // namespace fbl::testing
