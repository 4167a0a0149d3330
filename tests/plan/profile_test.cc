// The planner's reading of a profile (compiler/plan/profile.h): the `opencl` block's build options
// reach the plan's program (the H200's register cap, docs/kernels.md "Registers"), profiles
// without them build with -cl-std=CL1.2 alone, and a malformed block is refused naming the field.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "compiler/plan/compile_command.h"
#include "compiler/plan/profile.h"

namespace fbl::plan {
namespace {

std::string writeProfile(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
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
  auto h200 = loadProfile(FBL_SOURCE_DIR "/profiles/nvidia-h200.json");
  REQUIRE(h200.ok());
  CHECK(h200->buildOptions.find("-cl-nv-maxrregcount=") != std::string::npos);
  CHECK(h200->buildOptions.find("-DFBL_NO_REQD_WORK_GROUP_SIZE") != std::string::npos);
  CHECK(compiledWith("nvidia-h200").buildOptions == "-cl-std=CL1.2 " + h200->buildOptions);
  CHECK(compiledWith("pocl-cpu").buildOptions == "-cl-std=CL1.2");
}

TEST_CASE("a malformed opencl block is refused naming the field", "[plan][profile]") {
  const std::string typed = writeProfile("fbl-profile-bad-options.json",
                                         R"({"name": "p", "opencl": {"build_options": 128}})");
  auto p = loadProfile(typed);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("opencl.build_options") != std::string::npos);
  CHECK(p.error().message.find(typed) != std::string::npos);
  const std::string size = writeProfile("fbl-profile-bad-size.json", R"({"name": "p", "opencl": {"workgroup_size": 0}})");
  p = loadProfile(size);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().message.find("opencl.workgroup_size") != std::string::npos);
}

}  // namespace fbl::plan
