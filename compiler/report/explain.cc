// `fblc explain`: the plan's explain section joined with its tensors and launches.
//   1. explainSection (at compile time): live values with their layout and why (ValueLayout.why,
//      else the R-Tile entry's note), live nodes with their inputs, outputs, Table-1 class,
//      transformation status and modeled FLOPs (flops.h), and the assignment's own JSON.
//   2. buildExplainReport: each plan tensor takes the layout of the graph value of its name
//      (views share their source's tensor); each launch sums its distinct arguments' bytes and
//      carries its node's FLOPs on the node's first launch, so per-phase sums count each once.
//   3. formatExplain prints tables; renderExplainHtml (explain_html.cc) draws the page.
#include "compiler/report/explain.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "compiler/analysis/flops.h"
#include "compiler/passes/layout_assignment_printer.h"
#include "compiler/report/memory_report.h"
#include "compiler/report/step_estimate.h"
#include "runtime/plan_check.h"

namespace fbl::report {

namespace {

constexpr int kSectionVersion = 1;

const char* phaseText(ir::Phase p) {
  switch (p) {
    case ir::Phase::Forward: return "forward";
    case ir::Phase::Backward: return "backward";
    case ir::Phase::Optimizer: return "optimizer";
  }
  return "forward";
}

nlohmann::json valueJson(const ir::Graph& g, const passes::LayoutAssignment& a, ir::ValueId v) {
  const passes::ValueLayout& vl = a.values[v];
  const passes::RTileEntry* e = a.rtileOf(v);
  nlohmann::json j{{"name", g.values[v].name}};
  if (e) {
    j["layout"] = "rtile";
    j["tile"] = e->tile().str();
    j["why"] = vl.why.empty() ? e->note : vl.why;
  } else {
    j["layout"] = "linear";
    j["why"] = vl.why.empty() ? "linear: no tile-by-tile reduction reads it" : vl.why;
  }
  return j;
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

// "1234567" -> "1.23M": tables stay narrow and the order of magnitude is what matters.
std::string human(int64_t x) {
  const char* unit[] = {"", "K", "M", "G", "T"};
  double d = static_cast<double>(x);
  int u = 0;
  while (d >= 1000.0 && u < 4) {
    d /= 1000.0;
    ++u;
  }
  return u == 0 ? std::to_string(x) : fmt::format("{:.3g}{}", d, unit[u]);
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

size_t widthOf(size_t w, const std::string& s) { return std::min<size_t>(48, std::max(w, s.size())); }

// Reads the section into `r`; throws nlohmann's exceptions on a malformed one (caught above).
Status readSection(const nlohmann::json& s, ExplainReport& r, std::map<std::string, size_t>& valueIndex,
                   std::vector<nlohmann::json>& values) {
  if (s.value("version", 0) != kSectionVersion)
    return makeError("explain section version {} is not supported; recompile the plan", s.value("version", 0));
  const nlohmann::json& la = s.at("layout_assignment");
  r.strategy = la.value("strategy", "");
  r.transforms = la.value("transforms", nlohmann::json::object());
  r.chains = la.value("chains", nlohmann::json::array());
  r.notes = la.value("notes", std::vector<std::string>{});
  for (const auto& v : s.at("values")) {
    valueIndex[v.at("name").get<std::string>()] = values.size();
    values.push_back(v);
  }
  std::vector<int32_t> producer(values.size(), -1);
  const auto& nodes = s.at("nodes");
  for (const auto& n : nodes) {
    ExplainNode en;
    en.name = n.at("name").get<std::string>();
    en.op = n.at("op").get<std::string>();
    en.phase = n.at("phase").get<std::string>();
    en.cls = n.value("class", "-");
    en.flops = n.value("flops", int64_t{0});
    en.transform = n.value("transform", "");
    en.reason = n.value("reason", "");
    const auto outs = n.at("out").get<std::vector<int64_t>>();
    en.layout = "unknown";
    for (int64_t o : outs) {
      if (o < 0 || o >= static_cast<int64_t>(values.size()))
        return makeError("explain section: node '{}' names a value out of range", en.name);
      producer[o] = static_cast<int32_t>(r.nodes.size());
    }
    if (!outs.empty()) en.layout = values[outs[0]].value("layout", "unknown");
    r.nodes.push_back(std::move(en));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<int32_t> preds;
    for (int64_t v : nodes[i].at("in").get<std::vector<int64_t>>()) {
      if (v < 0 || v >= static_cast<int64_t>(values.size()))
        return makeError("explain section: node '{}' names a value out of range", r.nodes[i].name);
      if (producer[v] >= 0 && producer[v] != static_cast<int32_t>(i)) preds.insert(producer[v]);
    }
    r.nodes[i].preds.assign(preds.begin(), preds.end());
  }
  return Status::success();
}

}  // namespace

nlohmann::json explainSection(const ir::Graph& g, const passes::LayoutAssignment& a) {
  const std::vector<bool> live = g.liveValues();
  std::vector<int64_t> index(g.values.size(), -1);
  nlohmann::json values = nlohmann::json::array(), nodes = nlohmann::json::array();
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!live[v]) continue;
    index[v] = static_cast<int64_t>(values.size());
    values.push_back(valueJson(g, a, static_cast<ir::ValueId>(v)));
  }
  auto ids = [&index](const std::vector<ir::ValueId>& vs) {
    std::vector<int64_t> out;
    for (ir::ValueId v : vs)
      if (v != ir::kNoValue && index[v] >= 0) out.push_back(index[v]);
    return out;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.dead) continue;
    nlohmann::json j{{"name", n.name},
                     {"op", n.op},
                     {"phase", phaseText(n.phase)},
                     {"class", passes::opClassName(a.nodeClass[i])},
                     {"in", ids(n.inputs)},
                     {"out", ids(n.outputs)},
                     {"flops", analysis::nodeFlops(g, n)}};
    const passes::TransformStatus& t = a.transforms[i];
    if (t.isTransform && a.nodeClass[i] != passes::OpClass::kNone) {
      j["transform"] = t.eliminated ? "eliminated" : "explicit";
      j["reason"] = t.reason;
    }
    nodes.push_back(std::move(j));
  }
  // The assignment's own per-node list repeats `nodes` below: dropped, the plan ships to phones.
  nlohmann::json assignment = passes::assignmentToJson(g, a);
  assignment.erase("nodes");
  return {{"version", kSectionVersion},
          {"layout_assignment", std::move(assignment)},
          {"values", std::move(values)},
          {"nodes", std::move(nodes)}};
}

Result<ExplainReport> buildExplainReport(const planfile::Plan& plan) {
  ExplainReport r;
  r.model = plan.model;
  r.profile = plan.profile;
  std::map<std::string, size_t> valueIndex;
  std::vector<nlohmann::json> values;
  std::map<std::string, int64_t> nodeFlops;
  if (plan.explain.is_object() && !plan.explain.empty()) {
    r.hasSection = true;
    try {
      FBL_TRY(readSection(plan.explain, r, valueIndex, values));
    } catch (const nlohmann::json::exception& e) {
      return makeError("explain section is malformed: {}", e.what());
    }
    for (const ExplainNode& n : r.nodes) nodeFlops[n.name] = n.flops;
  }
  for (const planfile::Tensor& t : plan.tensors) {
    // An image's bytes are its texels' (16 each), not its arena bytes (none).
    ExplainTensor et{t.name, t.dtype, planfile::roleName(t.role), t.shape, planfile::argumentBytes(t), "unknown",
                     t.image() ? fmt::format("image {}x{} #{}", t.imageWidth, t.imageHeight, t.imageSlot) : "buffer",
                     ""};
    if (auto it = valueIndex.find(t.name); it != valueIndex.end()) {
      const nlohmann::json& v = values[it->second];
      // The plan's own storage first: the pipeline may pick an R-Tile that the lowering keeps
      // row-major (a reader or writer without layouts; layout_lowering.h step 4).
      const bool chosen = v.value("layout", "") == "rtile";
      const bool stored = t.layout.rfind("rtile", 0) == 0;
      et.layout = stored ? "R-Tile " + t.layout.substr(6)
                  : t.layout == "image" ? "MNN image"
                  : t.layout == "texture" ? "TFLite texture"
                  : t.layout == "transposed" ? "linear, transposed" : "linear";
      et.why = v.value("why", "");
      if (t.layout == "transposed")
        et.why = "stored transposed: a product reduces along its columns, which this way are its rows "
                 "(matmul.narrow.k_contiguous_weights); " + et.why;
      if (t.pack >= 0 && et.why.find("packed at load") == std::string::npos) et.why += "; packed at load";
      if (!t.encoding.empty()) {
        // A frozen weight stored narrower (--base-weights): its layout is the encoding's.
        et.layout = "linear, " + t.layout;
        std::string pipeline = et.why;
        if (const size_t at = pipeline.find("; packed at load"); at != std::string::npos) pipeline.erase(at, 16);
        et.why = fmt::format("frozen base stored {} (--base-weights, docs/precision.md): products and gathers "
                             "dequantize it, and the weights file holds its bytes; {}", t.layout, pipeline);
      } else if (chosen && !stored) {
        const std::string because = plan.explain.value("storage_why", nlohmann::json::object()).value(t.name, "");
        et.why = fmt::format("R-Tile {} chosen, stored row-major ({}); {}", v.value("tile", ""),
                             because.empty() ? "read back, or a kernel without layouts reads or writes it" : because,
                             et.why);
      }
    } else if (t.role == planfile::Role::Scratch) {
      et.layout = "linear";
      et.why = "scratch of one kernel (partial results)";
    } else if (t.role == planfile::Role::Counter) {
      et.layout = "linear";
      et.why = "counts of one kernel's groups, zeroed at load and left zero by each launch";
    } else if (r.hasSection) {
      et.why = "not a value of the layout pipeline's graph";
    } else {
      et.why = "the plan has no explain section (compiled before `fblc explain` existed)";
    }
    r.tensors.push_back(std::move(et));
  }
  std::set<std::string> seen;
  for (const planfile::Launch& l : plan.launches) {
    ExplainLaunch el{l.phase, plan.kernelNames[l.kernel], l.node, l.kind, 0, 0};
    for (int32_t a : std::set<int32_t>(l.args.begin(), l.args.end())) el.bytes += planfile::argumentBytes(plan.tensors[a]);
    // A fused launch (node "host+Op+Op") computes its host and every fused node; each node's
    // FLOPs count on the first launch that computes it.
    std::vector<std::string> computed = l.fused;
    computed.push_back(l.node);
    for (size_t k = 0; k < l.fused.size() && computed.back().rfind('+') != std::string::npos; ++k)
      computed.back().erase(computed.back().rfind('+'));
    for (const std::string& name : computed)
      if (seen.insert(name).second)
        if (auto it = nodeFlops.find(name); it != nodeFlops.end()) el.flops += it->second;
    r.launches.push_back(std::move(el));
  }
  if (!r.hasSection) {
    // No graph: one node per launching node, in launch order, so the page still draws phases.
    std::map<std::string, size_t> at;
    for (const ExplainLaunch& l : r.launches)
      if (at.emplace(l.node, r.nodes.size()).second)
        r.nodes.push_back({l.node, l.kernel, l.phase, "-", "unknown", "", "", 0, {}});
  }
  return r;
}

std::string formatExplain(const ExplainReport& r) {
  std::ostringstream o;
  o << fmt::format("plan {} (profile {}), layout strategy {}\n", r.model, r.profile,
                   r.strategy.empty() ? "unknown" : r.strategy);
  if (!r.memory.empty()) o << r.memory << "\n";
  if (!r.estimate.empty()) o << "estimate: " << r.estimate << " (fbl-bench estimate, docs/benchmarks.md)\n";
  if (!r.hasSection)
    o << "note: this plan has no explain section (compiled before `fblc explain` existed): layouts and "
         "FLOPs are unknown; recompile it for them\n";
  if (r.transforms.is_object() && r.transforms.contains("total"))
    o << fmt::format("transformations: {} total, {} eliminated ({} tile-mapped), {} explicit; {} conversions\n",
                     r.transforms.value("total", 0), r.transforms.value("eliminated", 0),
                     r.transforms.value("tile_mapped", 0), r.transforms.value("explicit", 0),
                     r.transforms.value("conversions", nlohmann::json::array()).size());
  o << fmt::format("graph: {} nodes\n", r.nodes.size());
  for (const std::string& n : r.notes) o << "note: " << n << "\n";

  size_t wn = 4, wl = 6, ws = 6;
  for (const ExplainTensor& t : r.tensors)
    wn = widthOf(wn, t.name), wl = widthOf(wl, t.layout), ws = widthOf(ws, t.storage);
  o << fmt::format("\ntensors ({}): name, dtype[shape], role, bytes, layout, storage: why\n", r.tensors.size());
  for (const ExplainTensor& t : r.tensors)
    o << fmt::format("  {} {:<20} {:<12} {:>8}  {}  {}  {}\n", pad(t.name, wn), t.dtype + shapeText(t.shape), t.role,
                     human(t.bytes), pad(t.layout, wl), pad(t.storage, ws), t.why);

  std::vector<const ExplainNode*> tr;
  for (const ExplainNode& n : r.nodes)
    if (!n.transform.empty()) tr.push_back(&n);
  size_t wt = 4;
  for (const ExplainNode* n : tr) wt = widthOf(wt, n->name);
  o << fmt::format("\ntransformation nodes ({}): node, op, phase, decision: reason\n", tr.size());
  for (const ExplainNode* n : tr)
    o << fmt::format("  {} {:<10} {:<9} {:<10}  {}\n", pad(n->name, wt), n->op, n->phase, n->transform, n->reason);
  if (r.transforms.is_object() && r.transforms.contains("conversions")) {
    const auto& conv = r.transforms["conversions"];
    o << fmt::format("\nconversions ({}): consumer #input, value: reason\n", conv.size());
    for (const auto& c : conv)
      o << fmt::format("  {} #{} {}: {}\n", c.value("node", ""), c.value("input", 0), c.value("value", ""),
                       c.value("reason", ""));
  }

  size_t wk = 6, wd = 4;
  for (const ExplainLaunch& l : r.launches) wk = widthOf(wk, l.kernel), wd = widthOf(wd, l.node);
  o << fmt::format("\nlaunches ({}): #, phase, kernel, node, kind, bytes, FLOPs (modeled)\n", r.launches.size());
  std::map<std::string, std::array<int64_t, 3>> byPhase;
  for (size_t i = 0; i < r.launches.size(); ++i) {
    const ExplainLaunch& l = r.launches[i];
    o << fmt::format("  {:>5} {:<9} {} {} {:<10} {:>8} {:>8}\n", i, l.phase, pad(l.kernel, wk), pad(l.node, wd), l.kind,
                     human(l.bytes), human(l.flops));
    auto& s = byPhase[l.phase];
    s[0] += 1, s[1] += l.bytes, s[2] += l.flops;
  }
  o << "\ntotals by phase: launches, bytes, FLOPs (modeled)\n";
  for (const char* p : {"forward", "backward", "optimizer"})
    if (auto it = byPhase.find(p); it != byPhase.end())
      o << fmt::format("  {:<9} {:>6} {:>8} {:>8}\n", p, it->second[0], human(it->second[1]), human(it->second[2]));
  return o.str();
}

int runExplain(const ExplainArgs& args) {
  const Result<planfile::Plan> read = rt::readPlanFile(args.plan);
  if (!read.ok()) {
    fmt::print(stderr, "error: {}\n", read.error().message);
    return 1;
  }
  const planfile::Plan& plan = *read;
  auto r = buildExplainReport(plan);
  if (!r.ok()) {
    fmt::print(stderr, "error: {}: {}\n", args.plan, r.error().message);
    return 1;
  }
  profile::MemoryLimits limits;
  std::string judgedBy = plan.profile + " (no --profile: limits unknown)";
  if (!args.profile.empty()) {
    auto hw = profile::loadProfile(args.profile);
    if (!hw.ok()) {
      fmt::print(stderr, "error: {}\n", hw.error().message);
      return 1;
    }
    limits = hw->memory;
    judgedBy = hw->name;
    r->peakGflops = hw->peakGflops.value_or(0.0);
    r->bandwidthGBs = hw->bandwidthGBs.value_or(0.0);
    // The L2 term at the low end of the profile's bracket, where it has one.
    const double l2 = hw->bracket.l2GBs.empty() ? 0.0
                                                : *std::min_element(hw->bracket.l2GBs.begin(), hw->bracket.l2GBs.end());
    if (auto rates = estimateRates(*hw, l2); rates.ok()) {
      auto work = launchWork(plan, *r, *rates);
      if (!work.ok()) {
        fmt::print(stderr, "error: {}: {}\n", args.plan, work.error().message);
        return 1;
      }
      r->estimate = estimateLine(*work, *rates, 1.0, hw->name);
    }
  }
  const MemoryReport memory = memoryReport(plan, limits);
  r->memory = memorySummaryLine(memory, judgedBy);
  r->memoryFits = memory.fits();
  fmt::print("{}", formatExplain(*r));
  if (!args.html.empty()) {
    std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
    out << renderExplainHtml(*r);
    out.close();
    if (!out) {
      fmt::print(stderr, "error: {}: cannot write the page\n", args.html);
      return 1;
    }
    fmt::print("page: {}\n", args.html);
  }
  return 0;
}

}  // namespace fbl::report
