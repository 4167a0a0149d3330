// Every export of the architecture corpus (tests/data/corpus) compiles, under every committed
// profile, into a plan that the runtime's load-time checks accept (runtime/plan_check.h: every
// tensor a launch reads is written first, sizes, roles). No device runs here: this is the plan
// side of docs/ops.md's "Architectures verified", for the layouts and fusions each profile picks.
// DeBERTa-v2's export once compiled into a plan that read a materialised view before its copy.
#include <algorithm>
#include <filesystem>

#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"
#include "runtime/plan_check.h"
#include "tests/runtime/runtime_test_util.h"

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

TEST_CASE("every corpus export compiles into plans the runtime accepts, under every profile", "[runtime][corpus15]") {
  const fs::path corpus = fs::path(FBL_TEST_DATA_DIR) / "corpus";
  const std::vector<fs::path> profiles = sortedEntries(fs::path(FBL_SOURCE_DIR) / "profiles", false);
  REQUIRE(profiles.size() >= 4);
  int plans = 0;
  for (const fs::path& arch : sortedEntries(corpus, true))
    for (const char* style : {"noopt", "opt", "ts"}) {
      const fs::path model = arch / style / "model.onnx";
      if (!fs::exists(model)) continue;
      for (const fs::path& profile : profiles) {
        INFO(model.string() << " for " << profile.filename().string());
        driver::CompileArgs a;
        a.model = model.string();
        a.profile = profile.string();
        a.output = tempDir() + "/corpus-plan-check.fbp";
        auto c = driver::compileModel(a);
        INFO((c.ok() ? std::string() : c.error().message));
        REQUIRE(c.ok());
        // As an app loads it: the written bytes parsed and checked (the writer fills arg_bytes).
        planfile::Plan loaded;
        CHECK(rt::loadPlan(planfile::serialize(c->plan), a.output, nullptr, &loaded) == "");
        ++plans;
      }
    }
  CHECK(plans >= 20 * 4);  // 11 architectures, 23 exports
}

}  // namespace
}  // namespace fbl::testing
