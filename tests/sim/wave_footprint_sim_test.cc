// The lane model (compiler/layout/wave_footprint.h) against the simulator it abstracts: Figure 16's
// products at 1/32 size, fblayout and reuse, on an Adreno (8 lines of 2 x 8 texels) and on Mali
// (128 lines of 4 x 4, waves of 16), each also at every point of its bracket (`--bracket`: 2 and
// 4 KiB, lines of 2 x 8, 4 x 4 and 2 x 2 texels). The texture-L1 misses of each pass must be
// equal: the model is what R-Tile selection and the staging choice rely on.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "compiler/codegen/matmul_tiling.h"
#include "compiler/layout/rtile_wave_cost.h"
#include "compiler/profile/profile.h"
#include "harness/matmul_run.h"
#include "harness/operator_plans.h"

using namespace fbl;

TEST_CASE("lane model: Figure 16's texture-L1 misses equal the simulator's", "[sim][oclgrind]") {
  const std::vector<std::string> names = {"adreno-830", "mali-g925"};
  const std::string out =
      (std::filesystem::temp_directory_path() / ("fbl-lane-test-" + std::to_string(::getpid()) + ".json")).string();
  std::string cmd =
      std::string(FBL_BIN_DIR) + "/fbl-bench cache matmul --scale 32 --bracket --strategy fblayout --strategy reuse";
  for (const std::string& n : names) cmd += " --profile " + std::string(FBL_SOURCE_DIR) + "/profiles/" + n + ".json";
  REQUIRE(std::system((cmd + " --json " + out + " > /dev/null").c_str()) == 0);
  std::ifstream in(out);
  const nlohmann::json report = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  const codegen::MatmulTiling t = codegen::matmulTiling(profile::DeviceClass::kGpu);
  const harness::MatmulShape shape{512 / 32, 2048 / 32, 8192 / 32};
  int compared = 0;
  for (const nlohmann::json& r : report.at("results")) {
    // "adreno-830", or a bracket point "adreno-830@l1=...": the plans are the profile's.
    const std::string model = r.at("profile").get<std::string>();
    auto p = profile::loadProfile(std::string(FBL_SOURCE_DIR) + "/profiles/" + model.substr(0, model.find('@')) + ".json");
    REQUIRE(p.ok());
    auto st = strategy::parseStrategy(r.at("strategy").get<std::string>());
    REQUIRE(st.ok());
    auto plan = harness::planMatmul(*st, shape, *p);
    REQUIRE(plan.ok());
    const nlohmann::json& mm = report.at("memory_models").at(model);
    const layout::TextureL1 l1{mm.at("texture_l1").at("bytes").get<int64_t>() / mm.at("texture_l1").at("line_bytes").get<int64_t>(),
                               mm.at("texture_block").at("h").get<int>(), mm.at("texture_block").at("w").get<int>()};
    const layout::StagedTiling staged{t.tm, t.tn, t.tk, t.wgX() * t.wgY(), p->waveSize};
    for (const harness::MatmulStep& step : plan->steps) {
      const harness::StagedOperands ops = harness::stagedOperands(*plan, step, t);  // as the bench's products are
      const auto [l, rr] = harness::laneOperands(ops);
      const layout::FootprintCount lane = layout::textureL1Misses(ops.dims.m, ops.dims.n, ops.dims.k, l, rr, staged, l1);
      const std::string pass = harness::matmulPassName(step.pass);
      INFO(model << " " << r.at("strategy").get<std::string>() << " " << pass);
      // Phases are the kernels' names, matmul_<pass>_<launch>: one launch a pass at this size.
      int64_t simulated = 0;
      for (const auto& [phase, c] : r.at("phases").items())
        if (phase.rfind(pass + "_", 0) == 0) simulated += c.at("counters").at("l1_texture_misses").get<int64_t>();
      CHECK(simulated > 0);
      CHECK(lane.misses == simulated);
      ++compared;
    }
  }
  CHECK(compared == 3 * static_cast<int>(report.at("results").size()));
  CHECK(compared == 6 * (12 + 6));  // 2 strategies x 3 passes, at 12 Adreno and 6 Mali bracket points
}
