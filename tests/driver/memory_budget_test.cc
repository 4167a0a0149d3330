// fblc compile --memory-budget: the budget's forms, recomputation chosen to meet it (as few
// segments as fit), and a budget no plan meets refused in one line that says by how much.
#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"

using namespace fbl;

namespace {

int64_t budget(const std::string& text, const profile::HardwareProfile& hw) {
  auto r = driver::memoryBudgetBytes(text, hw);
  INFO(text << ": " << (r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return r.value();
}

driver::CompileArgs llamaTiny() {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  return a;
}

}  // namespace

TEST_CASE("a memory budget is bytes with a unit, or auto where the profile gives one", "[driver][memory]") {
  profile::HardwareProfile hw;
  hw.name = "phone";
  CHECK(budget("", hw) == 0);
  CHECK(budget("none", hw) == 0);
  CHECK(budget("5500000000", hw) == 5500000000);
  CHECK(budget("5.5GB", hw) == 5500000000);
  CHECK(budget("4GiB", hw) == int64_t{4} << 30);
  CHECK(budget("512KiB", hw) == 512 * 1024);
  for (const char* bad : {"-1", "0", "lots", "5 GB", "GB", "1e30"}) {
    INFO(bad);
    auto r = driver::memoryBudgetBytes(bad, hw);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("--memory-budget '" + std::string(bad) + "'"));
  }
  auto none = driver::memoryBudgetBytes("auto", hw);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::Contains("profile 'phone' gives no memory.app_budget_bytes"));
  hw.memory.appBudgetBytes = 4000000000;
  CHECK(budget("auto", hw) == 4000000000);
}

TEST_CASE("a memory budget recomputes as few forward segments as fit, and one no plan meets is refused",
          "[driver][memory][recompute]") {
  driver::CompileArgs a = llamaTiny();
  auto kept = driver::compileModel(a);
  REQUIRE(kept.ok());
  CHECK(kept->recompute.segments == 0);
  a.recomputeSegments = -1;
  auto all = driver::compileModel(a);
  REQUIRE(all.ok());
  REQUIRE(all->recompute.segments > 1);
  REQUIRE(all->memory.peakBytes < kept->memory.peakBytes);
  a.recomputeSegments.reset();

  // A budget the plan meets as it is: nothing recomputed.
  a.memoryBudget = std::to_string(kept->memory.peakBytes);
  auto roomy = driver::compileModel(a);
  REQUIRE(roomy.ok());
  CHECK(roomy->recompute.segments == 0);
  CHECK(roomy->memoryBudget == kept->memory.peakBytes);

  // Just under it: some segments, not necessarily all, and the peak within the budget.
  a.memoryBudget = std::to_string(kept->memory.peakBytes - 1);
  auto tight = driver::compileModel(a);
  INFO((tight.ok() ? std::string() : tight.error().message));
  REQUIRE(tight.ok());
  CHECK(tight->recompute.segments >= 1);
  CHECK(tight->recompute.segments <= all->recompute.segments);
  CHECK(tight->memory.peakBytes < kept->memory.peakBytes);

  // Under the plan with everything recomputed: refused, saying by how much and what dominates.
  a.memoryBudget = std::to_string(all->memory.peakBytes - 4096);
  auto refused = driver::compileModel(a);
  REQUIRE_FALSE(refused.ok());
  const std::string& msg = refused.error().message;
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_THAT(msg, Catch::Contains("cannot be met") && Catch::Contains("4.1 kB over") && Catch::Contains("dominate with"));
}

// Frozen weights that dominate the unmet budget: the error names --base-weights, and the base
// stored int4 meets a budget that fp32 cannot.
TEST_CASE("a budget the frozen weights break points at --base-weights, and int4 meets it", "[driver][memory]") {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-full/model.onnx";  // Llama-3.2-1B's shapes
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  auto kept = driver::compileModel(a);
  REQUIRE(kept.ok());
  a.memoryBudget = "2GB";
  auto fp32 = driver::compileModel(a);
  REQUIRE_FALSE(fp32.ok());
  CHECK_THAT(fp32.error().message, Catch::Contains("frozen weights dominate") && Catch::Contains("--base-weights int4"));
  a.baseWeights = "int4";
  auto int4 = driver::compileModel(a);
  INFO((int4.ok() ? std::string() : int4.error().message));
  REQUIRE(int4.ok());
  CHECK(int4->memory.peakBytes <= 2000000000);
  CHECK(int4->memory.frozenWeightBytes * 6 < kept->memory.frozenWeightBytes);
}

TEST_CASE("a phone profile's compile defaults: an int4 base, bf16 saved activations and its app budget, unless "
          "the command line gives them",
          "[driver][memory][base-weights]") {
  driver::CompileArgs a = llamaTiny();
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/adreno-830.json";
  // What fblc compile does when its command line gives neither option.
  a.fromProfile.baseWeights = a.fromProfile.memoryBudget = a.fromProfile.precision = true;
  auto phone = driver::compileModel(a);
  INFO((phone.ok() ? std::string() : phone.error().message));
  REQUIRE(phone.ok());
  CHECK(phone->profileDefaults == "--base-weights int4 --precision bf16 --memory-budget auto");
  CHECK(phone->precision == "bf16");
  CHECK(phone->packedValues > 0);
  CHECK(phone->storage["base_weights"]["option"] == "int4");
  CHECK(phone->storage["base_weights"]["encoded"].get<int64_t>() > 0);
  CHECK(phone->memoryBudget == 4000000000);
  // Given on the command line, the options win: --base-weights fp32 and --memory-budget none.
  a.fromProfile.baseWeights = a.fromProfile.memoryBudget = a.fromProfile.precision = false;
  a.baseWeights = "fp32";
  a.memoryBudget = "none";
  auto asked = driver::compileModel(a);
  REQUIRE(asked.ok());
  CHECK(asked->profileDefaults.empty());
  CHECK(asked->storage["base_weights"]["option"] == "fp32");
  CHECK(asked->memoryBudget == 0);
  CHECK(asked->packedValues == 0);
  // Where neither the command line nor the profile names a base, an fp16 plan stores it fp16.
  driver::CompileArgs fp16 = llamaTiny();
  fp16.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  fp16.precision = "fp16";
  fp16.fromProfile.baseWeights = true;
  auto half = driver::compileModel(fp16);
  REQUIRE(half.ok());
  CHECK(half->storage["base_weights"]["option"] == "fp16");
  CHECK(half->precision == "fp16");
  // A library caller that sets nothing gets fp32 and no budget, whatever the profile says.
  driver::CompileArgs plain = llamaTiny();
  plain.profile = a.profile;
  auto library = driver::compileModel(plain);
  REQUIRE(library.ok());
  CHECK(library->profileDefaults.empty());
  CHECK(library->storage["base_weights"]["option"] == "fp32");
}
