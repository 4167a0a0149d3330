#include "compiler/driver/profile_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "compiler/profile/microbench.h"

namespace fbl::driver {

namespace {

using layout::ReductionDir;

// The profile to start from: --base, else a valid profile already at the output path, else only
// the foreign fields of whatever JSON is there (another tool's minimal profile).
Result<std::optional<profile::HardwareProfile>> startingPoint(const ProfileArgs& args, nlohmann::json& foreign) {
  if (!args.base.empty()) {
    FBL_ASSIGN(profile::HardwareProfile b, profile::loadProfile(args.base));
    return std::optional<profile::HardwareProfile>(std::move(b));
  }
  std::ifstream in(args.output);
  if (!in) return std::optional<profile::HardwareProfile>();
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::optional<profile::HardwareProfile>();
  auto existing = profile::profileFromJson(j, args.output);
  if (existing.ok()) return std::optional<profile::HardwareProfile>(std::move(existing).value());
  foreign = profile::extraFields(j);
  // The blocks the schema defines but nothing measures: a partial profile keeps them too.
  for (const char* block : {"opencl", "matmul", "kernels"})
    if (j.is_object() && j.contains(block)) foreign[block] = j[block];
  return std::optional<profile::HardwareProfile>();
}

void printTable(const profile::AccessTable& t) {
  fmt::print("Figure 4 ({}; in brackets: relative to column-major)\n", t.unit);
  fmt::print("{:>8}", "threads");
  for (auto p : profile::kAllAccessPatterns) fmt::print("{:>20}", profile::accessPatternName(p));
  fmt::print("\n");
  for (size_t i = 0; i < t.threads.size(); ++i) {
    fmt::print("{:>8}", t.threads[i]);
    double col = t.throughput.at(profile::AccessPattern::kColumn)[i];
    for (auto p : profile::kAllAccessPatterns) {
      double v = t.throughput.at(p)[i];
      fmt::print("{:>20}", fmt::format("{:.3f} ({:.2f}x)", v, v / col));
    }
    fmt::print("\n");
  }
}

}  // namespace

std::vector<layout::RTileProblem> representativeProblems() {
  // Y = X W reads W down its columns (sum over K = rows); dX = dY W^T reads it along rows.
  layout::RTileProblem weight{"W[2048x2048] fwd+bwd", {1, 2048, 2048},
                              {{ReductionDir::kAlongColumn, 1, "Y=XW"}, {ReductionDir::kAlongRow, 1, "dX=dYW^T"}}};
  layout::RTileProblem actRows{"X[512x2048] fwd only", {1, 512, 2048}, {{ReductionDir::kAlongRow, 1, "Y=XW"}}};
  layout::RTileProblem actBoth{"X[512x2048] fwd+dW", {1, 512, 2048},
                               {{ReductionDir::kAlongRow, 1, "Y=XW"}, {ReductionDir::kAlongColumn, 1, "dW=X^TdY"}}};
  layout::RTileProblem lora{"A_lora[2048x16] fwd+bwd", {1, 2048, 16},
                            {{ReductionDir::kAlongColumn, 1, "XA"}, {ReductionDir::kAlongRow, 1, "dX=dXA A^T"}}};
  return {weight, actRows, actBoth, lora};
}

std::vector<std::string> describeChoices(const profile::HardwareProfile& p) {
  std::vector<std::string> out;
  for (const auto& prob : representativeProblems()) {
    auto c = layout::selectRTile(prob, p);
    if (!c.ok()) {
      out.push_back(fmt::format("{}: none ({})", prob.tensor, c.error().message));
      continue;
    }
    const layout::TileGeometry& t = c->layout.tile;
    out.push_back(fmt::format("{}: tile {}x{} {} {} padding {:.1f}% score {:.3f}", prob.tensor, t.tileH, t.tileW,
                              layout::intraMappingName(t.intra), layout::interOrderName(c->layout.inter),
                              c->paddingRatio * 100, c->cost.score));
  }
  return out;
}

int runProfile(const ProfileArgs& args) {
  if (args.list) {
    auto devices = profile::listDevices();
    if (!devices.ok()) {
      fmt::print(stderr, "error: {}\n", devices.error().message);
      return 1;
    }
    for (const auto& d : *devices) fmt::print("{}\n", d);
    return 0;
  }
  if (args.output.empty()) {
    fmt::print(stderr, "error: profile needs -o PROFILE.json\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  nlohmann::json foreign = nlohmann::json::object();
  auto base = startingPoint(args, foreign);
  if (!base.ok()) {
    fmt::print(stderr, "error: {}\n", base.error().message);
    return 1;
  }
  profile::MeasureOptions opts;
  opts.device = args.device;
  opts.reps = args.reps;
  opts.name = args.name.empty() ? std::filesystem::path(args.output).stem().string() : args.name;
  opts.base = *base;
  opts.log = [](const std::string& s) { fmt::print(stderr, "  {}\n", s); };
  auto measured = profile::measureProfile(opts);
  if (!measured.ok()) {
    fmt::print(stderr, "error: {}\n", measured.error().message);
    return 1;
  }
  profile::HardwareProfile p = std::move(measured).value();
  for (const auto& [k, v] : foreign.items()) p.extra[k] = v;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  p.notes = fmt::format("measured by `fblc profile --device {}` on '{}' in {:.1f} s", args.device, p.device, seconds);
  if (Status s = profile::saveProfile(p, args.output); !s.ok()) {
    fmt::print(stderr, "error: {}\n", s.error().message);
    return 1;
  }
  fmt::print("{}: {} (wave {}, texture block {}x{} texels, L1 {} KiB, L2 {} KiB, {:.1f} GB/s, {:.1f} GFLOP/s)\n",
             args.output, p.device, p.waveSize, p.textureBlock.h, p.textureBlock.w, p.l1TextureCacheBytes / 1024,
             p.l2CacheBytes / 1024, p.bandwidthGBs.value_or(0), p.peakGflops.value_or(0));
  printTable(*p.accessTable);
  fmt::print("R-Tile choices:\n");
  for (const auto& line : describeChoices(p)) fmt::print("  {}\n", line);
  fmt::print("profiled in {:.1f} s\n", seconds);
  return 0;
}

}  // namespace fbl::driver
