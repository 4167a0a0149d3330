// fblc explain: the plan's explain section joined with its tensors and launches. Expected
// values are recomputed here from the plan and the section (naive loops), not pasted.
#include <set>

#include <catch2/catch.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/report/explain.h"
#include "tests/runtime/status_assertions.h"

using namespace fbl;

namespace {

driver::Compiled compileTiny(const std::string& baseWeights = "fp32", const std::string& storage = "auto") {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.baseWeights = baseWeights;
  a.storage = storage;
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  return std::move(c).value();
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("explain: tensors, transformations and launches of llama-tiny", "[analysis][explain]") {
  const driver::Compiled c = compileTiny();
  const nlohmann::json& section = c.plan.explain;
  REQUIRE(section.is_object());
  REQUIRE(section.contains("layout_assignment"));
  auto r = report::buildExplainReport(c.plan);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->hasSection);
  CHECK(r->nodes.size() == section["nodes"].size());
  CHECK(r->tensors.size() == c.plan.tensors.size());

  // Tensors: a tensor the plan stores tiled shows as an R-Tile, and only an R-Tile of the
  // assignment can be stored tiled; every tensor says why (an R-Tile kept row-major says so).
  std::set<std::string> rtiles;
  for (const auto& v : section["layout_assignment"]["rtiles"]) rtiles.insert(v["value"].get<std::string>());
  int64_t storedTiled = 0;
  for (size_t i = 0; i < r->tensors.size(); ++i) {
    const report::ExplainTensor& t = r->tensors[i];
    INFO(t.name);
    CHECK(!t.why.empty());
    CHECK(t.layout != "unknown");
    const bool stored = c.plan.tensors[i].layout.rfind("rtile", 0) == 0;
    CHECK((t.layout.rfind("R-Tile", 0) == 0) == stored);
    if (stored) CHECK(rtiles.count(t.name) == 1);
    if (!stored && rtiles.count(t.name)) CHECK(t.why.find("stored row-major") != std::string::npos);
    storedTiled += stored;
  }
  CHECK(storedTiled > 0);

  // Transformations: the same eliminated/explicit split as the assignment's totals.
  int64_t eliminated = 0, explicitCount = 0;
  for (const report::ExplainNode& n : r->nodes) {
    eliminated += n.transform == "eliminated";
    explicitCount += n.transform == "explicit";
  }
  CHECK(eliminated == r->transforms["eliminated"].get<int64_t>());
  CHECK(explicitCount == r->transforms["explicit"].get<int64_t>());

  // Launches: bytes of the distinct arguments; each node's FLOPs counted once.
  REQUIRE(r->launches.size() == c.plan.launches.size());
  int64_t launchFlops = 0;
  for (size_t i = 0; i < c.plan.launches.size(); ++i) {
    const auto& l = c.plan.launches[i];
    std::vector<bool> seen(c.plan.tensors.size(), false);
    int64_t bytes = 0;
    for (int32_t a : l.args)
      if (!seen[a]) seen[a] = true, bytes += planfile::argumentBytes(c.plan.tensors[a]);
    CHECK(r->launches[i].bytes == bytes);
    CHECK(r->launches[i].node == l.node);
    launchFlops += r->launches[i].flops;
  }
  // Fused launches ("host+Op") compute their host and the nodes they list.
  std::set<std::string> launched;
  int64_t fusedLaunches = 0;
  for (const auto& l : c.plan.launches) {
    launched.insert(l.fused.empty() ? l.node : l.node.substr(0, l.node.find('+')));
    launched.insert(l.fused.begin(), l.fused.end());
    fusedLaunches += !l.fused.empty();
  }
  CHECK(fusedLaunches > 0);
  int64_t nodeFlops = 0;
  for (const report::ExplainNode& n : r->nodes)
    if (launched.count(n.name)) nodeFlops += n.flops;
  CHECK(launchFlops == nodeFlops);
  CHECK(launchFlops > 0);

  const std::string text = report::formatExplain(*r);
  CHECK_THAT(text, Catch::Contains("graph: " + std::to_string(r->nodes.size()) + " nodes"));
  CHECK_THAT(text, Catch::Contains("launches (" + std::to_string(r->launches.size()) + ")"));
}

TEST_CASE("explain: a base stored int4 shows as its encoding, not as an R-Tile kept row-major", "[analysis][explain]") {
  const driver::Compiled c = compileTiny("int4");
  auto r = report::buildExplainReport(c.plan);
  REQUIRE(r.ok());
  int64_t encoded = 0;
  for (size_t i = 0; i < r->tensors.size(); ++i) {
    const planfile::Tensor& t = c.plan.tensors[i];
    if (t.encoding.empty()) continue;
    INFO(t.name);
    ++encoded;
    CHECK(r->tensors[i].layout == "linear, " + t.layout);
    CHECK(t.layout.rfind("int4 g32", 0) == 0);
    CHECK(r->tensors[i].why.find("frozen base stored int4") == 0);
    CHECK(r->tensors[i].why.find("packed at load") == std::string::npos);
    CHECK(c.plan.explain["base_weights"].contains(t.source));
  }
  CHECK(encoded == c.storage["base_weights"]["encoded"].get<int64_t>());
  CHECK(encoded > 0);
}

TEST_CASE("explain: an image counts its texels' bytes, in its tensor and in every launch that reads it",
          "[analysis][explain]") {
  const driver::Compiled c = compileTiny("fp32", "image");
  auto r = report::buildExplainReport(c.plan);
  REQUIRE(r.ok());
  int64_t images = 0;
  for (size_t i = 0; i < r->tensors.size(); ++i) {
    const planfile::Tensor& t = c.plan.tensors[i];
    if (!t.image()) continue;
    ++images;
    CHECK(t.bytes == 0);  // nothing in the arena
    CHECK(r->tensors[i].bytes == t.imageWidth * t.imageHeight * 16);
  }
  REQUIRE(images > 0);
  int64_t withImage = 0;
  for (size_t i = 0; i < c.plan.launches.size(); ++i) {
    const std::set<int32_t> args(c.plan.launches[i].args.begin(), c.plan.launches[i].args.end());
    int64_t bytes = 0, image = 0;
    for (int32_t a : args) {
      bytes += c.plan.tensors[a].image() ? c.plan.tensors[a].imageWidth * c.plan.tensors[a].imageHeight * 16 : c.plan.tensors[a].bytes;
      image += c.plan.tensors[a].image();
    }
    CHECK(r->launches[i].bytes == bytes);
    withImage += image > 0;
  }
  CHECK(withImage > 0);
}

TEST_CASE("explain: the section round-trips, a plan without it still explains launches",
          "[analysis][explain]") {
  driver::Compiled c = compileTiny();
  const std::string bytes = planfile::serialize(c.plan);
  planfile::Plan back = fbl::testing::requireValue(planfile::parse(bytes));
  CHECK(back.explain == c.plan.explain);

  c.plan.explain = nlohmann::json();
  CHECK(!planfile::toJson(c.plan).contains("explain"));
  auto r = report::buildExplainReport(c.plan);
  REQUIRE(r.ok());
  CHECK(!r->hasSection);
  std::set<std::string> launched;
  for (const auto& l : c.plan.launches) launched.insert(l.node);
  CHECK(r->nodes.size() == launched.size());
  for (const report::ExplainTensor& t : r->tensors)
    if (t.role != "scratch") CHECK(t.layout == "unknown");
  CHECK_THAT(report::formatExplain(*r), Catch::Contains("no explain section"));

  c.plan.explain = {{"version", 1}, {"values", 3}};
  CHECK(!report::buildExplainReport(c.plan).ok());
}

TEST_CASE("explain: names cannot break out of the page's script", "[analysis][explain]") {
  report::ExplainReport r;
  r.model = "m</script><script>alert(1)</script>";
  r.nodes.push_back({"n</script>", "Add", "forward", "FTI-C", "linear", "", "", 1, {}});
  const std::string page = report::renderExplainHtml(r);
  CHECK(count(page, "</script>") == 2);  // the data's and the code's own closing tags
  CHECK(count(page, "<script") == 2);
}
