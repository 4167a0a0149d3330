#include <catch2/catch.hpp>

#include "sim/memory_model.h"

using namespace fbl::sim;
using nlohmann::json;

namespace {

std::string profilePath(const std::string& name) { return std::string(FBL_SOURCE_DIR) + "/profiles/" + name + ".json"; }

json minimalProfile() {
  json block{{"texture_l1_ways", 0}, {"texture_l1_replacement", "lru"}, {"buffer_l1", nullptr}, {"l2_line_bytes", 64},
             {"l2_ways", 16},        {"l2_replacement", "lru"},         {"l2_bandwidth_gbps", 100.0}};
  json prov = json::object();
  for (const auto& [k, v] : block.items()) prov[k] = "estimated: test";
  block["provenance"] = prov;
  return {{"name", "t"}, {"wave_size", 64}, {"compute_units", 4}, {"texture_block", {{"h", 2}, {"w", 8}}},
          {"l1_texture_cache_bytes", 2048}, {"l2_cache_bytes", 1 << 20}, {"bandwidth_gbps", 50.0},
          {"peak_gflops", 1000.0}, {"memory_model", block}};
}

std::string errorOf(const json& p) {
  auto m = memoryModelFromProfileJson(p, "t.json");
  return m.ok() ? "" : m.error().message;
}

}  // namespace

TEST_CASE("memory model: every phone profile has one, and it survives the plugin's JSON", "[sim]") {
  for (const char* name : {"adreno-830", "adreno-730", "mali-g925"}) {
    auto m = loadMemoryModel(profilePath(name));
    REQUIRE(m.ok());
    CHECK(m->profile == name);
    CHECK(m->textureL1.lineBytes == m->textureBlock.h * m->textureBlock.w * 16);
    for (const char* f : {"texture_l1_ways", "buffer_l1", "l2_line_bytes", "l2_bandwidth_gbps", "wave_size", "bandwidth_gbps"})
      CHECK(m->provenance.count(f) == 1);
    auto back = memoryModelFromJson(memoryModelToJson(*m), "model.json");
    REQUIRE(back.ok());
    CHECK(memoryModelToJson(*back) == memoryModelToJson(*m));
  }
  // Adreno's buffers bypass L1; Mali's go through its load/store cache.
  CHECK_FALSE(loadMemoryModel(profilePath("adreno-830"))->bufferL1.has_value());
  CHECK(loadMemoryModel(profilePath("mali-g925"))->bufferL1.has_value());
}

TEST_CASE("memory model: bad input is one line naming the field", "[sim]") {
  CHECK(errorOf(minimalProfile()).empty());
  json p = minimalProfile();
  p["memory_model"]["provenance"].erase("l2_ways");
  CHECK(errorOf(p) == "t.json: field 'memory_model.provenance.l2_ways': missing (every field says where it comes from)");
  p = minimalProfile();
  p["memory_model"]["l2_replacement"] = "random";
  CHECK(errorOf(p) == "t.json: field 'memory_model.l2_replacement': expected \"lru\" or \"fifo\"");
  p = minimalProfile();
  p["memory_model"]["l2_wayz"] = 3;
  CHECK(errorOf(p) == "t.json: field 'memory_model.l2_wayz': unknown field");
  p = minimalProfile();
  p["memory_model"]["l2_ways"] = 3;  // 16384 lines are not whole 3-way sets
  CHECK(errorOf(p).find("L2: 16384 lines are not a whole number of 3-way sets") != std::string::npos);
  p = minimalProfile();
  p["bandwidth_gbps"] = nullptr;  // pending measurement
  CHECK(errorOf(p).find("field 'bandwidth_gbps'") != std::string::npos);
  p = minimalProfile();
  p.erase("memory_model");
  CHECK(errorOf(p) == "t.json: field 'memory_model': missing");
  auto none = loadMemoryModel(profilePath("pocl-cpu"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message.find("no 'memory_model' block") != std::string::npos);
}
