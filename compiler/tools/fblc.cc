// fblc: the fbl layout compiler's command line. CLI11 is kept to this one translation unit
// (its header costs seconds per compile); each subcommand parses into a plain args struct and
// calls a run function that lives with its logic.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "compiler/driver/compile_command.h"
#include "compiler/driver/profile_command.h"
#include "compiler/plan/plan_printer.h"
#include "compiler/report/explain.h"
#include "compiler/report/plan_diff.h"
#include "compiler/strategy/strategy.h"
#include "compiler/support/result.h"
#include "compiler/tools/inspect_command.h"
#include "compiler/train/ref_trainer.h"
#include "compiler/zoo/zoo_command.h"

namespace {

// "1x512" -> {1, 512}.
bool parseShape(const std::string& text, fbl::ir::Shape& out) {
  out.clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t next = text.find('x', pos);
    std::string part = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return false;
    out.push_back(std::stoll(part));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return !out.empty();
}

// Collects repeatable --shape NAME=DxD... options into a map, or explains the bad one.
fbl::Status parseShapeOptions(const std::vector<std::string>& opts, std::map<std::string, fbl::ir::Shape>& out) {
  for (const auto& o : opts) {
    size_t eq = o.rfind('=');
    fbl::ir::Shape s;
    if (eq == std::string::npos || eq == 0 || !parseShape(o.substr(eq + 1), s))
      return fbl::makeError("--shape '{}': expected NAME=DIMxDIM..., for example input_0=1x512", o);
    out[o.substr(0, eq)] = s;
  }
  return fbl::Status::success();
}

// --shape, shared by every command that loads a model; parsed into `out` before `run`.
void addShapeOption(CLI::App* cmd, std::vector<std::string>& shapes) {
  cmd->add_option("--shape", shapes, "Override an input's shape: NAME=1x512 (repeatable)");
}

// Runs a command after turning its --shape options into a map; bad ones exit 2.
template <typename Run>
void runWithShapes(const std::vector<std::string>& shapes, std::map<std::string, fbl::ir::Shape>& out,
                   int& rc, Run&& run) {
  if (fbl::Status e = parseShapeOptions(shapes, out); !e.ok()) {
    fmt::print(stderr, "error: {}\n", e.error().message);
    rc = 2;
    return;
  }
  rc = run();
}

// What to train and how: shared by compile and run-ref.
void addTrainingOptions(CLI::App* cmd, std::vector<std::string>& trainable, fbl::autodiff::TrainingFlags& args,
                        const char* trainableDefault) {
  cmd->add_option("--trainable", trainable, "Glob of trainable initializers (repeatable)")->default_str(trainableDefault);
  cmd->add_option("--optimizer", args.optimizer, "adamw or sgd")->default_str("adamw");
  cmd->add_option("--lr", args.lr, "Learning rate")->default_val(1e-3f);
  cmd->add_option("--weight-decay", args.weightDecay, "Weight decay")->default_val(0.0f);
  cmd->add_option("--momentum", args.momentum, "SGD momentum")->default_val(0.0f);
  cmd->add_option("--grad-accum", args.gradAccum, "Micro-batches (train steps) per optimizer step, gradients averaged")
      ->default_val(1);
  cmd->add_option("--clip-grad-norm", args.clipGradNorm, "Clip the gradients' global L2 norm to this (0: off)")
      ->default_val(0.0f);
  cmd->add_option("--lr-schedule", args.lrSchedule, "constant, linear or cosine (with warmup); the lr becomes a run-time input");
  cmd->add_option("--warmup-steps", args.warmupSteps, "Optimizer steps of linear warmup from 0 (with --lr-schedule)")
      ->default_val(0);
  cmd->add_option("--total-steps", args.totalSteps, "Optimizer steps at which linear and cosine reach 0")->default_val(0);
  cmd->add_option("--base-weights", args.baseWeights,
                  "Frozen weights that products and embeddings read: fp32, fp16, int8 or int4 (docs/precision.md); "
                  "fblc compile takes the profile's compile_defaults unless given")
      ->default_val("fp32");
  cmd->add_option("--base-weights-group", args.baseWeightsGroup, "Elements per fp16 scale of int8 and int4 weights")
      ->default_val(32);
  cmd->add_option("--precision", args.precision,
                  "What the activations the backward pass reads are kept in between the passes: fp32, fp16 or bf16; "
                  "everything computes in f32 (docs/precision.md). fblc compile takes the profile's compile_defaults "
                  "unless given, and an fp16 plan's base defaults to fp16")
      ->default_val("fp32");
}

// The layout pipeline's switches (docs/layout-pipeline.md): shared by inspect and compile.
template <typename Args>
void addLayoutPipelineOptions(CLI::App* cmd, Args& args) {
  cmd->add_option("--strategy", args.strategy, "Layout strategy: fblayout, reuse or explicit")
      ->default_str("fblayout");
  cmd->add_option("--dump-after", args.dumpAfter, "Print the IR after this pass and what it decided, or the plan after this plan builder step (or all); an unknown name lists both");
  cmd->add_option("--disable-pass", args.disabledPasses, "Switch a pass off (ablation): fusion, fuse-attention, a layout pass, ...");
  cmd->add_flag("--verify-passes", args.verifyPasses, "Run the IR verifier between passes");
}

void addInspect(CLI::App& app, int& rc) {
  static fbl::tools::InspectArgs args;
  static std::vector<std::string> shapes;
  auto* cmd = app.add_subcommand("inspect", "Summarize an ONNX training-forward graph");
  cmd->add_option("model", args.model, "ONNX model file");
  addShapeOption(cmd, shapes);
  cmd->add_option("--trainable", args.trainable, "Glob of trainable initializers (repeatable)")
      ->default_str("what peft trains (docs/ops.md)");
  cmd->add_flag("--json", args.json, "Machine-readable output");
  cmd->add_flag("--training", args.training, "Also build and summarize the joint training graph");
  cmd->add_flag("--ops", args.listOps, "List the supported ops and exit");
  cmd->add_option("--profile", args.profile, "Hardware profile for the layout pipeline (--training)");
  addLayoutPipelineOptions(cmd, args);
  cmd->callback([&rc] {
    runWithShapes(shapes, args.shapes, rc, [] {
      if (args.model.empty() && !args.listOps) {
        fmt::print(stderr, "error: inspect needs a model file\n");
        return 2;
      }
      return fbl::tools::runInspect(args);
    });
  });
}

void addProfile(CLI::App& app, int& rc) {
  static fbl::driver::ProfileArgs args;
  auto* cmd = app.add_subcommand("profile", "Measure the local OpenCL device into a hardware profile");
  cmd->add_option("-o,--output", args.output, "Profile JSON to write (profiles/<gpu>.json)");
  cmd->add_option("--device", args.device, "Device index, as `fblc profile --list` numbers them")
      ->default_val(0);
  cmd->add_option("--base", args.base, "Profile whose public facts are kept where nothing is measured");
  cmd->add_option("--name", args.name, "Profile name (default: the output file's stem)");
  cmd->add_option("--reps", args.reps, "Timed runs per configuration (the fastest is kept)")->default_val(5);
  cmd->add_flag("--list", args.list, "List the OpenCL devices and exit");
  cmd->callback([&rc] { rc = fbl::driver::runProfile(args); });
}

void addCompile(CLI::App& app, int& rc) {
  static fbl::driver::CompileArgs args;
  static std::vector<std::string> shapes;
  auto* cmd = app.add_subcommand("compile", "Compile an ONNX training-forward graph into a plan");
  cmd->add_option("model", args.model, "ONNX model file")->required();
  cmd->add_option("--profile", args.profile, "Device profile JSON (profiles/*.json)")->required();
  cmd->add_option("-o,--output", args.output, "Plan file to write (MODEL.fbp)")->required();
  cmd->add_option("--weights", args.weights, "Base weights to write (default: the plan's path with .safetensors)");
  cmd->add_flag("--no-weights", args.noWeights,
                "Write the plan alone, for a model without weights (fblc zoo's full-size models); without it, "
                "weights that cannot be written fail the compile");
  cmd->add_option("--report", args.report, "Compile report JSON to write");
  addShapeOption(cmd, shapes);
  // compileModel falls back to the model's `fbl.trainable` metadata, then what peft trains.
  addTrainingOptions(cmd, args.trainable, args, "the model's fbl.trainable, else what peft trains (docs/ops.md)");
  cmd->add_option_function<double>(
      "--lora-alpha", [](const double& a) { args.loraAlpha = a; },
      "LoRA alpha for adapter_config.json where the graph's scaling fits both alpha/r and alpha/sqrt(r) "
      "(rsLoRA); it must give the graph's scaling");
  addLayoutPipelineOptions(cmd, args);
  cmd->add_option("--storage", args.storage,
                  "Where tensors live: buffer (the arena), image (image2d where kernels take them) or auto "
                  "(images where the profile says reads go through a texture cache)")
      ->check(CLI::IsMember({"buffer", "image", "auto"}));
  cmd->add_option("--memory-budget", args.memoryBudget,
                  "The most memory the plan may use (every pool and image): bytes (5500000000, 5.5GB, 4GiB), auto "
                  "(the profile's memory.app_budget_bytes) or none. Over it, the backward pass recomputes forward "
                  "segments, as few as fit; a budget no plan meets is refused. Default: the profile's compile_defaults, "
                  "else none");
  cmd->add_flag("--outputs", args.keepOutputs,
                "Keep the model's outputs before its loss (the logits the cross-entropy reads) for the host to read "
                "after a step or an evaluation (fbl_output_name, fbl_read_tensor)");
  cmd->add_option("--loss-chunk-rows", args.lossChunkRows,
                  "Run a language model's head and cross-entropy this many rows at a time, each chunk's gradient taken "
                  "at once, so the whole logits never exist: auto (chunks of at most 32 MiB of logits where the profile "
                  "gives an app budget or --memory-budget is set) or 0 (off); fblayout only, and off with --outputs");
  cmd->add_option("--recompute", args.recomputeSegments,
                  "Recompute this many forward segments in the backward pass (the largest first; -1: all), "
                  "whatever the budget");
  cmd->add_option("--staging-bytes", args.stagingBytes,
                  "The most bytes the runtime moves host tensors (weights, checkpoints, adapters) through at once; "
                  "larger tensors move in chunks of rows")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_flag("--allow-over-limit", args.allowOverLimit,
                "Write a plan whose largest allocation exceeds the profile's max_alloc_bytes (for analysis only)");
  cmd->callback([&rc, cmd] {
    // The profile's compile_defaults fill what the command line leaves out.
    args.fromProfile.baseWeights = cmd->get_option("--base-weights")->count() == 0;
    args.fromProfile.memoryBudget = cmd->get_option("--memory-budget")->count() == 0;
    args.fromProfile.precision = cmd->get_option("--precision")->count() == 0;
    runWithShapes(shapes, args.shapes, rc, [] { return fbl::driver::runCompile(args); });
  });
}

void addExplain(CLI::App& app, int& rc) {
  static fbl::report::ExplainArgs args;
  auto* cmd = app.add_subcommand("explain", "Explain a plan: each tensor's layout and why, transformations, launches");
  cmd->add_option("plan", args.plan, "Plan file (from fblc compile)")->required();
  cmd->add_option("--html", args.html, "Also write a self-contained HTML page of the graph and tables");
  cmd->add_option("--profile", args.profile, "Judge the plan's memory against this profile's limits");
  cmd->callback([&rc] { rc = fbl::report::runExplain(args); });
}

void addPrintPlan(CLI::App& app, int& rc) {
  static std::string plan;
  auto* cmd = app.add_subcommand("print-plan", "Print a plan as text: tensors, launches, the OpenCL program");
  cmd->add_option("plan", plan, "Plan file (from fblc compile)")->required();
  cmd->callback([&rc] { rc = fbl::plan::runPrintPlan(plan); });
}

void addDiff(CLI::App& app, int& rc) {
  static fbl::report::DiffArgs args;
  auto* cmd = app.add_subcommand("diff", "What changed between two plans (exit 0: same, 1: different, 2: bad file)");
  cmd->add_option("old", args.oldPlan, "The plan before (a golden plan)")->required();
  cmd->add_option("new", args.newPlan, "The plan after")->required();
  cmd->add_flag("--json", args.json, "Machine-readable output");
  cmd->callback([&rc] { rc = fbl::report::runDiff(args, std::cout, std::cerr); });
}

void addRunRef(CLI::App& app, int& rc) {
  static fbl::train::RunRefArgs args;
  static std::vector<std::string> shapes;
  auto* cmd = app.add_subcommand("run-ref", "Train on the CPU reference executor (the semantics every kernel is checked against)");
  cmd->add_option("model", args.model, "ONNX model file")->required();
  cmd->add_option("--data", args.dataDir,
                  "A dataset as fbl-train reads it: FILE.safetensors, FILE.npy, a folder of INPUT.npy, of input_N.pb, or of "
                  "test_data_set_*/input_N.pb folders; step k trains on fbl-train's k-th batch")
      ->required();
  cmd->add_option("--seed", args.seed, "Shuffle the samples per epoch as fbl-train --seed does (default: file order)");
  cmd->add_option("--steps", args.steps, "Training steps; each step's loss is printed")->default_val(1);
  cmd->add_option("--dump", args.dumpDir, "Write the first step's loss.pb and grads/<name>.pb here");
  addShapeOption(cmd, shapes);
  addTrainingOptions(cmd, args.trainable, args, "what peft trains (docs/ops.md)");
  cmd->callback([&rc] { runWithShapes(shapes, args.shapes, rc, [] { return fbl::train::runRefCommand(args); }); });
}

void addZoo(CLI::App& app, int& rc) {
  static fbl::zoo::ZooArgs args;
  auto* cmd = app.add_subcommand("zoo", "Write a model of the paper's Table 3 as an ONNX training-forward graph");
  cmd->add_option("name", args.name, "Model name (--list names them)");
  cmd->add_option("-o,--output", args.output, "ONNX file to write");
  cmd->add_flag("--list", args.list, "List the models and exit");
  cmd->add_flag("--tiny", args.options.tiny, "Same architecture at test size, random weights inside");
  cmd->add_option("--layers", args.options.layers, "Number of layers (default: published)");
  cmd->add_option("--seq", args.options.seq, "Tokens, image side or audio frames (default: the paper's)");
  cmd->add_option("--batch", args.options.batch, "Batch size (default: the paper's)");
  cmd->add_option("--heads", args.options.heads, "llama-attention only: attention heads (head_dim = hidden / heads)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--hidden", args.options.hidden, "llama-attention only: model width")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--lora-rank", args.options.loraRank, "LoRA rank r (alpha is 2r)")->default_val(8);
  cmd->add_option("--tuning", args.options.tuning, "vit-large: adapter (the paper's) or lora");
  cmd->add_option("--seed", args.options.seed, "Seed of the --tiny weights")->default_val(0);
  cmd->callback([&rc] {
    args.options.loraAlpha = 2.0f * static_cast<float>(args.options.loraRank);
    rc = fbl::zoo::runZoo(args);
  });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"fblc: ahead-of-time layout compiler for on-device fine-tuning"};
    app.require_subcommand(1);
    int rc = 0;
    addInspect(app, rc);
    addProfile(app, rc);
    addCompile(app, rc);
    addExplain(app, rc);
    addDiff(app, rc);
    addPrintPlan(app, rc);
    addRunRef(app, rc);
    addZoo(app, rc);
    // CLI11 prints the bad argument and its own code (105-110); every tool exits 2 for a bad
    // command line (docs/inspect.md), 0 for --help.
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? 0 : 2;
    }
    return rc;
  } catch (const std::exception& e) {
    // Nothing should throw past a command; if it does, say so in one line rather than abort.
    fmt::print(stderr, "fblc: internal error: {}\n", e.what());
    return 3;
  }
}
