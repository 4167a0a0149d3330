#include "bench/base_weights_bench.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/strategy_run.h"
#include "compiler/quant/base_weights.h"
#include "runtime/plan_file.h"

namespace fbl::bench {

namespace {

// Weights as trained transformers have them, roughly: Gaussian with std 0.02 (the usual init),
// and a heavy-tailed version (Student's t, 3 degrees of freedom, scaled to the same std), whose
// rare large values are what makes groups pay.
std::vector<float> weights(const std::string& kind, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> w(static_cast<size_t>(n));
  if (kind == "gaussian") {
    std::normal_distribution<float> d(0.0f, 0.02f);
    for (float& x : w) x = d(rng);
  } else {
    std::student_t_distribution<float> d(3.0f);
    const float scale = 0.02f / std::sqrt(3.0f);  // t(3) has variance 3
    for (float& x : w) x = d(rng) * scale;
  }
  return w;
}

}  // namespace

int runBaseWeightsBench(const BaseWeightsBenchOptions& o) {
  if (o.rows < 1 || o.cols < 1 || o.rows % 128 != 0 || o.cols % 128 != 0)
    return fmt::print(stderr, "error: --rows and --cols must be positive multiples of 128\n"), 2;
  nlohmann::json report = nlohmann::json::array();
  fmt::print("{} x {} weights, groups along the rows (the reduction of x W)\n", o.rows, o.cols);
  fmt::print("  {:<12} {:<8} {:>6} {:>14} {:>16} {:>18}\n", "weights", "encoding", "group", "bits/weight",
             "relative RMS", "max error / max");
  for (const std::string kind : {"gaussian", "student-t3"}) {
    const std::vector<float> w = weights(kind, o.rows * o.cols, o.seed);
    double norm = 0, wmax = 0;
    for (float x : w) {
      norm += double(x) * x;
      wmax = std::max(wmax, double(std::fabs(x)));
    }
    for (int bits : {16, 8, 4})
      for (int64_t group : {16, 32, 64, 128}) {
        if (bits == 16 && group != 16) continue;
        const layout::Encoding e{bits, bits == 16 ? 0 : group, 0, o.rows, o.cols};
        auto bytes = quant::encode("w", w, e);
        if (!bytes.ok()) return fmt::print(stderr, "error: {}\n", bytes.error().message), 1;
        const std::vector<float> back = quant::decode(*bytes, e);
        double err = 0, worst = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          const double d = double(back[i]) - w[i];
          err += d * d;
          worst = std::max(worst, std::fabs(d));
        }
        const double bitsPerWeight = 8.0 * planfile::encodedBytes(bits, e.group, o.rows, o.cols) / double(w.size());
        const double rms = std::sqrt(err / norm);
        fmt::print("  {:<12} {:<8} {:>6} {:>14.3f} {:>16.2e} {:>18.2e}\n", kind, e.str().substr(0, e.str().find(' ')),
                   bits == 16 ? std::string("-") : std::to_string(group), bitsPerWeight, rms, worst / wmax);
        report.push_back({{"weights", kind}, {"bits", bits}, {"group", e.group}, {"bits_per_weight", bitsPerWeight},
                          {"relative_rms_error", rms}, {"max_error_over_max", worst / wmax}});
      }
  }
  if (o.json == "-") fmt::print("{}\n", report.dump(1));
  else if (!o.json.empty())
    if (Status e = writeTextFile(o.json, report.dump(1) + "\n"); !e.ok()) return fmt::print(stderr, "error: {}\n", e.error().message), 1;
  return 0;
}

}  // namespace fbl::bench
