// `fbl-bench estimate` against the simulator on a model small enough for both: the executed
// FLOPs it counts for each MatMul launch (padded tiles, a LoRA term's extra K steps, fused work)
// against the FP operations Oclgrind executed in that launch. A tiled product's padding doubles
// its work here (64 rows on 128-row tiles), so a count of useful FLOPs would be 2x off.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace {

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("fbl-estimate-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

nlohmann::json run(const std::string& args, const std::string& out) {
  REQUIRE(std::system((std::string(FBL_BIN_DIR) + "/" + args + " --json " + out + " > /dev/null").c_str()) == 0);
  std::ifstream in(out);
  nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  return j;
}

}  // namespace

TEST_CASE("estimate: each MatMul launch's executed FLOPs are the simulator's", "[sim][oclgrind]") {
  const std::string model = tmp("attention.onnx"), profile = std::string(FBL_SOURCE_DIR) + "/profiles/adreno-830.json";
  REQUIRE(std::system((std::string(FBL_BIN_DIR) + "/fblc zoo llama-attention --tiny --seq 64 --hidden 128 --heads 2 -o " +
                       model + " > /dev/null")
                          .c_str()) == 0);
  const std::string common = model + " --profile " + profile + " --strategy fblayout --launches";
  const nlohmann::json sim = run("fbl-bench cache " + common, tmp("sim.json"));
  // The simulator's MODEL form compiles without the profile's defaults; so does the estimate here.
  const nlohmann::json est = run("fbl-bench estimate " + common + " --no-profile-defaults", tmp("est.json"));
  std::filesystem::remove(model);
  const nlohmann::json& simulated = sim.at("results").at(0).at("launches");
  const nlohmann::json& estimated = est.at("strategies").at(0).at("launch_work");
  REQUIRE(simulated.size() == estimated.size());
  double simSum = 0, estSum = 0;
  int tiled = 0, narrow = 0;
  for (size_t i = 0; i < simulated.size(); ++i) {
    const std::string node = estimated[i].at("node"), kernel = estimated[i].at("kernel");
    REQUIRE(simulated[i].at("node") == node);
    if (kernel.find("matmul") == std::string::npos) continue;
    const double s = simulated[i].at("counters").at("flops").get<double>(), e = estimated[i].at("flops").get<double>();
    INFO(node << " (" << kernel << "): simulated " << s << ", estimated " << e);
    // Tiled products (over 10^6 FLOPs here) within their fused epilogue's share (the model
    // counts an epilogue's modelled FLOPs, Oclgrind its vector operations); the narrow kernel's
    // tree sums and a fused Mul make a few percent on products of 1.3 10^5.
    if (s > 1e6) {
      ++tiled;
      CHECK(std::fabs(e / s - 1) < 0.005);
    } else {
      ++narrow;
      CHECK(std::fabs(e / s - 1) < 0.05);
    }
    simSum += s, estSum += e;
  }
  CHECK(tiled >= 4);
  CHECK(narrow >= 10);
  CHECK(std::fabs(estSum / simSum - 1) < 0.01);
}
