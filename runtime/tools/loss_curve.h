// fbl-train --loss-curve: the run's loss per optimizer step, and its evaluation losses, as a
// self-contained SVG line chart a person opens in a browser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::train {

struct LossPoint {
  int64_t step = 0;
  double loss = 0.0;
};

// The training losses as a line, the evaluation losses as dots, on shared axes with round
// ticks. Points whose loss is not finite are left out and counted in the subtitle.
std::string lossCurveSvg(const std::vector<LossPoint>& train, const std::vector<LossPoint>& eval, const std::string& title);

// The points of a --metrics file (JSON lines with "step" and "loss" or "eval_loss"); lines
// that are neither are skipped, so a file cut short by a killed run still reads.
void readMetricsPoints(const std::string& jsonl, std::vector<LossPoint>* train, std::vector<LossPoint>* eval);

}  // namespace fbl::train
