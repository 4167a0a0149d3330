// fbl-train --loss-curve's chart (runtime/tools/loss_curve.h): every finite loss drawn where its
// step and value put it, evaluations as dots, non-finite losses left out and counted, and the
// points read back from a --metrics file, cut-off lines skipped.
#include "runtime/tools/loss_curve.h"

#include <regex>

#include <catch2/catch.hpp>

#include "tests/runtime/temp_dir.h"

namespace fbl::testing {
namespace {

int64_t count(const std::string& s, const std::string& what) {
  int64_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("the loss curve draws every finite loss of the run, and evaluations as dots", "[train][loss-curve]") {
  std::vector<train::LossPoint> t, e;
  for (int64_t s = 1; s <= 50; ++s) t.push_back({s, 5.0 / static_cast<double>(s)});
  t.push_back({51, std::nan("")});
  e = {{10, 0.9}, {50, 0.2}};
  const std::string svg = train::lossCurveSvg(t, e, "llama-tiny.fbp <&>");
  CHECK(svg.rfind("<svg ", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("llama-tiny.fbp &lt;&amp;&gt;") != std::string::npos);
  CHECK(svg.find("50 training steps, 2 evaluations; 1 losses not finite, not drawn") != std::string::npos);
  // One polyline of the 50 finite training points.
  const size_t at = svg.find("<polyline");
  REQUIRE(at != std::string::npos);
  const std::string points = svg.substr(svg.find("points=\"", at) + 8, svg.find("\"/>", at) - svg.find("points=\"", at) - 8);
  CHECK(count(points, ",") == 50);
  // The curve falls from left to right: the first point is the highest (smallest y) and leftmost.
  const std::regex xy(R"(([0-9.]+),([0-9.]+))");
  std::vector<std::pair<double, double>> pts;
  for (auto it = std::sregex_iterator(points.begin(), points.end(), xy); it != std::sregex_iterator(); ++it)
    pts.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  REQUIRE(pts.size() == 50);
  for (size_t i = 1; i < pts.size(); ++i) {
    CHECK(pts[i].first > pts[i - 1].first);
    CHECK(pts[i].second >= pts[i - 1].second);
  }
  CHECK(svg.find("<title>step 10 eval loss 0.9</title>") != std::string::npos);
  CHECK(svg.find("<title>step 50 eval loss 0.2</title>") != std::string::npos);
  CHECK(svg.find("evaluation loss") != std::string::npos);
}

TEST_CASE("the loss curve of one step, or of none, is still a chart", "[train][loss-curve]") {
  const std::string one = train::lossCurveSvg({{7, 2.5}}, {}, "one");
  CHECK(one.find("1 training steps") != std::string::npos);
  CHECK(one.find("<title>step 7 loss 2.5</title>") != std::string::npos);
  CHECK(one.find("nan") == std::string::npos);
  CHECK(one.find("inf") == std::string::npos);
  const std::string none = train::lossCurveSvg({}, {{1, INFINITY}}, "none");
  CHECK(none.find("no losses to draw") != std::string::npos);
  CHECK(none.find("</svg>") != std::string::npos);
}

TEST_CASE("a metrics file's losses read back, a line cut short skipped", "[train][loss-curve]") {
  std::vector<train::LossPoint> t, e;
  train::readMetricsPoints(
      "{\"step\": 1, \"loss\": 5.5, \"lr\": 0.001, \"samples_per_s\": 3}\n"
      "{\"step\": 1, \"eval_loss\": 5.25}\n"
      "not json\n"
      "{\"step\": 2, \"loss\": 5.0, \"lr\": 0.001, \"samples_per_s\": 3}\n"
      "{\"step\": 3, \"lo",
      &t, &e);
  REQUIRE(t.size() == 2);
  CHECK(t[1].step == 2);
  CHECK(t[1].loss == 5.0);
  REQUIRE(e.size() == 1);
  CHECK(e[0].loss == 5.25);
}

}  // namespace
}  // namespace fbl::testing
