// The planner's reading of a profile (compiler/plan/profile.h): the device class and the `opencl`
// block come from the profile's typed parts (tests/profile/profile_test.cc checks their parsing),
// and the build options reach the plan's program (the H200's register cap, docs/kernels.md
// "Registers"); profiles without them build with -cl-std=CL1.2 alone. The `kernels` block
// (profile/kernel_blocks.h) likewise: every committed profile has one, a bad one is refused naming
// the field, and its numbers reach the plan's launches.
#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/plan/profile.h"
#include "compiler/profile/profile.h"

namespace fbl::plan {

using driver::CompileArgs;
using driver::compileModel;
namespace {

// The PoCL profile with its kernels block replaced.
Result<Profile> withKernels(const nlohmann::json& kernels) {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  nlohmann::json j = profile::profileToJson(*hw);
  j["kernels"] = kernels;
  FBL_ASSIGN(profile::HardwareProfile edited, profile::profileFromJson(j, "test-profile.json"));
  return plannerProfile(edited, "test-profile.json");
}

planfile::Plan compiledWithPath(const std::string& path, const std::string& storage = "auto") {
  CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = path;
  a.storage = storage;
  auto c = compileModel(a);
  if (!c.ok()) FAIL(c.error().message);
  return std::move(c->plan);
}

planfile::Plan compiledWith(const std::string& profile) {
  return compiledWithPath(std::string(FBL_SOURCE_DIR) + "/profiles/" + profile + ".json");
}

}  // namespace

TEST_CASE("a profile's opencl.build_options follow -cl-std=CL1.2 in the plan", "[plan][profile]") {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/nvidia-h200.json");
  REQUIRE(hw.ok());
  auto h200 = plannerProfile(*hw, "nvidia-h200.json");
  REQUIRE(h200.ok());
  CHECK(h200->buildOptions.find("-cl-nv-maxrregcount=") != std::string::npos);
  CHECK(h200->buildOptions.find("-DFBL_NO_REQD_WORK_GROUP_SIZE") != std::string::npos);
  CHECK(compiledWith("nvidia-h200").buildOptions == "-cl-std=CL1.2 " + h200->buildOptions);
  CHECK(compiledWith("pocl-cpu").buildOptions == "-cl-std=CL1.2");
}

TEST_CASE("the planner takes its device class from the profile", "[plan][profile]") {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  hw->kernels.reset();  // the device class's defaults, not the profile's numbers
  auto cpu = plannerProfile(*hw, "pocl-cpu.json");
  REQUIRE(cpu.ok());
  CHECK(cpu->deviceClass == profile::DeviceClass::kCpu);
  CHECK(cpu->workgroupSize == hw->opencl.workgroupSize);
  hw->deviceClass = profile::DeviceClass::kGpu;  // the device's name still says pthread
  auto gpu = plannerProfile(*hw, "pocl-cpu.json");
  REQUIRE(gpu.ok());
  CHECK(gpu->deviceClass == profile::DeviceClass::kGpu);
  CHECK(cpu->tuning.matmulTile.tm == 64);   // codegen::matmulTiling of each class
  CHECK(gpu->tuning.matmulTile.tm == 128);
}

TEST_CASE("every committed profile states its kernel tiling numbers", "[plan][profile]") {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FBL_SOURCE_DIR "/profiles")) {
    if (entry.path().extension() != ".json") continue;
    auto hw = profile::loadProfile(entry.path().string());
    REQUIRE(hw.ok());
    INFO(entry.path().string());
    CHECK(hw->kernels.has_value());
    auto p = plannerProfile(*hw, entry.path().string());
    INFO((p.ok() ? std::string("ok") : p.error().message));
    REQUIRE(p.ok());
    ++count;
  }
  CHECK(count >= 5);
}

TEST_CASE("a malformed kernels block is refused naming the field", "[plan][profile]") {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  const nlohmann::json good = profile::profileToJson(*hw).at("kernels");
  auto refused = [&](const char* why, auto edit) {
    nlohmann::json k = good;
    edit(k);
    auto p = withKernels(k);
    INFO(k.dump());
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().message.find(why) != std::string::npos);
    CHECK(p.error().message.find("test-profile.json") != std::string::npos);
  };
  refused("kernels.provenance", [](nlohmann::json& k) { k.erase("provenance"); });
  refused("'reduce_workgroup'", [](nlohmann::json& k) { k["reduce_workgroup"] = 8; });
  refused("'tile'", [](nlohmann::json& k) { k["attention"]["tile"] = 8; });
  refused("kernels.attention.work_items", [](nlohmann::json& k) { k["attention"]["work_items"] = 48; });
  refused("kernels.attention.work_items", [](nlohmann::json& k) { k["attention"]["work_items"] = 512; });
  refused("kernels.attention.max_tile", [](nlohmann::json& k) { k["attention"]["max_tile"] = 24; });
  refused("kernels.attention.min_whole_tile", [](nlohmann::json& k) { k["attention"]["min_whole_tile"] = 12; });
  refused("kernels.attention.min_groups_per_unit",
          [](nlohmann::json& k) { k["attention"]["min_groups_per_unit"] = -1; });
  refused("kernels.loss_workgroup", [](nlohmann::json& k) { k["loss_workgroup"] = "64"; });
  refused("kernels.matmul_tile", [](nlohmann::json& k) { k["matmul_tile"] = "64x64x16/3x4"; });
  refused("kernels.matmul_pipeline", [](nlohmann::json& k) { k["matmul_pipeline"] = 4; });
  refused("kernels.convert_workgroup", [](nlohmann::json& k) { k["convert_workgroup"] = {16}; });
  refused("kernels.elementwise_items", [](nlohmann::json& k) { k["elementwise_items"] = 0; });
  refused("kernels.elementwise_items", [](nlohmann::json& k) { k["elementwise_items"] = 17; });
  refused("\"kernels\"", [](nlohmann::json& k) { k = nlohmann::json::array(); });
  REQUIRE(withKernels(good).ok());
}

TEST_CASE("the kernels block's numbers reach the plan's launches", "[plan][profile]") {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  auto p = plannerProfile(*hw, "pocl-cpu.json");
  REQUIRE(p.ok());
  CHECK(p->tuning.matmulTile.tm == 64);
  CHECK(p->tuning.reduceMaxWorkgroup == 1);
  // Image storage packs tensors into images through the conversion kernel: its work-group is the
  // profile's.
  nlohmann::json j = profile::profileToJson(*hw);
  j["kernels"]["convert_workgroup"] = {8, 8};
  j["name"] = "fbl_kernels_profile";
  const auto path = std::filesystem::temp_directory_path() / "fbl_kernels_profile.json";
  std::ofstream(path) << j.dump(2);
  auto localsOf = [](const planfile::Plan& plan) {
    std::set<std::vector<int64_t>> locals;
    for (const auto& t : plan.transfers)
      if (t.local.size() == 2) locals.insert(t.local);  // the 2-D ones: conversions (1-D: buffer copies)
    return locals;
  };
  const auto committed = localsOf(compiledWithPath(FBL_SOURCE_DIR "/profiles/pocl-cpu.json", "image"));
  const auto edited = localsOf(compiledWithPath(path.string(), "image"));
  CHECK(committed == std::set<std::vector<int64_t>>{{16, 4}});
  CHECK(edited == std::set<std::vector<int64_t>>{{8, 8}});
  std::filesystem::remove(path);
}

TEST_CASE("kernels.elementwise_items picks the elementwise template", "[plan][profile][elementwise]") {
  // The H200's profile sets 4 elements a work-item; PoCL's leaves the built-in 1.
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/nvidia-h200.json");
  REQUIRE(hw.ok());
  auto h200 = plannerProfile(*hw, "nvidia-h200.json");
  REQUIRE(h200.ok());
  CHECK(h200->tuning.elementwiseItems == 4);
  CHECK(compiledWith("nvidia-h200").program.find("uint at[4];") != std::string::npos);
  CHECK(compiledWith("pocl-cpu").program.find("uint at[") == std::string::npos);
}

}  // namespace fbl::plan
