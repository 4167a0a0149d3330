#include "runtime/tools/loss_curve.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/tools/xml_escape.h"

namespace fbl::train {

namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 70, kRight = 20, kTop = 56, kBottom = 48;  // the plot area's margins

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `count` ticks over `span`.
double tickStep(double span, int count) {
  if (!(span > 0)) return 1.0;
  const double raw = span / count, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * mag;
}

}  // namespace

std::string lossCurveSvg(const std::vector<LossPoint>& train, const std::vector<LossPoint>& eval, const std::string& title) {
  std::vector<LossPoint> t, e;
  int64_t dropped = 0;
  for (const auto* from : {&train, &eval})
    for (const LossPoint& p : *from) {
      if (!std::isfinite(p.loss)) {
        ++dropped;
        continue;
      }
      (from == &train ? t : e).push_back(p);
    }
  auto byStep = [](const LossPoint& a, const LossPoint& b) { return a.step < b.step; };
  std::stable_sort(t.begin(), t.end(), byStep);
  std::stable_sort(e.begin(), e.end(), byStep);

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft, xmlEscape(title));
  const std::string subtitle =
      fmt::format("{} training steps{}{}", t.size(), e.empty() ? "" : fmt::format(", {} evaluations", e.size()),
                  dropped ? fmt::format("; {} losses not finite, not drawn", dropped) : "");
  s += fmt::format("<text x=\"{}\" y=\"40\" fill=\"#555\">{}</text>\n", kLeft, xmlEscape(subtitle));
  if (t.empty() && e.empty()) return s + fmt::format("<text x=\"{}\" y=\"{}\">no losses to draw</text>\n</svg>\n", kLeft, kHeight / 2);

  int64_t x0 = INT64_MAX, x1 = INT64_MIN;
  double y0 = INFINITY, y1 = -INFINITY;
  for (const auto* pts : {&t, &e})
    for (const LossPoint& p : *pts) {
      x0 = std::min(x0, p.step), x1 = std::max(x1, p.step);
      y0 = std::min(y0, p.loss), y1 = std::max(y1, p.loss);
    }
  if (x1 == x0) --x0, ++x1;  // one step: centre it
  if (y1 - y0 < 1e-12 * std::max(1.0, std::fabs(y1))) y0 -= 0.5, y1 += 0.5;
  const double yStep = tickStep(y1 - y0, 5);
  y0 = std::floor(y0 / yStep) * yStep, y1 = std::ceil(y1 / yStep) * yStep;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto X = [&](double step) { return kLeft + (step - static_cast<double>(x0)) / static_cast<double>(x1 - x0) * pw; };
  auto Y = [&](double loss) { return kTop + (y1 - loss) / (y1 - y0) * ph; };

  // Grid, ticks and axis labels.
  for (double v = y0; v <= y1 + yStep / 2; v += yStep)
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>"
                     "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.4g}</text>\n",
                     kLeft, Y(v), kLeft + pw, kLeft - 6, Y(v) + 4, v);
  const double xStep = std::max(1.0, tickStep(static_cast<double>(x1 - x0), 8));
  for (double v = std::ceil(static_cast<double>(x0) / xStep) * xStep; v <= static_cast<double>(x1); v += xStep)
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e4e4e4\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:.0f}</text>\n",
                     X(v), kTop, kTop + ph, kTop + ph + 16, v);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", kLeft, kTop, pw, ph);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">optimizer step</text>\n", kLeft + pw / 2, kHeight - 8);
  s += fmt::format("<text x=\"16\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0:.1f})\">loss</text>\n",
                   kTop + ph / 2);

  // The curves, each point with its value as a tooltip.
  if (!t.empty()) {
    s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
    for (const LossPoint& p : t) s += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(p.step)), Y(p.loss));
    s.back() = '"';
    s += "/>\n";
    if (t.size() <= 200)
      for (const LossPoint& p : t)
        s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2\" fill=\"#1f77b4\"><title>step {} loss {:.6g}</title></circle>\n",
                         X(static_cast<double>(p.step)), Y(p.loss), p.step, p.loss);
  }
  for (const LossPoint& p : e)
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"#d62728\"><title>step {} eval loss {:.6g}</title></circle>\n",
                     X(static_cast<double>(p.step)), Y(p.loss), p.step, p.loss);
  // Legend, top right of the plot.
  const double lx = kLeft + pw - 150, ly = kTop + 14;
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#1f77b4\" stroke-width=\"2\"/>"
                   "<text x=\"{3:.1f}\" y=\"{4:.1f}\">training loss</text>\n",
                   lx, ly, lx + 20, lx + 26, ly + 4);
  if (!e.empty())
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"#d62728\"/><text x=\"{:.1f}\" y=\"{:.1f}\">evaluation loss</text>\n",
                     lx + 10, ly + 18, lx + 26, ly + 22);
  return s + "</svg>\n";
}

void readMetricsPoints(const std::string& jsonl, std::vector<LossPoint>* train, std::vector<LossPoint>* eval) {
  std::istringstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const int64_t step = j["step"].get<int64_t>();
    if (j.contains("loss") && j["loss"].is_number()) train->push_back({step, j["loss"].get<double>()});
    else if (j.contains("eval_loss") && j["eval_loss"].is_number()) eval->push_back({step, j["eval_loss"].get<double>()});
  }
}

}  // namespace fbl::train
