// memory_report: a plan's allocations against a profile's memory limits, and fblc compile's
// refusal of a plan whose largest allocation no device of the profile can make.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/report/memory_report.h"

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
  p.poolBytes = 4096;
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
  const report::MemoryReport r = report::memoryReport(p, limits);
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
  const std::string line = report::memorySummaryLine(r, "phone");
  CHECK_THAT(line, Catch::Contains("OVER phone's max_alloc_bytes 8 kB") && Catch::Contains("peak within"));
  CHECK(report::memoryReportJson(r)["fits"]["global"].is_null());
  // The arena in two pools: one allocation more, each pool half of it.
  p.poolBytes = 2048;
  const report::MemoryReport pooled = report::memoryReport(p, limits);
  CHECK(pooled.pools == 2);
  CHECK(pooled.allocations == 3);
  CHECK(pooled.peakBytes == r.peakBytes);
  p.imageSlots.clear();
  p.tensors.pop_back();
  const report::MemoryReport noImage = report::memoryReport(p, limits);
  CHECK(noImage.largestAllocationBytes == 2048);
  CHECK(noImage.largestAllocation == "pool 0 of 2");
  CHECK(noImage.fitsMaxAlloc == true);
}

namespace {

// pocl-cpu with a small allocation limit, as a phone's 1 GiB is to a full-size model.
std::string smallAllocProfile(int64_t maxAllocBytes) {
  std::ifstream in(std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["memory"]["max_alloc_bytes"] = maxAllocBytes;
  j["provenance"]["memory.max_alloc_bytes"] = "estimated: a test's small phone";
  const std::string profile =
      (std::filesystem::temp_directory_path() / ("fbl-small-alloc-" + std::to_string(maxAllocBytes) + ".json")).string();
  std::ofstream(profile) << j.dump(2);
  return profile;
}

}  // namespace

TEST_CASE("fblc compile plans the arena in pools under the profile's max_alloc_bytes", "[analysis][memory]") {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = smallAllocProfile(65536);
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  CHECK(c->plan.poolBytes == 65536);
  CHECK(c->plan.poolCount() > 4);
  CHECK(c->memory.largestAllocationBytes <= 65536);
  CHECK(c->memory.fitsMaxAlloc == true);
  for (const planfile::Tensor& t : c->plan.tensors) {
    INFO(t.name);
    if (t.image()) CHECK(planfile::argumentBytes(t) <= 65536);
    else CHECK(c->plan.poolOf(t) == (t.offset + std::max<int64_t>(t.bytes, 1) - 1) / c->plan.poolBytes);
  }
  std::filesystem::remove(a.profile);
}

TEST_CASE("fblc compile refuses a tensor larger than the profile's max_alloc_bytes, naming both, unless allowed",
          "[analysis][memory]") {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = smallAllocProfile(4096);
  auto refused = driver::compileModel(a);
  REQUIRE_FALSE(refused.ok());
  const std::string& msg = refused.error().message;
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_THAT(msg, Catch::Contains("exceeds the max_alloc_bytes of pocl-cpu, 4096 bytes (estimated)") &&
                      Catch::Contains("does not fit a pool") && Catch::Contains("--allow-over-limit"));
  a.allowOverLimit = true;
  auto written = driver::compileModel(a);
  REQUIRE(written.ok());
  CHECK(written->memory.fitsMaxAlloc == false);
  CHECK(written->memory.largestAllocationBytes > 4096);
  std::filesystem::remove(a.profile);
}
