// `fbl-bench cache` end to end on Oclgrind: the Figure-4 patterns against each phone profile's
// access table, a streaming footprint, a tiny plan per buffer path, and bad input.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "compiler/profile/profile.h"

using nlohmann::json;

namespace {

const std::string kBench = std::string(FBL_BIN_DIR) + "/fbl-bench";
const std::string kFblc = std::string(FBL_BIN_DIR) + "/fblc";
std::string profilePath(const std::string& name) { return std::string(FBL_SOURCE_DIR) + "/profiles/" + name + ".json"; }
std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("fbl-cache-test-" + std::to_string(::getpid()) + "-" + name)).string();
}

// Runs `fbl-bench cache ARGS --json OUT`; returns the exit status, the JSON and stderr's text.
struct Run {
  int status = -1;
  json report;
  std::string err;
};
Run cache(const std::string& args) {
  const std::string out = tmp("report.json"), err = tmp("stderr.txt");
  std::filesystem::remove(out);
  Run r;
  r.status = std::system((kBench + " cache " + args + " --json " + out + " > /dev/null 2> " + err).c_str());
  std::ifstream e(err);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  if (std::ifstream in(out); in) r.report = json::parse(in, nullptr, false);
  return r;
}

}  // namespace

TEST_CASE("cache patterns: each phone profile's simulated Figure 4 keeps its access table's order", "[sim][oclgrind]") {
  // Thread counts of the tables (1, 8, 64); 128-row bands (fblc profile uses 512: same orders
  // here, four times the run time). One execution serves the three profiles.
  const int rows = 128;
  const std::vector<std::string> names = {"adreno-830", "adreno-730", "mali-g925"};
  std::string args = "patterns --rows " + std::to_string(rows);
  for (const std::string& name : names) args += " --profile " + profilePath(name);
  auto first = fbl::profile::loadProfile(profilePath(names[0]));
  REQUIRE(first.ok());
  for (int t : first->accessTable->threads) args += " --threads " + std::to_string(t);
  Run r = cache(args);
  REQUIRE(r.status == 0);
  for (const std::string& name : names) {
    INFO(name);
    auto prof = fbl::profile::loadProfile(profilePath(name));
    REQUIRE(prof.ok());
    REQUIRE(prof->accessTable.has_value());
    const fbl::profile::AccessTable& table = *prof->accessTable;
    REQUIRE(table.threads == first->accessTable->threads);
    const json& rel = r.report.at("relative_throughput").at(name);
    // No pattern the table ranks above another is simulated below it. Where the simulator ties
    // them (row and block-8 at 1-8 threads; everything on Mali below 64 threads, where each
    // block is fetched once whatever the order) see docs/cache.md.
    for (size_t ti = 0; ti < table.threads.size(); ++ti) {
      const std::string t = std::to_string(table.threads[ti]);
      for (auto a : fbl::profile::kAllAccessPatterns)
        for (auto b : fbl::profile::kAllAccessPatterns) {
          if (table.throughput.at(a)[ti] <= table.throughput.at(b)[ti]) continue;
          INFO(fbl::profile::accessPatternName(a) << " vs " << fbl::profile::accessPatternName(b) << " at " << t);
          CHECK(rel.at(fbl::profile::accessPatternName(a)).at(t).get<double>() >=
                rel.at(fbl::profile::accessPatternName(b)).at(t).get<double>());
        }
    }
    // At the table's widest thread count every profile separates the block walks from column.
    const std::string wide = std::to_string(table.threads.back());
    CHECK(rel.at("block8").at(wide).get<double>() > 1.2);
    CHECK(rel.at("block4").at(wide).get<double>() > 1.2);
    // A single thread streams its band once: DRAM reads exactly the band's texels (every L2
    // holds 64 x 128 RGBA-float texels), and writes back one line of its one output float.
    for (const json& e : r.report.at("results")) {
      if (e.at("profile") != name || e.at("threads") != 1) continue;
      CHECK(e.at("counters").at("dram_read_bytes") == 64 * rows * 16);
      CHECK(e.at("counters").at("dram_write_bytes") == r.report.at("memory_models").at(name).at("l2").at("line_bytes"));
      CHECK(e.at("loads") == 64 * rows);
    }
  }
}

TEST_CASE("cache MODEL: a tiny plan on Oclgrind, through each buffer path", "[sim][oclgrind]") {
  const std::string model = tmp("attention.onnx");
  REQUIRE(std::system((kFblc + " zoo llama-attention --tiny -o " + model + " > /dev/null").c_str()) == 0);
  // Three profiles in one command. adreno-830 and adreno-730 compile to the same plan, so one
  // Oclgrind execution serves both: they see the same accesses, counted once in `simulator`.
  Run r = cache(model + " --profile " + profilePath("adreno-830") + " --profile " + profilePath("adreno-730") +
                " --profile " + profilePath("mali-g925") + " --strategy fblayout --launches");
  REQUIRE(r.status == 0);
  const json& results = r.report.at("results");
  REQUIRE(results.size() == 3);
  CHECK(results[0].at("loads") == results[1].at("loads"));
  const int64_t items830 = results[0].at("counters").at("work_items"), itemsMali = results[2].at("counters").at("work_items");
  CHECK(results[1].at("counters").at("work_items") == items830);
  CHECK(r.report.at("simulator").at("work_items").get<int64_t>() <= items830 + itemsMali);
  for (const json& res : results) {
    const std::string name = res.at("profile");
    INFO(name);
    CHECK(res.at("strategy") == "fblayout");
    for (const char* k : {"loads", "stores", "l1_misses", "l2_misses", "dram_bytes", "estimated_ms"}) CHECK(res.contains(k));
    for (const char* ph : {"forward", "backward", "optimizer"}) CHECK(res.at("phases").contains(ph));
    // Per-launch records add up to the strategy's totals.
    int64_t loads = 0, dram = 0;
    double ms = 0;
    for (const json& l : res.at("launches")) {
      loads += l.at("loads").get<int64_t>();
      dram += l.at("dram_bytes").get<int64_t>();
      ms += l.at("estimated_ms").get<double>();
      const json& c = l.at("counters");
      CHECK(c.at("l2_misses").get<int64_t>() * 64 <= c.at("dram_read_bytes").get<int64_t>());
    }
    CHECK(loads == res.at("loads").get<int64_t>());
    CHECK(dram == res.at("dram_bytes").get<int64_t>());
    CHECK(ms == Approx(res.at("estimated_ms").get<double>()));
    CHECK(res.at("loads").get<int64_t>() > 0);
    CHECK(res.at("estimated_ms").get<double>() > 0);
    // Plans use buffers: on Adreno they skip L1, on Mali they go through the load/store L1.
    const json& c = res.at("counters");
    const int64_t l1 = c.at("l1_buffer_hits").get<int64_t>() + c.at("l1_buffer_misses").get<int64_t>();
    if (name != "mali-g925") CHECK(l1 == 0);
    else CHECK(l1 > 0);
  }
}

TEST_CASE("cache: bad input is one error line and a non-zero exit", "[sim][oclgrind]") {
  Run noModel = cache("patterns --profile " + profilePath("pocl-cpu"));
  CHECK(noModel.status != 0);
  CHECK(noModel.err.find("no 'memory_model' block") != std::string::npos);
  Run missing = cache(tmp("absent.onnx") + " --profile " + profilePath("adreno-830"));
  CHECK(missing.status != 0);
  CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);
  Run strategy = cache("matmul --scale 64 --strategy fastest --profile " + profilePath("adreno-830"));
  CHECK(strategy.status != 0);
  CHECK(strategy.err.find("--strategy must be all, fblayout, reuse or explicit") != std::string::npos);
  Run scale = cache("matmul --scale 3 --profile " + profilePath("adreno-830"));
  CHECK(scale.status != 0);
  CHECK(scale.err.find("--scale 3 must divide") != std::string::npos);
}
