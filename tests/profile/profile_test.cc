#include <filesystem>
#include <set>
#include <fstream>

#include <catch2/catch.hpp>

#include "compiler/profile/profile.h"

using namespace fbl::profile;
using nlohmann::json;

namespace {

HardwareProfile sampleProfile() {
  HardwareProfile p;
  p.name = "sample";
  p.device = "Sample GPU";
  p.notes = "hand-made for tests";
  p.waveSize = 64;
  p.image2dMaxWidth = 16384;
  p.image2dMaxHeight = 16384;
  p.texelFormats = {"RGBA/FLOAT", "RGBA/HALF_FLOAT"};
  p.l1TextureCacheBytes = 16384;
  p.cacheLineBytes = 64;
  p.textureBlock = {2, 8};
  p.l2CacheBytes = 1 << 20;
  p.computeUnits = 6;
  p.bandwidthGBs = 60;
  p.peakGflops = std::nullopt;
  AccessTable t;
  t.unit = "relative";
  t.threads = {1, 8, 64};
  t.throughput[AccessPattern::kRow] = {1.7, 1.68, 1.21};
  t.throughput[AccessPattern::kColumn] = {1, 1, 1};
  t.throughput[AccessPattern::kBlock4] = {1.5, 1.5, 1.3};
  t.throughput[AccessPattern::kBlock8] = {1.55, 1.54, 1.36};
  p.accessTable = t;
  for (const char* f : {"device_class", "wave_size", "image2d_max", "texel_formats", "l1_texture_cache_bytes", "cache_line_bytes",
                        "texture_block", "l2_cache_bytes", "compute_units", "bandwidth_gbps", "access_table",
                        "image_storage"})
    p.provenance[f] = "estimated: test";
  p.provenance["peak_gflops"] = "pending measurement";
  p.memory.present = true;
  p.memory.globalBytes = int64_t{8} << 30;
  p.memory.maxAllocBytes = int64_t{1} << 30;
  p.provenance["memory.global_bytes"] = "queried: CL_DEVICE_GLOBAL_MEM_SIZE";
  p.provenance["memory.max_alloc_bytes"] = "public: a clinfo dump";
  p.provenance["memory.app_budget_bytes"] = "pending measurement";
  p.opencl.present = true;
  p.opencl.workgroupSize = 128;
  p.extra["other_tool"] = {{"setting", "64x64x16/4x4"}};  // another tool's block, kept verbatim
  p.kernels = KernelsBlock{};
  p.kernels->provenance = "estimated: test";
  p.kernels->set = {"attention.max_tile"};
  p.kernels->values.attention.maxTile = 16;
  return p;
}

// Applies `edit` to the sample's JSON and returns the parse error ("" if it parsed).
template <typename F>
std::string errorAfter(F edit) {
  json j = profileToJson(sampleProfile());
  edit(j);
  auto r = profileFromJson(j, "profiles/bad.json");
  return r.ok() ? std::string() : r.error().message;
}

void requireOneLineNaming(const std::string& msg, const std::string& field) {
  INFO(msg);
  REQUIRE(!msg.empty());
  REQUIRE(msg.find('\n') == std::string::npos);
  REQUIRE(msg.find("profiles/bad.json") != std::string::npos);
  REQUIRE(msg.find("'" + field + "'") != std::string::npos);
}

}  // namespace

TEST_CASE("profile JSON round trip keeps every field and foreign keys", "[profile]") {
  HardwareProfile p = sampleProfile();
  json j = profileToJson(p);
  auto back = profileFromJson(j, "mem");
  REQUIRE(back.ok());
  REQUIRE(profileToJson(*back) == j);
  CHECK(back->deviceClass == DeviceClass::kGpu);
  CHECK(back->opencl.workgroupSize == 128);
  CHECK(back->opencl.bufferAlignment == 512);
  REQUIRE(back->extra.at("other_tool").at("setting") == "64x64x16/4x4");
  REQUIRE(back->kernels.has_value());
  CHECK(back->kernels->set == std::set<std::string>{"attention.max_tile"});
  CHECK(deviceTuning(*back).attention.maxTile == 16);
  REQUIRE_FALSE(back->peakGflops.has_value());
  REQUIRE(back->accessTable->throughput.at(AccessPattern::kBlock8) ==
          p.accessTable->throughput.at(AccessPattern::kBlock8));

  auto path = std::filesystem::temp_directory_path() / "fbl_profile_roundtrip.json";
  REQUIRE(saveProfile(p, path.string()).ok());
  auto loaded = loadProfile(path.string());
  REQUIRE(loaded.ok());
  REQUIRE(profileToJson(*loaded) == j);
  std::filesystem::remove(path);
}

TEST_CASE("profile errors name the file and the field on one line", "[profile]") {
  requireOneLineNaming(errorAfter([](json& j) { j.erase("wave_size"); }), "wave_size");
  requireOneLineNaming(errorAfter([](json& j) { j["wave_size"] = -4; }), "wave_size");
  requireOneLineNaming(errorAfter([](json& j) { j["wave_size"] = "64"; }), "wave_size");
  requireOneLineNaming(errorAfter([](json& j) { j["image2d_max"]["height"] = 0; }), "image2d_max.height");
  requireOneLineNaming(errorAfter([](json& j) { j["image_storage"]["texture_cache"] = 1; }),
                       "image_storage.texture_cache");
  requireOneLineNaming(errorAfter([](json& j) { j["image_storage"]["pitch_alignment_pixels"] = -4; }),
                       "image_storage.pitch_alignment_pixels");
  requireOneLineNaming(errorAfter([](json& j) {
                         j["image_storage"]["supported"] = false;
                         j["image_storage"]["texture_cache"] = true;
                       }),
                       "image_storage");
  requireOneLineNaming(errorAfter([](json& j) { j["texture_block"] = 8; }), "texture_block");
  requireOneLineNaming(errorAfter([](json& j) { j["access_table"]["row"] = {1.0}; }), "access_table.row");
  requireOneLineNaming(errorAfter([](json& j) { j["access_table"]["block4"][1] = -1; }), "access_table.block4[1]");
  requireOneLineNaming(errorAfter([](json& j) { j["access_table"]["threads"] = {64, 8, 1}; }),
                       "access_table.threads");
  requireOneLineNaming(errorAfter([](json& j) { j["provenance"].erase("l2_cache_bytes"); }),
                       "provenance.l2_cache_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["provenance"]["wave_size"] = "guessed"; }),
                       "provenance.wave_size");
  requireOneLineNaming(errorAfter([](json& j) { j["provenance"]["bogus"] = "measured"; }), "provenance.bogus");
  // A null number must say it is pending, and a pending one must be null.
  requireOneLineNaming(errorAfter([](json& j) { j["bandwidth_gbps"] = nullptr; }), "bandwidth_gbps");
  requireOneLineNaming(errorAfter([](json& j) { j["peak_gflops"] = 100.0; }), "peak_gflops");
  requireOneLineNaming(errorAfter([](json& j) { j["schema"] = "other/2"; }), "schema");
  REQUIRE(errorAfter([](json&) {}).empty());
}

TEST_CASE("the memory block: limits with provenance, null while pending, optional as a whole", "[profile]") {
  auto back = profileFromJson(profileToJson(sampleProfile()), "mem");
  REQUIRE(back.ok());
  CHECK(back->memory.maxAllocBytes == (int64_t{1} << 30));
  CHECK_FALSE(back->memory.appBudgetBytes.has_value());
  requireOneLineNaming(errorAfter([](json& j) { j["memory"]["max_alloc_bytes"] = 0; }), "memory.max_alloc_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["memory"]["max_alloc_bytes"] = nullptr; }), "memory.max_alloc_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["memory"]["app_budget_bytes"] = 3000000000; }), "memory.app_budget_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["memory"]["global_bytes"] = 1000; }), "memory.max_alloc_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["memory"]["heap_bytes"] = 1; }), "memory.heap_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["provenance"].erase("memory.global_bytes"); }),
                       "provenance.memory.global_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["memory"] = 4; }), "memory");
  // A profile without the block says nothing about memory, and may not give its provenance.
  CHECK(errorAfter([](json& j) {
          j.erase("memory");
          for (const char* f : kMemoryFields) j["provenance"].erase(std::string("memory.") + f);
        }).empty());
  requireOneLineNaming(errorAfter([](json& j) { j.erase("memory"); }), "provenance.memory.global_bytes");
}

TEST_CASE("compile defaults: a base, a precision and a budget with provenance, each checked", "[profile]") {
  auto withDefaults = [](json& j) {
    j["compile_defaults"] = {{"base_weights", "int4"}, {"precision", "bf16"}, {"memory_budget", "4000000000"}};
    j["provenance"]["compile_defaults"] = "derived: what fits an app";
  };
  json j = profileToJson(sampleProfile());
  withDefaults(j);
  auto back = profileFromJson(j, "defaults");
  INFO((back.ok() ? "" : back.error().message));
  REQUIRE(back.ok());
  CHECK(back->compileDefaults.present);
  CHECK(back->compileDefaults.baseWeights == "int4");
  CHECK(back->compileDefaults.memoryBudget == "4000000000");
  CHECK(back->compileDefaults.precision == "bf16");
  CHECK(profileToJson(*back) == j);  // round trip
  requireOneLineNaming(errorAfter([&](json& k) { withDefaults(k); k["compile_defaults"]["base_weights"] = "int3"; }),
                       "compile_defaults.base_weights");
  requireOneLineNaming(errorAfter([&](json& k) { withDefaults(k); k["compile_defaults"]["memory_budget"] = "-5"; }),
                       "compile_defaults.memory_budget");
  // auto needs the app budget it stands for, which the sample does not give.
  requireOneLineNaming(errorAfter([&](json& k) { withDefaults(k); k["compile_defaults"]["memory_budget"] = "auto"; }),
                       "compile_defaults.memory_budget");
  requireOneLineNaming(errorAfter([&](json& k) { withDefaults(k); k["compile_defaults"]["precision"] = "fp8"; }),
                       "compile_defaults.precision");
  requireOneLineNaming(errorAfter([&](json& k) { withDefaults(k); k["compile_defaults"]["dtype"] = "fp16"; }),
                       "compile_defaults.dtype");
  requireOneLineNaming(errorAfter([&](json& k) { withDefaults(k); k["provenance"].erase("compile_defaults"); }),
                       "provenance.compile_defaults");
  requireOneLineNaming(errorAfter([](json& k) { k["provenance"]["compile_defaults"] = "derived: none given"; }),
                       "provenance.compile_defaults");
}

TEST_CASE("rtile_cost and bracket: the wave-footprint scoring and the unknowns' ends, each checked", "[profile]") {
  const fbl::profile::HardwareProfile sample = sampleProfile();
  auto withBlocks = [&](json& j) {
    j["rtile_cost"] = {{"model", "wave-footprint"}, {"tile", {128, 128, 16}}, {"work_items", 256}};
    j["provenance"]["rtile_cost"] = "derived: the MatMul's tiling";
    j["bracket"] = {{"l1_texture_cache_bytes", {sample.l1TextureCacheBytes, 2 * sample.l1TextureCacheBytes}},
                    {"texture_block", {{{"h", sample.textureBlock.h}, {"w", sample.textureBlock.w}}, {{"h", 2}, {"w", 2}}}},
                    {"cluster_cache_bytes", {0, 131072}},
                    {"slc_bytes", {0, 8388608}}};
    j["provenance"]["bracket"] = "estimated: each end's source";
  };
  json j = profileToJson(sample);
  withBlocks(j);
  auto back = profileFromJson(j, "blocks");
  INFO((back.ok() ? "" : back.error().message));
  REQUIRE(back.ok());
  REQUIRE(back->waveFootprint.has_value());
  CHECK(back->waveFootprint->workItems == 256);
  CHECK(back->bracket.textureBlocks.size() == 2);
  CHECK(back->bracket.slcBytes == std::vector<int64_t>{0, 8388608});
  CHECK(profileToJson(*back) == j);  // round trip
  requireOneLineNaming(errorAfter([&](json& k) { withBlocks(k); k["rtile_cost"]["model"] = "walk"; }), "rtile_cost.model");
  requireOneLineNaming(errorAfter([&](json& k) { withBlocks(k); k["rtile_cost"]["work_items"] = 100; }),
                       "rtile_cost.work_items");
  // Every list holds the profile's own value (0 for the levels no model has).
  requireOneLineNaming(errorAfter([&](json& k) { withBlocks(k); k["bracket"]["l1_texture_cache_bytes"] = {1}; }),
                       "bracket.l1_texture_cache_bytes");
  requireOneLineNaming(errorAfter([&](json& k) { withBlocks(k); k["bracket"]["texture_block"] = {{{"h", 7}, {"w", 7}}}; }),
                       "bracket.texture_block");
  requireOneLineNaming(errorAfter([&](json& k) { withBlocks(k); k["bracket"]["slc_bytes"] = {8388608}; }), "bracket.slc_bytes");
  requireOneLineNaming(errorAfter([&](json& k) { withBlocks(k); k["bracket"]["l3"] = {0}; }), "bracket.l3");
  requireOneLineNaming(errorAfter([&](json& k) { withBlocks(k); k["provenance"].erase("bracket"); }), "provenance.bracket");
}

TEST_CASE("profile load reports unreadable files in one line", "[profile]") {
  auto missing = loadProfile("/nonexistent/x.json");
  REQUIRE_FALSE(missing.ok());
  REQUIRE(missing.error().message.find("/nonexistent/x.json") != std::string::npos);
  auto path = std::filesystem::temp_directory_path() / "fbl_profile_garbage.json";
  std::ofstream(path) << "{ not json";
  auto garbage = loadProfile(path.string());
  REQUIRE_FALSE(garbage.ok());
  REQUIRE(garbage.error().message.find(path.string()) != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("access table lookup uses the largest thread count not above the request", "[profile]") {
  AccessTable t = *sampleProfile().accessTable;
  for (int threads : {1, 2, 7, 8, 9, 63, 64, 128}) {
    size_t expect = 0;  // naive: scan for the last count <= threads
    for (size_t i = 0; i < t.threads.size(); ++i)
      if (t.threads[i] <= threads) expect = i;
    REQUIRE(t.at(AccessPattern::kRow, threads) == t.throughput.at(AccessPattern::kRow)[expect]);
  }
}

TEST_CASE("every committed profile loads and validates", "[profile]") {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(FBL_SOURCE_DIR) + "/profiles")) {
    if (entry.path().extension() != ".json") continue;
    auto p = loadProfile(entry.path().string());
    INFO(entry.path().string() << ": " << (p.ok() ? std::string("ok") : p.error().message));
    REQUIRE(p.ok());
    REQUIRE(p->name == entry.path().stem().string());
    ++count;
  }
  REQUIRE(count >= 1);
}

TEST_CASE("the device class is stated, never guessed from the device's name", "[profile]") {
  json j = profileToJson(sampleProfile());
  j["device"] = "pthread-a-cpu-like-name";
  j["device_class"] = "gpu";
  auto gpu = profileFromJson(j, "mem");
  REQUIRE(gpu.ok());
  CHECK(gpu->deviceClass == DeviceClass::kGpu);
  j["device_class"] = "cpu";
  auto cpu = profileFromJson(j, "mem");
  REQUIRE(cpu.ok());
  CHECK(cpu->deviceClass == DeviceClass::kCpu);
  requireOneLineNaming(errorAfter([](json& j) { j.erase("device_class"); }), "device_class");
  requireOneLineNaming(errorAfter([](json& j) { j["device_class"] = "npu"; }), "device_class");
  requireOneLineNaming(errorAfter([](json& j) { j["provenance"].erase("device_class"); }), "provenance.device_class");
}

TEST_CASE("the opencl block is read into its typed part, a bad field refused by name", "[profile]") {
  requireOneLineNaming(errorAfter([](json& j) { j["opencl"] = {{"build_options", 128}}; }), "opencl.build_options");
  requireOneLineNaming(errorAfter([](json& j) { j["opencl"] = {{"workgroup_size", 0}}; }), "opencl.workgroup_size");
  requireOneLineNaming(errorAfter([](json& j) { j["opencl"] = {{"workgroup_size", "64"}}; }), "opencl.workgroup_size");
  requireOneLineNaming(errorAfter([](json& j) { j["opencl"] = {{"workgroup_size", 2048}}; }), "opencl.workgroup_size");
  requireOneLineNaming(errorAfter([](json& j) { j["opencl"] = {{"buffer_alignment_bytes", 48}}; }),
                       "opencl.buffer_alignment_bytes");
  requireOneLineNaming(errorAfter([](json& j) { j["opencl"] = {{"work_group", 64}}; }), "opencl.work_group");
  requireOneLineNaming(errorAfter([](json& j) { j["opencl"] = json::array(); }), "opencl");
  json j = profileToJson(sampleProfile());
  j["opencl"] = {{"build_options", "-cl-fast-relaxed-math"}, {"buffer_alignment_bytes", 128}};
  auto p = profileFromJson(j, "mem");
  REQUIRE(p.ok());
  CHECK(p->opencl.buildOptions == "-cl-fast-relaxed-math");
  CHECK(p->opencl.bufferAlignment == 128);
  CHECK(p->opencl.workgroupSize == 64);  // the default
}
