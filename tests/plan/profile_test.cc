// The planner's reading of a profile (compiler/plan/profile.h): the `opencl` block's build options
// reach the plan's program (the H200's register cap, docs/kernels.md "Registers"), profiles
// without them build with -cl-std=CL1.2 alone, and a malformed block is refused naming the field
// and the file.
#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/plan/profile.h"
#include "compiler/profile/profile.h"

namespace fbl::plan {

using driver::CompileArgs;
using driver::compileModel;
namespace {

// The PoCL profile with its opencl block replaced, as the planner reads it.
Result<Profile> withOpencl(const nlohmann::json& opencl) {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  hw->extra["opencl"] = opencl;
  return plannerProfile(*hw, "test-profile.json");
}

planfile::Plan compiledWith(const std::string& profile) {
  CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/" + profile + ".json";
  auto c = compileModel(a);
  if (!c.ok()) FAIL(c.error().message);
  return std::move(c->plan);
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

TEST_CASE("a malformed opencl block is refused naming the field", "[plan][profile]") {
  auto p = withOpencl({{"build_options", 128}});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("opencl.build_options") != std::string::npos);
  CHECK(p.error().message.find("test-profile.json") != std::string::npos);
  p = withOpencl({{"workgroup_size", 0}});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("opencl.workgroup_size") != std::string::npos);
  p = withOpencl({{"workgroup_size", "64"}});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("opencl.workgroup_size") != std::string::npos);
  p = withOpencl({{"buffer_alignment_bytes", 48}});
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("opencl.buffer_alignment_bytes") != std::string::npos);
  p = withOpencl(nlohmann::json::array());
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("\"opencl\"") != std::string::npos);
  REQUIRE(withOpencl({{"workgroup_size", 128}}).ok());
}

}  // namespace fbl::plan
