// `fblc explain PLAN [--html OUT]`: why every tensor of a plan has its layout, which
// transformation nodes the layout pipeline eliminated or kept explicit, and what each kernel
// launch moves and computes (modeled). docs/explain.md describes the output.
//
// The plan's runtime part holds no layout reasoning, so `fblc compile` stores it in the plan's
// optional "explain" section (explainSection below): the layout assignment's JSON and the graph
// the pipeline ran on (live values with their layout and why, live nodes with their inputs,
// outputs, class, transformation status and modeled FLOPs). A plan without that section (an
// older one) still explains its launches and bytes; layouts then read "unknown".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/ir/graph.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/support/result.h"
#include "runtime/plan_file.h"

namespace fbl::report {

// The plan's "explain" section for graph `g` and its layout assignment.
nlohmann::json explainSection(const ir::Graph& g, const passes::LayoutAssignment& a);

struct ExplainTensor {
  std::string name, dtype, role;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
  std::string layout;   // "linear", "linear, transposed", "R-Tile 4x8 strips", "MNN image", "TFLite texture",
                        // "unknown"
  std::string storage;  // "buffer", or "image WxH #slot"
  std::string why;
};

struct ExplainNode {
  std::string name, op, phase, cls;  // cls: Table-1 class ("FTI-D", ...)
  std::string layout;                // of its first output: "linear", "rtile", "unknown"
  std::string transform;             // "", "eliminated", "explicit"
  std::string reason;                // the transformation decision's reason
  int64_t flops = 0;
  std::vector<int32_t> preds;        // producers of its inputs, indices into ExplainReport::nodes
};

struct ExplainLaunch {
  std::string phase, kernel, node, kind;
  int64_t bytes = 0;  // every distinct tensor argument's planned bytes
  int64_t flops = 0;  // the node's modeled FLOPs, on the node's first launch (0 on the others)
};

struct ExplainReport {
  std::string model, profile, strategy;
  bool hasSection = false;  // false: the plan predates the explain section
  nlohmann::json transforms;  // transformsToJson: totals, explicit nodes, conversions
  nlohmann::json chains;      // FTD-D chains and their chosen tiles
  std::vector<std::string> notes;
  std::string memory;  // report::memorySummaryLine: the peak, the largest allocation, whether they fit
  bool memoryFits = true;  // the plan within the profile's limits (or none known)
  // From --profile: the roofline that models each launch's time on the page (0: not given).
  double peakGflops = 0, bandwidthGBs = 0;
  // From --profile: the step estimate (step_estimate.h) at the FP32 peak; empty without one.
  std::string estimate;
  std::vector<ExplainTensor> tensors;
  std::vector<ExplainNode> nodes;  // graph order (topological)
  std::vector<ExplainLaunch> launches;
};

// Errors name what is inconsistent in the section; the caller adds the file name.
Result<ExplainReport> buildExplainReport(const planfile::Plan& plan);
std::string formatExplain(const ExplainReport& r);
// One self-contained page (inline CSS, JS and SVG): the graph by phase and the three tables.
std::string renderExplainHtml(const ExplainReport& r);

struct ExplainArgs {
  std::string plan;
  std::string html;     // optional output page
  std::string profile;  // optional: the profile whose memory limits the plan is judged against
};
// The command: one line per error (naming the file), exit code 1 on error.
int runExplain(const ExplainArgs& args);

}  // namespace fbl::report
