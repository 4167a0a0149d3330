// Picking the trainable initializers by name, and finding the loss.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "compiler/autodiff/training_graph.h"
#include "compiler/onnx/export_names.h"
#include "compiler/support/glob.h"

namespace fbl::autodiff {

namespace {

std::string fileOf(const ir::Graph& g) { return g.sourcePath.empty() ? g.name : g.sourcePath; }

Error noMatch(const ir::Graph& g, const std::vector<std::string>& globs,
              const std::vector<ir::ValueId>& inits) {
  std::string pattern = globs == peftTrainableGlobs()
                            ? std::string("(the default, what peft trains) '*lora_*', '*.modules_to_save.*' or a "
                                          "peft tuner's prefix ('*.ia3_*', '*.lokr_*', ...)")
                            : fmt::format("'{}'", fmt::join(globs, "', '"));
  if (inits.empty())
    return makeError("{}: no initializer matches --trainable {}: the model has no initializers",
                     fileOf(g), pattern);
  std::vector<std::string> some;
  for (size_t i = 0; i < inits.size() && i < 5; ++i) some.push_back(g.values[inits[i]].name);
  std::vector<std::string> renamed;
  for (ir::ValueId v : inits)
    if (onnx::looksExporterRenamed(g.values[v].name)) renamed.push_back(g.values[v].name);
  std::string why;
  if (!renamed.empty())
    why = fmt::format("{} of them keep the exporter's names (e.g. '{}'): its optimizer folded "
                      "and renamed them, and the nodes that read them carry no usable "
                      "pkg.torch.onnx.fx_node and name_scopes metadata, so their PyTorch names "
                      "and orientation are lost: re-export with torch.onnx.export(..., "
                      "optimize=False), or keep the node metadata",
                      renamed.size(), renamed.front());
  else
    why = "is the model wrapped with LoRA adapters? otherwise pass --trainable GLOB with a "
          "pattern of the parameters to train";
  return makeError("{}: no initializer matches --trainable {} ({} initializers, e.g. '{}'); {}",
                   fileOf(g), pattern, inits.size(), fmt::join(some, "', '"), why);
}

}  // namespace

std::vector<std::string> peftTrainableGlobs() {
  // The tuners' prefixes as peft 0.21 names them (its tuners' `prefix`); LoRA's "lora_" anywhere,
  // as fbl has always matched it.
  static const char* const kPrefixes[] = {
      "adamss_", "beft_",    "boft_",   "c3a_",     "deft_",       "delora_",  "fourierft_", "frod_",
      "glora_",  "gralora_", "hada_",   "hira_",    "hra_",        "ia3_",     "lily_",      "ln_tuning_",
      "lokr_",   "miss_",    "oft_",    "osf_",     "peanut_",     "poly_",    "psoft_",     "pvera_lambda_",
      "randlora_", "road_",  "shira_",  "supertuning_", "tinylora_", "trainable_tokens_", "unilora_",
      "vblora_", "vera_lambda_", "waveft_"};
  std::vector<std::string> globs{"*lora_*", "*.modules_to_save.*"};
  for (const char* p : kPrefixes) globs.push_back(fmt::format("*.{}*", p));
  return globs;
}

Result<std::vector<ir::ValueId>> selectTrainables(const ir::Graph& g,
                                                  const std::vector<std::string>& globs) {
  std::vector<ir::ValueId> inits, picked;
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v) {
    const ir::Value& val = g.values[v];
    if (val.kind != ir::ValueKind::Initializer) continue;
    inits.push_back(v);
    bool match = std::any_of(globs.begin(), globs.end(),
                             [&](const std::string& p) { return globMatch(p, val.name); });
    if (!match) continue;
    if (!ir::isFloat(val.dtype))
      return makeError("{}: trainable '{}' has dtype {}; only float initializers can be trained",
                       fileOf(g), val.name, ir::dtypeName(val.dtype));
    picked.push_back(v);
  }
  // DoRA: peft detaches the weight norm ||W + s B A|| that divides the magnitude, and an ONNX
  // export has no detach, so every LoRA gradient here would take a term peft's lacks.
  for (ir::ValueId v : inits)
    if (g.values[v].name.find("lora_magnitude_vector") != std::string::npos)
      return makeError("{}: '{}' is DoRA's magnitude (use_dora=True): peft detaches DoRA's weight norm, which the "
                       "ONNX export cannot keep, so the gradients would differ from peft's; DoRA is not supported, "
                       "train plain LoRA",
                       fileOf(g), g.values[v].name);
  // A parameter the exporter folded into a constant would silently not train, or train while a
  // stale copy of it stays in the constant. Named first: one the graph lacks altogether.
  auto matches = [&](const std::string& name) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& p) { return globMatch(p, name); });
  };
  for (bool absent : {true, false})
    for (const std::string& name : g.foldedParameters) {
      if (!matches(name) || absent != (g.findValue(name) == ir::kNoValue)) continue;
      return makeError("{}: trainable '{}' {} (torch.onnx.export's optimizer folds computations on parameters); "
                       "re-export with torch.onnx.export(..., optimize=False)", fileOf(g), name,
                       absent ? "is not in the graph: the exporter folded it into a constant or dropped it"
                              : "is also folded into a constant, where its value would not follow training");
    }
  if (picked.empty()) return noMatch(g, globs, inits);
  return picked;
}

Result<ir::ValueId> findLoss(const ir::Graph& g) {
  ir::ValueId loss = ir::kNoValue;
  if (g.outputs.size() == 1) {
    loss = g.outputs[0];
  } else {
    for (ir::ValueId o : g.outputs)
      if (g.values[o].name == "loss") loss = o;
  }
  if (loss == ir::kNoValue)
    return makeError("{}: the graph has {} outputs and none is named 'loss'; a training graph ends "
                     "in one scalar loss", fileOf(g), g.outputs.size());
  const ir::Value& v = g.values[loss];
  if (!ir::isFloat(v.dtype) || !v.shapeKnown || ir::numElements(v.shape) != 1)
    return makeError("{}: the loss '{}' must be a float scalar, not {} {}", fileOf(g), v.name,
                     ir::dtypeName(v.dtype), v.shapeKnown ? ir::shapeToString(v.shape) : "[?]");
  return loss;
}

}  // namespace fbl::autodiff
