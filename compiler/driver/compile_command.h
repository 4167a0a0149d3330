// The compiler's driver, `fblc compile`: ONNX training-forward graph -> plan file (+ base weights
// as safetensors, + optional report). It imports the model, runs every pass in one PassManager
// (load, fuse-attention, autodiff, recompute, the layout pipeline, the lowering: compilePassNames()) and
// builds the plan; it owns no logic of its own. Benches, fbl-train and tests call it too. compiler/tools/fblc.cc only parses the command line.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/autodiff/recompute.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/tensor.h"
#include "compiler/passes/chunk_loss.h"
#include "compiler/passes/pass_manager.h"
#include "compiler/passes/split_rows.h"
#include "compiler/plan/plan_builder.h"
#include "compiler/profile/profile.h"
#include "compiler/report/memory_report.h"
#include "compiler/strategy/strategy.h"
#include "compiler/support/result.h"
#include "runtime/safetensors.h"

namespace fbl::driver {

// The optimizer and training loop: autodiff::TrainingFlags.
struct CompileArgs : autodiff::TrainingFlags {
  std::string model;
  std::string profile;
  std::string output;       // MODEL.fbp
  std::string weights;      // default: the plan's path with .safetensors
  std::string report;       // optional REPORT.json
  std::map<std::string, ir::Shape> shapes;
  // Globs of the trainable initializers; empty: the model's `fbl.trainable` metadata
  // (comma-separated globs, as zoo models carry), else what peft trains (peftTrainableGlobs).
  std::vector<std::string> trainable;
  // LoRA alpha, for adapter_config.json where the graph's scaling leaves it open (a rank that is
  // a square: alpha/r and alpha/sqrt(r) both give a whole alpha); must agree with the graph.
  std::optional<double> loraAlpha;
  // The layout pipeline (docs/layout-pipeline.md) and the strategy's lowering
  // (layout_lowering.h): what runs as kernels and what is read through maps.
  std::string strategy = strategy::strategyName(strategy::Strategy::kFBLayout);  // parseStrategy's names
  // Where tensors live (layout_lowering.h, step 4): "buffer" (the arena only), "image" (image2d
  // objects where writer and readers take them), "auto" (images where the profile says image
  // reads go through a texture cache).
  std::string storage = "auto";
  // Pass names and plan builder steps (plan::planSteps), or "all": the IR after the pass, the
  // plan after the step, printed to dumpSink (stdout if empty).
  std::vector<std::string> dumpAfter;
  std::function<void(std::string_view)> dumpSink;
  std::vector<std::string> disabledPasses;  // ablation: passes, and plan steps that are not required
  bool verifyPasses = false;
  // Write a plan whose largest allocation exceeds the profile's max_alloc_bytes (for analysis:
  // fblc explain, simulators); no device of the profile could load it.
  bool allowOverLimit = false;
  // Write the plan alone, for a model without weights (`fblc zoo`'s full-size output, a model
  // whose external data is not shipped): otherwise weights that cannot be written fail the
  // compile, so a plan is never left without the weights it was asked for.
  bool noWeights = false;
  // The peak (every pool and image) the plan may have: bytes, or "auto" for the profile's
  // memory.app_budget_bytes; empty: no budget. Over it, the backward pass recomputes forward
  // segments (autodiff/recompute.h), the largest first, as few as fit.
  std::string memoryBudget;
  // Recompute this many segments whatever the budget (-1: all); for tests and measurements.
  std::optional<int64_t> recomputeSegments;
  // Keep the model's outputs before its loss (passes::modelOutputs) for the host to read after a step.
  bool keepOutputs = false;
  // The head and cross-entropy in chunks of this many rows (passes/chunk_loss.h): "auto" (chunks
  // of logits of at most 32 MiB where the profile gives an app budget or --memory-budget is
  // set, else the whole logits), "0" (the whole logits) or a row count.
  std::string lossChunkRows = "auto";
  // The most bytes of the staging tensor the runtime moves host tensors through (less where the
  // profile's largest allocation is smaller); larger tensors move in chunks of rows.
  int64_t stagingBytes = plan::kStagingBytes;
  // The options that take the profile's compile_defaults (a phone's: an int4 base and its app
  // budget) instead of the values above: `fblc compile` sets those its command line does not
  // give; library callers (benches, tests) get exactly what they ask.
  struct {
    bool baseWeights = false;
    bool memoryBudget = false;
    bool precision = false;
  } fromProfile;
};

struct Compiled {
  plan::Plan plan;
  report::MemoryReport memory;  // the plan against the profile's memory limits
  plan::BuildStats stats;
  double seconds = 0.0;
  nlohmann::json transforms;  // the layout pipeline's transform decisions (report's `transforms`)
  std::vector<passes::PassRun> passes;  // every pass of the pipeline, in order
  nlohmann::json passTimesMs;  // layout pass name -> milliseconds (the report's layout_pass_ms)
  plan::LoweringCounts lowering;  // what the strategy did to movement ops (layout_lowering.h)
  // The report's `storage`: frozen MatMul weights and how many are R-Tiled, the trainables
  // stored R-Tiled, image tensors and bytes, buffer bytes.
  nlohmann::json storage;
  // fuse-attention (fblayout): attention blocks replaced by fbl.Attention, and its summary line.
  int64_t attentionFused = 0;
  std::string attentionSummary;
  // What the backward pass recomputes (--memory-budget), and the budget it was chosen for (0:
  // none).
  autodiff::RecomputeSummary recompute;
  int64_t memoryBudget = 0;
  // chunk-loss (fblayout): each loss run in chunks, and the backward nodes moved into the
  // forward pass to take each chunk's gradient there.
  std::vector<passes::ChunkLoss::Chunked> lossChunks;
  int64_t lossChunkNodesMoved = 0;
  // split-rows: the frozen matrices stored as row blocks to fit max_alloc_bytes, and its line.
  std::vector<passes::SplitRows::Block> rowBlocks;
  std::string rowBlocksSummary;
  // --precision, and what pack-saved (passes/pack_saved.h) keeps in 16 bits between the passes:
  // how many values, and their f32 bytes.
  std::string precision = "fp32";
  int64_t packedValues = 0, packedBytes = 0;
  // The profile's compile defaults the plan took, as options ("--base-weights int4 ..."); empty:
  // none.
  std::string profileDefaults;
};

// The passes compileModel runs, in order: the names --dump-after and --disable-pass take
// (docs/layout-pipeline.md, "Passes").
std::vector<std::string> compilePassNames();
// The globs compileModel trains: `args.trainable` if given, else the model's `fbl.trainable`
// metadata, else "*lora_*".
Result<std::vector<std::string>> trainableGlobs(const CompileArgs& args);
// --storage resolved against the profile: true for image storage; an error for an unknown
// value, or images on a device without them.
Result<bool> useImages(const std::string& storage, const profile::HardwareProfile& hw);
// --memory-budget in bytes: "" and "none" are 0 (none), "auto" the profile's app_budget_bytes, else bytes
// with an optional kB/MB/GB or KiB/MiB/GiB unit; an error for anything else.
Result<int64_t> memoryBudgetBytes(const std::string& budget, const profile::HardwareProfile& hw);
// Everything but the files: load, differentiate, build the plan.
Result<Compiled> compileModel(const CompileArgs& args);
// The initializers the plan names (external data included), as the safetensors file
// writeWeights writes; an error names the model and the initializer whose data is missing.
Result<safetensors::File> collectWeights(const CompileArgs& args, const plan::Plan& plan);
// Writes collectWeights' file to --weights (default: the plan's path with .safetensors).
Status writeWeights(const CompileArgs& args, const plan::Plan& plan);
// The command: prints one line per error, returns the exit code.
int runCompile(const CompileArgs& args);

}  // namespace fbl::driver
