// fbl-bench: speed and memory measurements (never timed tests). Each subcommand runs the work
// several times in one process and reports min and median, so figures compare by ratio within
// one run on a shared, noisy machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "bench/base_weights_bench.h"
#include "bench/cache_bench.h"
#include "bench/estimate_bench.h"
#include "bench/matmul_bench.h"
#include "bench/matmul_sweep.h"
#include "bench/step_bench.h"
#include "bench/transforms_bench.h"
#include "bench/wave_bench.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/load_model.h"
#include "compiler/strategy/strategy.h"

namespace {

// --strategy's help: the names of compiler/strategy/strategy.h.
std::string strategyHelp(bool all) {
  return fmt::format("{}{} (repeatable; default all)", all ? "all, " : "", fbl::strategy::strategyNameList());
}

struct Timing {
  double minS = 0, medianS = 0;
  int runs = 0;
};

template <typename F>
Timing timeRuns(int runs, F&& body) {
  std::vector<double> s;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!body()) return {};
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return Timing{s.front(), s[s.size() / 2], runs};
}

// `fbl-bench inspect MODEL`: the import and the load (import + folding + shape inference) that
// `fblc inspect` performs, timed apart.
int benchInspect(const std::string& model, int runs, bool json) {
  std::string err;
  auto import = timeRuns(runs, [&] {
    auto g = fbl::onnx::importModel(model);
    if (!g.ok()) err = g.error().message;
    return g.ok();
  });
  auto load = timeRuns(runs, [&] {
    auto g = fbl::passes::loadModel(model);
    if (!g.ok()) err = g.error().message;
    return g.ok();
  });
  if (!err.empty()) {
    fmt::print(stderr, "error: {}\n", err);
    return 1;
  }
  if (json) {
    nlohmann::json j{{"model", model}, {"runs", runs},
                     {"import_s", {{"min", import.minS}, {"median", import.medianS}}},
                     {"load_s", {{"min", load.minS}, {"median", load.medianS}}},
                     {"inspect_s", {{"min", import.minS + load.minS},
                                    {"median", import.medianS + load.medianS}}}};
    fmt::print("{}\n", j.dump(1));
  } else {
    fmt::print("{}  ({} runs)\n", model, runs);
    fmt::print("  {:<28} {:>9} {:>9}\n", "stage", "min ms", "median ms");
    fmt::print("  {:<28} {:>9.1f} {:>9.1f}\n", "import", import.minS * 1e3, import.medianS * 1e3);
    fmt::print("  {:<28} {:>9.1f} {:>9.1f}\n", "load (import+fold+infer)", load.minS * 1e3,
               load.medianS * 1e3);
    fmt::print("  {:<28} {:>9.1f} {:>9.1f}\n", "inspect (import + load)",
               (import.minS + load.minS) * 1e3, (import.medianS + load.medianS) * 1e3);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"fbl-bench: fbl's speed and memory measurements"};
    app.require_subcommand(1);
    int rc = 0;

    std::string model;
    int runs = 10;
    bool json = false;
    auto* inspect = app.add_subcommand("inspect", "Time fblc inspect's import and load of a model");
    inspect->add_option("model", model, "ONNX model")->required();
    inspect->add_option("--runs", runs, "Repetitions")->default_val(10);
    inspect->add_flag("--json", json, "JSON output");
    inspect->callback([&] { rc = benchInspect(model, runs, json); });

    fbl::bench::MatmulBenchOptions mm;
    auto* matmul = app.add_subcommand("matmul", "Figure-16 MatMul forward/backward per layout strategy (OpenCL)");
    matmul->add_option("--m", mm.m, "M of the forward product C[M,N] = A[M,K] B[K,N]")->default_val(512);
    matmul->add_option("--k", mm.k, "K")->default_val(2048);
    matmul->add_option("--n", mm.n, "N")->default_val(8192);
    matmul->add_option("--scale", mm.scale, "Divide M, K, N by this (default: 4 on a CPU device, 1 on a GPU)")->default_val(0);
    matmul->add_option("--strategy", mm.strategies, strategyHelp(false));
    matmul->add_option("--runs", mm.runs, "Timed repetitions after one warm-up")->default_val(5);
    matmul->add_option("--device", mm.device, "OpenCL device index (default: first GPU, else first device)");
    matmul->add_option("--profile", mm.profile, "Hardware profile for the traffic model (default: by device)");
    matmul->add_option("--rtile-profile", mm.rtileProfile, "Profile R-Tile selects tiles with (default: --profile)");
    matmul->add_option("--tile", mm.tiles,
                       "Work-group tiling TMxTNxTK/RMxRN[:pipeline] (default: the profile's cost model; with --sweep: "
                       "extra candidates, repeatable)");
    matmul->add_flag("--json", mm.json, "JSON output");
    matmul->add_flag("--single-launch", mm.singleLaunch,
                     "One launch per product (chooseMatmulTiling), not the schedule's whole waves plus tail");
    bool sweep = false;
    fbl::bench::MatmulSweepOptions sw;
    matmul->add_flag("--sweep", sweep, "Time every candidate tiling on the products of a LoRA step (matmul_sweep.h)");
    matmul->add_option("--storage", sw.storage, "--sweep: operands in row-major buffers or plain images")->default_val("buffer");
    matmul->add_option("--rank", sw.rank, "--sweep: LoRA rank of the narrow products")->default_val(8);
    matmul->add_option("--sweep-json", sw.json, "--sweep: write the JSON report here");
    matmul->add_option("--only", sw.only, "--sweep: only the products whose name contains this (fig16, lm_head, lora)");
    matmul->callback([&] {
      if (!sweep) return void(rc = fbl::bench::runMatmulBench(mm));
      sw.device = mm.device, sw.profile = mm.profile, sw.tiles = mm.tiles, sw.runs = mm.runs;
      sw.scale = mm.scale > 0 ? static_cast<int>(mm.scale) : 1;
      rc = fbl::bench::runMatmulSweep(sw);
    });

    fbl::bench::StepBenchOptions sb;
    auto* step = app.add_subcommand("step", "Training steps of a model per layout strategy (OpenCL): samples/s, phases, launches, bytes");
    step->add_option("model", sb.model, "ONNX training-forward model")->required();
    step->add_option("--profile", sb.profile, "Hardware profile JSON")->required();
    step->add_option("--strategy", sb.strategies, strategyHelp(true));
    step->add_option("--storage", sb.storages,
                     "buffer, image or auto (repeatable: each strategy runs with each; default auto, the profile's choice)")
        ->check(CLI::IsMember({"buffer", "image", "auto"}));
    step->add_option("--steps", sb.steps, "Training steps (the first is timed apart)")->default_val(10);
    step->add_option("--device", sb.device, "OpenCL device index (default: first GPU, else first device)");
    step->add_option("--disable-pass", sb.disabledPasses, "Switch a pass off in every run (fuse-attention, fusion, ...)");
    step->add_option("--recompute", sb.recompute,
                     "Recompute this many forward segments in the backward pass of every run (-1: all)");
    step->add_option("--loss-chunk-rows", sb.lossChunkRows,
                     "The head and loss in chunks of this many rows in every run (fblc compile --loss-chunk-rows)");
    step->add_option("--staging-bytes", sb.stagingBytes,
                     "Bound of the staging tensor weights are packed through (fblc compile --staging-bytes)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    step->add_option("--precision", sb.precisions,
                     "fp32, fp16 or bf16 (repeatable: each run with each; fblc compile --precision)");
    step->add_option("--base-weights", sb.baseWeights,
                     "fp32, fp16, int8 or int4 (repeatable: each run with each; fblc compile --base-weights)")
        ->check(CLI::IsMember({"fp32", "fp16", "int8", "int4"}));
    step->add_option("--seed", sb.seed, "Seed of the synthetic inputs and of missing weights")->default_val(0);
    step->add_option("--json", sb.json, "Write the JSON report here ('-': stdout)");
    step->add_option("--svg", sb.svg, "Write an SVG bar chart of the phases here");
    step->add_flag("--ablation", sb.ablation,
                   "Figure-14 breakdown instead of --strategy: reuse, R-Tile alone, + index elimination, fblayout");
    step->callback([&] { rc = fbl::bench::runStepBench(sb); });

    fbl::bench::TransformsBenchOptions tb;
    fbl::bench::AttentionConfig ac{-1, -1, -1};
    auto* transforms = app.add_subcommand(
        "transforms", "Figure-17 layout-transformation time of multi-head attention per strategy (OpenCL)");
    transforms->add_option("--seq", ac.seq, "Tokens (with --heads and --hidden; default: Figure 17's three configurations)");
    transforms->add_option("--heads", ac.heads, "Attention heads");
    transforms->add_option("--hidden", ac.hidden, "Model width (head_dim = hidden / heads)");
    transforms->add_option("--profile", tb.profile, "Hardware profile JSON (default: by device)");
    transforms->add_option("--strategy", tb.strategies, strategyHelp(true));
    transforms->add_option("--steps", tb.steps, "Training steps (the first is timed apart)")->default_val(3);
    transforms->add_option("--device", tb.device, "OpenCL device index (default: first GPU, else first device)");
    transforms->add_option("--seed", tb.seed, "Seed of the weights and synthetic inputs")->default_val(0);
    transforms->add_option("--json", tb.json, "Write the JSON report here ('-': stdout)");
    transforms->callback([&] {
      const int given = (ac.seq > 0) + (ac.heads > 0) + (ac.hidden > 0);
      if (given != 0 && given != 3) {
        fmt::print(stderr, "error: give --seq, --heads and --hidden together (or none for Figure 17's three)\n");
        rc = 2;
        return;
      }
      if (given == 3) tb.configs.push_back(ac);
      rc = fbl::bench::runTransformsBench(tb);
    });

    fbl::bench::EstimateBenchOptions eb;
    auto* estimate = app.add_subcommand(
        "estimate", "A training step's time on a profile's GPU from the plan's own work and bytes, per launch and "
                    "strategy: compute, DRAM and L2 terms, at each ALU efficiency and L2 bandwidth of the bracket");
    estimate->add_option("input", eb.input, "MODEL.onnx (compiled per strategy, weights not needed) or PLAN.fbp")->required();
    estimate->add_option("--profile", eb.profile, "Hardware profile (its peak, DRAM and L2 numbers)")->required();
    estimate->add_option("--strategy", eb.strategies, strategyHelp(false));
    estimate->add_option("--without", eb.without,
                         "MODEL: also estimate each strategy with this pass off, and with all of them off (repeatable: "
                         "fusion, fuse-attention)");
    estimate->add_option("--alu-efficiency", eb.aluEfficiency,
                         "Fraction of the FP32 peak MatMul and attention kernels reach (repeatable; default 1)");
    estimate->add_option("--top", eb.top, "Costliest launches listed per strategy")->default_val(10);
    estimate->add_flag("--launches", eb.launches, "The JSON lists every launch's FLOPs and bytes, in plan order");
    bool noDefaults = false;
    estimate->add_flag("--no-profile-defaults", noDefaults,
                       "MODEL: compile without the profile's compile_defaults (as fbl-bench cache MODEL does)");
    estimate->add_option("--json", eb.json, "Write the report here");
    estimate->callback([&] {
      eb.profileDefaults = !noDefaults;
      rc = fbl::bench::runEstimateBench(eb);
    });

    fbl::bench::WaveBenchOptions wb;
    auto* waves = app.add_subcommand(
        "waves", "Figure-16 MatMul on phone profiles from the lane model of the kernel's staging: texture-L1 misses "
                 "and a roofline per strategy, at every combination of the profile's bracketed unknowns");
    waves->add_option("--profile", wb.profiles, "Phone profile with a memory_model block (repeatable)")->required();
    waves->add_option("--strategy", wb.strategies, strategyHelp(false));
    waves->add_option("--scale", wb.scale, "Divide M=512, K=2048, N=8192 by this")->default_val(1);
    waves->add_option("--groups", wb.groups, "Work-groups sampled per product, spread over it (0: all)")->default_val(32);
    waves->add_option("--json", wb.json, "Write the report here");
    waves->callback([&] { rc = fbl::bench::runWaveBench(wb); });

    fbl::bench::CacheBenchOptions cb;
    std::string cacheWhat;
    auto* cache = app.add_subcommand(
        "cache", "Simulated phone memory system (Oclgrind + the profile's cache model): a model's step per strategy, "
                 "or matmul (Figure 16), transforms (Figure 17), patterns (Figure 4)");
    cache->add_option("what", cacheWhat, "MODEL.onnx, PLAN.fbp, matmul, transforms or patterns")->required();
    cache->add_option("--profile", cb.profiles, "Phone profile with a memory_model block (repeatable; default profiles/adreno-830.json)");
    cache->add_option("--strategy", cb.strategies, strategyHelp(true));
    cache->add_option("--storage", cb.storage, "MODEL: buffer, image or auto (the profile's choice; default)")
        ->check(CLI::IsMember({"buffer", "image", "auto"}));
    cache->add_flag("--bracket", cb.bracket,
                    "Also simulate each profile at every other combination of its bracket (texture-L1 size and "
                    "line shape, L2 bandwidth), on the plans made for the profile");
    cache->add_option("--scale", cb.scale, "matmul: divide Figure 16's M=512, K=2048, N=8192 by this")->default_val(4);
    cache->add_option("--seq", cb.seq, "transforms: tokens")->default_val(32);
    cache->add_option("--heads", cb.heads, "transforms: attention heads")->default_val(4);
    cache->add_option("--hidden", cb.hidden, "transforms: model width")->default_val(128);
    cache->add_option("--rows", cb.rows, "patterns: rows of each thread's 64-texel band (fblc profile's 512)")->default_val(512);
    cache->add_option("--threads", cb.threads, "patterns: thread counts (repeatable; default 1, 2, 4 ... 64)");
    cache->add_option("--seed", cb.seed, "Seed of synthetic inputs and matrices")->default_val(0);
    cache->add_option("--json", cb.json, "Write the JSON report here ('-': stdout)");
    cache->add_option("--svg", cb.svg, "Write the Figure-15 chart (patterns: the Figure-4 chart) here");
    cache->add_flag("--launches", cb.launches, "List every launch in the JSON");
    cache->callback([&] {
      if (cacheWhat == "matmul" || cacheWhat == "transforms" || cacheWhat == "patterns") {
        cb.form = cacheWhat;
      } else {
        cb.form = "model";
        cb.input = cacheWhat;
      }
      if (cb.profiles.empty()) cb.profiles.push_back("profiles/adreno-830.json");
      rc = fbl::bench::runCacheBench(cb);
    });

    fbl::bench::BaseWeightsBenchOptions bw;
    auto* baseWeights = app.add_subcommand(
        "base-weights", "How far fp16, int8 and int4 base weights (fblc compile --base-weights) move a weight "
                        "matrix, per group size, against their bits per weight");
    baseWeights->add_option("--rows", bw.rows, "Rows of the matrix (its reduction axis)")->default_val(2048);
    baseWeights->add_option("--cols", bw.cols, "Columns of the matrix")->default_val(2048);
    baseWeights->add_option("--seed", bw.seed, "Seed of the random weights")->default_val(0);
    baseWeights->add_option("--json", bw.json, "Write the JSON report here ('-': stdout)");
    baseWeights->callback([&] { rc = fbl::bench::runBaseWeightsBench(bw); });

    // CLI11 prints the bad argument and its own code (105-110); every tool exits 2 for a bad
    // command line (docs/inspect.md), 0 for --help.
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? 0 : 2;
    }
    return rc;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fbl-bench: internal error: {}\n", e.what());
    return 3;
  }
}
