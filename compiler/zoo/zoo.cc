// The zoo's registry: each model's published configuration (docs/zoo.md names the sources), its
// --tiny configuration (same architecture, test size) and the paper's batch and sequence sizes.
#include "compiler/zoo/zoo.h"

#include <functional>

namespace fbl::zoo {

namespace {

void applySizes(const ZooOptions& o, int64_t& layers, int64_t& batch, int64_t* seq) {
  if (o.layers > 0) layers = o.layers;
  if (o.batch > 0) batch = o.batch;
  if (seq && o.seq > 0) *seq = o.seq;
}

LlamaConfig llama32(bool tiny) {
  LlamaConfig c;  // meta-llama/Llama-3.2-1B config.json
  c.graphName = "llama3.2-1b";
  c.ropeLlama3Factor = 32.0f;
  if (tiny) {
    c.layers = 2, c.hidden = 64, c.heads = 4, c.kvHeads = 2, c.headDim = 16;
    c.intermediate = 176, c.vocab = 256, c.seq = 16;
  }
  return c;
}

LlamaConfig qwen25(bool tiny) {
  LlamaConfig c;  // Qwen/Qwen2.5-1.5B config.json
  c.graphName = "qwen2.5-1.5b";
  c.layers = 28, c.hidden = 1536, c.heads = 12, c.kvHeads = 2, c.headDim = 128;
  c.intermediate = 8960, c.vocab = 151936, c.ropeTheta = 1000000.0f, c.rmsEps = 1e-6f;
  c.qkvBias = true;
  if (tiny) {
    c.layers = 2, c.hidden = 64, c.heads = 4, c.kvHeads = 2, c.headDim = 16;
    c.intermediate = 176, c.vocab = 256, c.seq = 16;
  }
  return c;
}

LlamaConfig gemma2(bool tiny) {
  LlamaConfig c;  // google/gemma-2-2b config.json
  c.graphName = "gemma2-2b";
  c.layers = 26, c.hidden = 2304, c.heads = 8, c.kvHeads = 4, c.headDim = 256;
  c.intermediate = 9216, c.vocab = 256000, c.ropeTheta = 10000.0f, c.rmsEps = 1e-6f;
  c.gemma = true, c.attnSoftcap = 50.0f, c.finalSoftcap = 30.0f, c.queryPreAttnScalar = 256.0f;
  if (tiny) {
    c.layers = 2, c.hidden = 64, c.heads = 4, c.kvHeads = 2, c.headDim = 32;
    c.intermediate = 128, c.vocab = 256, c.seq = 16, c.queryPreAttnScalar = 32.0f;
  }
  return c;
}

BertConfig bertLarge(bool tiny) {
  BertConfig c;  // google-bert/bert-large-uncased config.json
  c.graphName = "bert-large";
  if (tiny) c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.vocab = 200,
      c.maxPositions = 64, c.batch = 2, c.seq = 16;
  return c;
}

VitConfig vitLarge(bool tiny) {
  VitConfig c;  // google/vit-large-patch16-224 config.json
  c.graphName = "vit-large";
  if (tiny) c.layers = 2, c.hidden = 64, c.heads = 4, c.intermediate = 128, c.image = 32,
      c.patch = 8, c.classes = 10, c.batch = 2, c.adapterDim = 8;
  return c;
}



// Figure 17's attention block: llama3.2-1b's width and heads (as multi-head attention, kv heads
// = heads) unless overridden; --tiny: 2 heads of width 32, 16 tokens.
ZooBuildFn llamaAttentionBuilder() {
  return [](const ZooOptions& o) -> Result<std::unique_ptr<OnnxBuilder>> {
    LlamaConfig c = llama32(false);
    c.graphName = "llama-attention";
    c.layers = 1;
    if (o.tiny) c.heads = 2, c.hidden = 32, c.seq = 16;
    if (o.layers > 1) return makeError("zoo llama-attention: it has one block (--layers 1)");
    if (o.heads > 0) c.heads = o.heads;
    if (o.hidden > 0) c.hidden = o.hidden;
    c.kvHeads = c.heads;
    applySizes(o, c.layers, c.batch, &c.seq);
    return buildLlamaAttention(c, o);
  };
}

ZooBuildFn llamaBuilder(LlamaConfig (*config)(bool)) {
  return [config](const ZooOptions& o) {
    LlamaConfig c = config(o.tiny);
    applySizes(o, c.layers, c.batch, &c.seq);
    return buildLlama(c, o);
  };
}

struct Registered {
  ZooEntry entry;
  ZooBuildFn build;
};

const std::vector<Registered>& registry() {
  static const std::vector<Registered> r = {
      {{"llama3.2-1b", "decoder-only LLM, 16 layers, hidden 2048, GQA 32/8; LoRA q,k,v,o,gate,up,down; batch 1, 512 tokens",
        "meta-llama/Llama-3.2-1B config.json"},
       llamaBuilder(llama32)},
      {{"qwen2.5-1.5b", "decoder-only LLM, 28 layers, hidden 1536, GQA 12/2, q/k/v bias; LoRA as llama; batch 1, 512 tokens",
        "Qwen/Qwen2.5-1.5B config.json"},
       llamaBuilder(qwen25)},
      {{"gemma2-2b", "decoder-only LLM, 26 layers, hidden 2304, GQA 8/4, head_dim 256, GeGLU, softcapping, sandwich norms; LoRA as llama; batch 1, 512 tokens",
        "google/gemma-2-2b config.json"},
       llamaBuilder(gemma2)},
      {{"llama-attention", "one Llama attention block (RMSNorm, LoRA q,k,v,o, RoPE, causal MHA, residual) on hidden states, loss mean(out^2); hidden 2048, 32 heads, 512 tokens",
        "meta-llama/Llama-3.2-1B config.json (kv heads = heads); the paper's Figure 17 workload"},
       llamaAttentionBuilder()},
      {{"bert-large", "encoder-only MLM, 24 layers, hidden 1024, 16 heads; LoRA q,k,v,o,intermediate,output; batch 4, 512 tokens",
        "google-bert/bert-large-uncased config.json"},
       [](const ZooOptions& o) {
         BertConfig c = bertLarge(o.tiny);
         applySizes(o, c.layers, c.batch, &c.seq);
         return buildBert(c, o);
       }},
      {{"vit-large", "encoder-only image classifier, 24 layers, hidden 1024, patch 16; AdaptFormer adapters (--tuning lora: LoRA); batch 8, 3x224x224",
        "google/vit-large-patch16-224 config.json; adapters: Chen et al. 2022 (AdaptFormer)"},
       [](const ZooOptions& o) -> Result<std::unique_ptr<OnnxBuilder>> {
         VitConfig c = vitLarge(o.tiny);
         applySizes(o, c.layers, c.batch, &c.image);
         if (o.tuning == "lora") c.adapter = false;
         else if (!o.tuning.empty() && o.tuning != "adapter")
           return makeError("zoo vit-large: --tuning '{}': expected adapter or lora", o.tuning);
         return buildVit(c, o);
       }},
  };
  return r;
}

const ZooFamily& moreZooModels() {
  static const ZooFamily f = [] {
    ZooFamily out;
    for (auto fam : {whisperModels, unetModels, cnnModels})
      for (auto& m : fam()) out.push_back(std::move(m));
    return out;
  }();
  return f;
}

}  // namespace

const std::vector<ZooEntry>& zooEntries() {
  static const std::vector<ZooEntry> e = [] {
    std::vector<ZooEntry> out;
    for (const auto& r : registry()) out.push_back(r.entry);
    for (const auto& r : moreZooModels()) out.push_back(r.first);
    return out;
  }();
  return e;
}

Result<std::unique_ptr<OnnxBuilder>> buildZooModel(const std::string& name, const ZooOptions& o) {
  if (o.loraRank < 1) return makeError("zoo {}: --lora-rank must be positive", name);
  if (!o.tuning.empty() && name != "vit-large")
    return makeError("zoo {}: --tuning applies to vit-large only", name);
  if ((o.heads > 0 || o.hidden > 0) && name != "llama-attention")
    return makeError("zoo {}: heads and hidden overrides apply to llama-attention only", name);
  for (const auto& r : registry())
    if (r.entry.name == name) return r.build(o);
  for (const auto& r : moreZooModels())
    if (r.first.name == name) return r.second(o);
  std::string names;
  for (const auto& e : zooEntries()) names += (names.empty() ? "" : ", ") + e.name;
  return makeError("zoo: unknown model '{}' (known: {})", name, names);
}

}  // namespace fbl::zoo
