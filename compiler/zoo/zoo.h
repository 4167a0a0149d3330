// The model zoo: every model of the paper's Table 3 (and the CNNs of its Figure 20) as an ONNX
// training-forward graph with LoRA (or adapters) inserted and a scalar `loss` output, built in
// C++ so that nothing depends on an exporter. Each family has its own file (zoo_llama.cc,
// zoo_bert.cc, zoo_whisper.cc, zoo_unet.cc, zoo_cnn.cc) with the published configuration;
// docs/zoo.md lists the sources.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/support/result.h"
#include "compiler/zoo/onnx_builder.h"

namespace fbl::zoo {

// What `fblc zoo` may override; -1 keeps the model's published (or --tiny) value.
struct ZooOptions {
  bool tiny = false;
  int64_t layers = -1;
  int64_t seq = -1;    // tokens, image side, or audio frames (Table 3's last column)
  int64_t batch = -1;
  int64_t loraRank = 8;
  float loraAlpha = 16.0f;
  std::string tuning;  // "" (the paper's choice), "lora" or "adapter" (vit-large)
  uint64_t seed = 0;
  int64_t heads = -1;   // llama-attention only: attention heads (head_dim = hidden / heads)
  int64_t hidden = -1;  // llama-attention only: model width
};

struct ZooEntry {
  std::string name;
  std::string summary;  // architecture and fine-tuning, one line
  std::string source;   // where the configuration comes from
};

const std::vector<ZooEntry>& zooEntries();

// Builds model `name`; an unknown name or an override that does not fit the architecture is a
// one-line error.
Result<std::unique_ptr<OnnxBuilder>> buildZooModel(const std::string& name, const ZooOptions& o);

using ZooBuildFn = std::function<Result<std::unique_ptr<OnnxBuilder>>(const ZooOptions&)>;
using ZooFamily = std::vector<std::pair<ZooEntry, ZooBuildFn>>;
// The families defined in their own files (zoo_whisper.cc, zoo_unet.cc, zoo_cnn.cc).
ZooFamily whisperModels();
ZooFamily unetModels();
ZooFamily cnnModels();

// ---- Family configurations (public so that tests can build the corpus' tiny configurations).

struct LlamaConfig {
  std::string graphName = "llama";
  int64_t layers = 16, hidden = 2048, heads = 32, kvHeads = 8, headDim = 64;
  int64_t intermediate = 8192, vocab = 128256;
  float ropeTheta = 500000.0f, rmsEps = 1e-5f;
  float ropeLlama3Factor = 0.0f;  // > 0: Llama 3.1/3.2 frequency scaling (factor 32, 1, 4, 8192)
  bool tieEmbeddings = true;
  bool qkvBias = false;           // Qwen2
  bool gemma = false;             // Gemma 2: GeGLU, sandwich norms, 1+w norms, softcapping
  float attnSoftcap = 0.0f, finalSoftcap = 0.0f;
  float queryPreAttnScalar = 0.0f;  // Gemma 2: scale = this^-0.5 (0: headDim)
  int64_t batch = 1, seq = 512;
};

struct BertConfig {
  std::string graphName = "bert";
  int64_t layers = 24, hidden = 1024, heads = 16, intermediate = 4096, vocab = 30522;
  int64_t maxPositions = 512, typeVocab = 2;
  float eps = 1e-12f;
  int64_t batch = 4, seq = 512;
};

struct VitConfig {
  std::string graphName = "vit";
  int64_t layers = 24, hidden = 1024, heads = 16, intermediate = 4096;
  int64_t image = 224, patch = 16, channels = 3, classes = 1000;
  float eps = 1e-12f;
  bool adapter = true;            // AdaptFormer's parallel MLP adapter; false: LoRA everywhere
  int64_t adapterDim = 64;
  float adapterScale = 0.1f;
  int64_t batch = 8;
};

Result<std::unique_ptr<OnnxBuilder>> buildLlama(const LlamaConfig& c, const ZooOptions& o);
// One Llama attention block alone (the paper's Figure 17 workload): hidden states in, RMSNorm,
// LoRA q/k/v/o, RoPE, causal attention, residual; loss = mean(out^2). Heads = kv heads.
Result<std::unique_ptr<OnnxBuilder>> buildLlamaAttention(const LlamaConfig& c, const ZooOptions& o);
Result<std::unique_ptr<OnnxBuilder>> buildBert(const BertConfig& c, const ZooOptions& o);
Result<std::unique_ptr<OnnxBuilder>> buildVit(const VitConfig& c, const ZooOptions& o);

}  // namespace fbl::zoo
