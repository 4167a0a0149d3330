// The profile's "matmul" and "kernels" blocks (compiler/profile/kernel_blocks.h), read with the
// rest of the profile: every committed profile reads back as written, the kernels block writes
// back exactly the fields the file sets, and a malformed block is refused in one line naming the
// file and the field, whatever the JSON holds.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "compiler/profile/profile.h"

namespace fbl::profile {
namespace {

using nlohmann::json;

json committed(const std::string& name) {
  auto hw = loadProfile(FBL_SOURCE_DIR "/profiles/" + name + ".json");
  REQUIRE(hw.ok());
  return profileToJson(*hw);
}

// The parse error of `j` with `edit` applied ("" where it parses).
template <typename F>
std::string errorAfter(json j, F edit) {
  edit(j);
  auto r = profileFromJson(j, "profiles/bad.json");
  return r.ok() ? std::string() : r.error().message;
}

void requireRefusal(const std::string& message, const std::string& field) {
  INFO(message);
  REQUIRE_FALSE(message.empty());
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find("profiles/bad.json") != std::string::npos);
  CHECK(message.find(field) != std::string::npos);
}

}  // namespace

TEST_CASE("every committed profile's matmul and kernels blocks read back as written", "[profile]") {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FBL_SOURCE_DIR "/profiles")) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    auto hw = loadProfile(entry.path().string());
    REQUIRE(hw.ok());
    std::ifstream in(entry.path());
    const json file = json::parse(in);
    REQUIRE(hw->kernels.has_value());
    // What the file sets, exactly: its numbers are stated, not left to the defaults.
    CHECK(kernelsBlockToJson(*hw->kernels) == file.at("kernels"));
    CHECK(hw->matmul.has_value() == file.contains("matmul"));
    auto back = profileFromJson(profileToJson(*hw), entry.path().string());
    REQUIRE(back.ok());
    CHECK(back->matmul == hw->matmul);
    CHECK(back->kernels == hw->kernels);
    CHECK(deviceTuning(*back) == deviceTuning(*hw));
    ++count;
  }
  CHECK(count >= 5);
}

TEST_CASE("the matmul block's numbers are typed as the file states them", "[profile]") {
  auto hw = loadProfile(FBL_SOURCE_DIR "/profiles/nvidia-h200.json");
  REQUIRE(hw.ok());
  REQUIRE(hw->matmul.has_value());
  const MatmulBlock& m = *hw->matmul;
  CHECK(m.candidates.size() >= 2);
  CHECK(m.localMemoryBytes == 49152);
  CHECK(m.narrow.maxSide == 16);
  CHECK(m.narrow.batchProducts > 1);
  // Attention's local budget follows matmul.local_memory_bytes, and the kernels block says so too.
  CHECK(deviceTuning(*hw).attention.localBytes == 49152);
  // Without the kernels block: the device class's numbers, within the matmul block's local memory.
  HardwareProfile bare = *hw;
  bare.kernels.reset();
  CHECK(deviceTuning(bare).matmulTile == matmulTiling(DeviceClass::kGpu));
  CHECK(deviceTuning(bare).attention.localBytes == 49152);
  bare.matmul.reset();
  CHECK(deviceTuning(bare).attention.localBytes == defaultTuning(DeviceClass::kGpu).attention.localBytes);
}

TEST_CASE("a malformed matmul or kernels block is refused naming the file and the field", "[profile]") {
  const json h200 = committed("nvidia-h200");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["launch_us"] = "fast"; }), "matmul.launch_us");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["max_split"] = 0; }), "matmul.max_split");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["tilling"] = json::array(); }), "'tilling'");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["tilings"][0]["efficiency"] = "high"; }),
                 "matmul.tilings[0].efficiency");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["tilings"][1]["groups_per_unit"] = 0.5; }),
                 "matmul.tilings[1].groups_per_unit");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["tilings"][0]["tile"] = "128x128"; }),
                 "matmul.tilings[0]");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["narrow"]["stage_narrow_operand"] = 1; }),
                 "matmul.narrow.stage_narrow_operand");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"]["narrow"]["work_items"] = "64"; }),
                 "matmul.narrow.work_items");
  requireRefusal(errorAfter(h200, [](json& j) { j["matmul"] = 3; }), "\"matmul\"");
  // Tilings are costed with the profile's facts: without its peak, they cannot be.
  requireRefusal(errorAfter(h200, [](json& j) { j["peak_gflops"] = nullptr; }), "peak_gflops");
  requireRefusal(errorAfter(h200, [](json& j) { j["kernels"]["attention"]["max_tile"] = 24; }),
                 "kernels.attention.max_tile");
  requireRefusal(errorAfter(h200, [](json& j) { j["kernels"].erase("provenance"); }), "kernels.provenance");
  CHECK(errorAfter(h200, [](json&) {}).empty());
}

}  // namespace fbl::profile
