// What a plan records for exporting a peft adapter (LoRA, IA3) as peft's save_pretrained writes it (the runtime
// writes adapter_model.safetensors and adapter_config.json from it, runtime/session.cc).
//
// peftAdapter, from the forward graph and the names of the trainables:
// 1. Sorts the peft parameters by module: lora_A/B (Linear, Conv, Conv1D), lora_embedding_A/B
//    (Embedding), lora_magnitude_vector (DoRA), modules_to_save.<adapter>.* (a trained copy of a
//    whole module). The module path is the name after "base_model.model.", as peft keys it.
// 2. Per LoRA module: r from lora_A's first dimension; the scaling from the graph: the Mul by a
//    scalar constant that lora_B's product passes through (over movement ops and Muls by tensors,
//    as DoRA's magnitude) before its sum with the base output; an Add reached first means 1.
// 3. lora_alpha and use_rslora: peft's scaling is alpha/r, or alpha/sqrt(r) with rsLoRA. Taking
//    alpha to be a whole number, the graph settles which one it is unless both or neither give a
//    whole alpha (a square r; a fractional alpha): then --lora-alpha settles it (it must give the
//    graph's scaling), else alpha = scaling * r without rsLoRA, and the config says so in the key
//    "fbl_lora_alpha" (peft ignores keys it does not know). Modules whose r or alpha differ from
//    the most common ones go to rank_pattern and alpha_pattern under their full module path.
// 4. target_modules: per group of modules (the path with its layer indices wildcarded), the
//    shortest name peft matches (a dotted suffix) that selects no module the adapter leaves
//    alone: the leaf name if that is safe, else the shortest suffix selecting only that group,
//    else the shortest selecting only adapted modules, else the full paths. The modules that
//    exist are the graph's initializers' modules, with peft's own layers folded away.
// 5. modules_to_save likewise (peft matches it by plain string suffix); a head named
//    "classifier" or "score" adds both names, as peft's SEQ_CLS and TOKEN_CLS task types do.
// 6. With an embedding among the targets (target_modules naming embed_tokens or lm_head), peft
//    also saves that embedding's frozen base_layer weights: they become `frozen`.
// LoRA on a module's parameters (peft's target_parameters: nested `base_layer.lora_A` wrappers,
// or a base layer holding parameters other than weight and bias) is not written: `refusal` says
// why, and fbl-train's --export-adapter prints it.
// IA3 (`ia3_l` vectors) writes peft's IA3 config instead: target_modules as in 4, and
// feedforward_modules, the modules whose vector is [1, in] (it scales their input), likewise.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::autodiff {

// peft's key for a parameter: from "base_model.model." on (or without the export wrapper's
// "m."), the adapter name removed as peft removes it, modules_to_save's copy under the module's
// own name, DoRA's magnitude without ".weight".
std::string peftAdapterKey(const std::string& name);

struct PeftAdapterOptions {
  std::optional<double> loraAlpha;  // settles alpha where the graph does not (3 above)
};

struct PeftAdapter {
  nlohmann::json config = nlohmann::json::object();  // adapter_config.json; empty: no LoRA
  // Why the trained adapter cannot be written as peft's (LoRA on parameters); empty when it can.
  std::string refusal;
  std::vector<std::pair<std::string, std::string>> frozen;  // initializer name, key
};

// `g`: the forward graph as loaded; `trainables`: the names of the parameters the plan trains.
Result<PeftAdapter> peftAdapter(const ir::Graph& g, const std::vector<std::string>& trainables,
                                const PeftAdapterOptions& opts = {});

}  // namespace fbl::autodiff
