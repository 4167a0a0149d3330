// memory_report: a plan's allocations against a profile's memory limits, and fblc compile's
// refusal of a plan whose largest allocation no device of the profile can make.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compiler/analysis/memory_report.h"
#include "compiler/driver/compile_command.h"

using namespace fbl;

namespace {

planfile::Tensor tensor(const std::string& name, planfile::Role role, int64_t bytes) {
  planfile::Tensor t;
  t.name = name;
  t.dtype = "f32";
  t.shape = {bytes / 4};
  t.role = role;
  t.bytes = bytes;
  return t;
}

}  // namespace

TEST_CASE("memory report: peak, largest allocation, the split by role, and what fits", "[analysis][memory]") {
  planfile::Plan p;
  p.arenaBytes = 4096;
  p.tensors = {tensor("w", planfile::Role::Weight, 1024), tensor("lora", planfile::Role::Trainable, 256),
               tensor("m", planfile::Role::State, 512), tensor("h", planfile::Role::Intermediate, 2048)};
  planfile::Tensor img = tensor("w_img", planfile::Role::Weight, 0);
  img.storage = "image";
  img.imageSlot = 0;
  p.tensors.push_back(img);
  p.imageSlots = {{{64, 8}}};  // 64 x 8 RGBA/FLOAT texels: 8192 bytes, larger than the arena
  profile::MemoryLimits limits;
  limits.present = true;
  limits.maxAllocBytes = 8000;
  limits.appBudgetBytes = 20000;
  const analysis::MemoryReport r = analysis::memoryReport(p, limits);
  CHECK(r.peakBytes == 4096 + 8192);
  CHECK(r.allocations == 2);
  CHECK(r.largestAllocationBytes == 8192);
  CHECK(r.largestAllocation == "image object 0 (w_img)");
  CHECK(r.frozenWeightBytes == 1024 + 8192);
  CHECK(r.trainableBytes == 256);
  CHECK(r.optimizerStateBytes == 512);
  CHECK(r.transientBytes == 4096 - 1024 - 256 - 512);
  CHECK(r.fitsMaxAlloc == false);
  CHECK(r.fitsBudget == true);
  CHECK_FALSE(r.fitsGlobal.has_value());
  const std::string line = analysis::memorySummaryLine(r, "phone");
  CHECK_THAT(line, Catch::Contains("OVER phone's max_alloc_bytes 8 kB") && Catch::Contains("peak within"));
  CHECK(analysis::memoryReportJson(r)["fits"]["global"].is_null());
}

TEST_CASE("fblc compile refuses a plan past the profile's max_alloc_bytes, naming both, unless allowed",
          "[analysis][memory]") {
  // pocl-cpu with a 64 KiB allocation limit, as a phone's 1 GiB is to a full-size model.
  std::ifstream in(std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["memory"]["max_alloc_bytes"] = 65536;
  j["provenance"]["memory.max_alloc_bytes"] = "estimated: a test's small phone";
  const std::string profile = (std::filesystem::temp_directory_path() / "fbl-small-alloc.json").string();
  std::ofstream(profile) << j.dump(2);
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = profile;
  auto refused = driver::compileModel(a);
  REQUIRE_FALSE(refused.ok());
  const std::string& msg = refused.error().message;
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_THAT(msg, Catch::Contains("exceeds the max_alloc_bytes of pocl-cpu, 65536 bytes (estimated)") &&
                      Catch::Contains("--allow-over-limit"));
  a.allowOverLimit = true;
  auto written = driver::compileModel(a);
  REQUIRE(written.ok());
  CHECK(written->memory.fitsMaxAlloc == false);
  CHECK(written->memory.largestAllocationBytes > 65536);
  std::filesystem::remove(profile);
}
