// `fblc diff`: identical plans are the same (exit 0), a strategy change names what it changed
// (exit 1), a file that is not a plan is one line (exit 2). Expected differences are read from
// the two plans themselves.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/report/plan_diff.h"

namespace fbl::report {
namespace {

std::string writePlan(const planfile::Plan& p, const std::string& name) {
  const std::string path = "/tmp/fbl-plan-diff-" + name + ".fbp";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << planfile::serialize(p);
  return path;
}

planfile::Plan compileLlama(const std::string& strategy, int gradAccum = 1) {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.strategy = strategy;
  a.gradAccum = gradAccum;
  auto c = driver::compileModel(a);
  REQUIRE(c.ok());
  return c->plan;
}

struct Run {
  int rc;
  std::string out, err;
};

Run diff(const std::string& a, const std::string& b, bool json = false) {
  std::ostringstream out, err;
  const int rc = runDiff({a, b, json}, out, err);
  return {rc, out.str(), err.str()};
}

TEST_CASE("fblc diff: a strategy change names its tensors, launches and memory", "[analysis][diff]") {
  const planfile::Plan fb = compileLlama("fblayout"), reuse = compileLlama("reuse");
  const std::string a = writePlan(fb, "fblayout"), b = writePlan(reuse, "reuse");

  const Run same = diff(a, a);
  CHECK(same.rc == 0);
  CHECK_THAT(same.out, Catch::Contains("no differences"));
  CHECK(diff(a, writePlan(compileLlama("fblayout"), "fblayout-again")).rc == 0);

  const Run text = diff(a, b);
  CHECK(text.rc == 1);
  CHECK(text.err.empty());
  CHECK_THAT(text.out, Catch::Contains("arena " + std::to_string(fb.arenaBytes) + " -> " + std::to_string(reuse.arenaBytes)));
  CHECK_THAT(text.out, Catch::Contains("launches: " + std::to_string(fb.launches.size()) + " -> " + std::to_string(reuse.launches.size())));
  // Every tensor of both whose layout differs is named with both layouts.
  int layoutChanges = 0;
  for (const auto& t : reuse.tensors) {
    const int32_t i = fb.findTensor(t.name);
    if (i < 0 || fb.tensors[i].layout == t.layout) continue;
    ++layoutChanges;
    CHECK_THAT(text.out, Catch::Contains("~ " + t.name + ": layout " + fb.tensors[i].layout + " -> " + t.layout));
  }
  CHECK(layoutChanges > 0);
  // Tensors only one plan has are listed as added or removed.
  for (const auto& t : reuse.tensors)
    if (fb.findTensor(t.name) < 0) CHECK_THAT(text.out, Catch::Contains("  + " + std::string(planfile::roleName(t.role)) + " " + t.name + " "));
  for (const auto& t : fb.tensors)
    if (reuse.findTensor(t.name) < 0) CHECK_THAT(text.out, Catch::Contains("  - " + std::string(planfile::roleName(t.role)) + " " + t.name + " "));

  const Run js = diff(a, b, true);
  CHECK(js.rc == 1);
  const auto j = nlohmann::json::parse(js.out);
  CHECK(j.at("same") == false);
  CHECK(j.at("memory").at("arena_bytes").at("after") == reuse.arenaBytes);
  CHECK(j.at("launches").at("after") == reuse.launches.size());
  CHECK(j.at("tensors").at("changed").size() >= static_cast<size_t>(layoutChanges));
  for (const auto& c : j.at("tensors").at("changed"))
    if (c.at("changes").contains("layout")) {
      const int32_t i = reuse.findTensor(c.at("name").get<std::string>());
      REQUIRE(i >= 0);
      CHECK(c.at("changes").at("layout").at("after") == reuse.tensors[i].layout);
    }
  // Launches are matched by node, not position: the reuse plan's extra launches are additions,
  // and a launch present in both is not reported as changed only because it moved.
  CHECK(j.at("launches").at("added").size() + j.at("launches").at("changed").size() > 0);
}

TEST_CASE("fblc diff: training settings are named one by one", "[analysis][diff]") {
  const std::string a = writePlan(compileLlama("fblayout"), "accum1"), b = writePlan(compileLlama("fblayout", 4), "accum4");
  const Run text = diff(a, b);
  CHECK(text.rc == 1);
  CHECK_THAT(text.out, Catch::Contains("training: training_loop.grad_accum 1 -> 4"));
  CHECK_THAT(text.out, Catch::Contains("+ state "));  // the accumulators
  const auto j = nlohmann::json::parse(diff(a, b, true).out);
  CHECK(j.at("training").at("training_loop.grad_accum").at("after") == "4");
  CHECK_FALSE(j.at("training").contains("training_loop.schedule"));  // unchanged settings are not listed
  CHECK(std::find(j.at("other").begin(), j.at("other").end(), "training_loop") == j.at("other").end());
}

TEST_CASE("fblc diff: a file that is not a plan exits 2 with one line", "[analysis][diff]") {
  planfile::Plan p;
  p.model = "m";
  const std::string good = writePlan(p, "empty");
  std::string bytes = planfile::serialize(p);
  bytes[bytes.size() / 2] ^= 1;
  const std::string bad = "/tmp/fbl-plan-diff-corrupt.fbp";
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << bytes;
  for (const auto& [a, b, what] : {std::tuple{good, bad, std::string("checksum")},
                                   std::tuple{std::string("/tmp/fbl-plan-diff-missing.fbp"), good, std::string("cannot open")},
                                   std::tuple{good, std::string("/tmp"), std::string("'/tmp' is a directory, not a plan file")}}) {
    const Run r = diff(a, b);
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Contains(what));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(diff(good, good).rc == 0);
}

}  // namespace
}  // namespace fbl::report
