// Encoder-only models of Table 3: BERT-Large (BertForMaskedLM, LoRA on query/key/value/
// attention.output.dense/intermediate.dense/output.dense) and ViT-Large
// (ViTForImageClassification, AdaptFormer adapters as the paper's Chen et al. 2022, or LoRA on
// every linear layer as the corpus vit-tiny).
//
// BERT: 1. word + token-type (all zero) + position embeddings, LayerNorm. 2. Per layer: q/k/v,
// scores + a zero additive mask (the exporter keeps it), Softmax, output dense, Add + LayerNorm
// (post-norm), GELU MLP, Add + LayerNorm. 3. MLM head: dense, GELU, LayerNorm, decoder tied to
// the word embeddings plus its bias; cross-entropy against the labels input.
// ViT: 1. Conv patch embedding, flatten, [CLS] via Expand + Concat, position embeddings.
// 2. Pre-norm layers (LayerNorm, attention, Add; LayerNorm, GELU MLP (+ parallel adapter
// down/ReLU/up, scaled), Add). 3. LayerNorm, [CLS] by Gather, classifier Gemm, cross-entropy.
#include <cmath>

#include "compiler/zoo/zoo.h"
#include "compiler/zoo/zoo_layers.h"

namespace fbl::zoo {

Result<std::unique_ptr<OnnxBuilder>> buildBert(const BertConfig& c, const ZooOptions& o) {
  if (c.hidden % c.heads != 0 || c.seq > c.maxPositions)
    return makeError("zoo {}: hidden {} not divisible by heads {}, or seq {} over {} positions",
                     c.graphName, c.hidden, c.heads, c.seq, c.maxPositions);
  auto bp = std::make_unique<OnnxBuilder>(c.graphName, o.tiny ? Weights::Random : Weights::External, o.seed);
  OnnxBuilder& b = *bp;
  Net n(b, static_cast<int>(o.loraRank), o.loraAlpha);
  const int64_t B = c.batch, S = c.seq, H = c.hidden, D = c.hidden / c.heads;
  std::string ids = b.input("input_0", ::onnx::TensorProto::INT64, {B, S});
  std::string labels = b.input("input_1", ::onnx::TensorProto::INT64, {B, S});

  std::string wordW = n.param("bert.embeddings.word_embeddings.weight", {c.vocab, H});
  std::string posW = n.param("bert.embeddings.position_embeddings.weight", {c.maxPositions, H});
  std::string typeW = n.param("bert.embeddings.token_type_embeddings.weight", {c.typeVocab, H});
  std::vector<int64_t> positions(S), types(B * S, 0);
  for (int64_t i = 0; i < S; ++i) positions[i] = i;
  std::string x = b.op("Gather", {wordW, ids}, {{"axis", int64_t{0}}}, "embedding");
  std::string typeIds = b.op("Reshape", {b.constI64(types), b.constI64({B, S})}, {}, "expand");
  x = n.add(x, b.op("Gather", {typeW, typeIds}, {{"axis", int64_t{0}}}, "embedding"));
  std::string posIds = b.op("Reshape", {b.constI64(positions), b.constI64({1, S})}, {}, "slice");
  x = n.add(x, b.op("Gather", {posW, posIds}, {{"axis", int64_t{0}}}, "embedding"));
  x = n.layerNorm(x, H, "bert.embeddings.LayerNorm", c.eps);

  std::string mask = zeroMask(b, B, S, S);
  AttentionShape as{B, S, S, c.heads, c.heads, D};
  LinearOpts lora{.bias = true, .lora = true};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    std::string q = n.splitHeads(n.linear(x, H, H, p + "attention.self.query", lora), B, S, D);
    std::string k = n.splitHeads(n.linear(x, H, H, p + "attention.self.key", lora), B, S, D);
    std::string v = n.splitHeads(n.linear(x, H, H, p + "attention.self.value", lora), B, S, D);
    std::string a = n.attention(q, k, v, as, 1.0f / std::sqrt(static_cast<float>(D)), mask);
    a = n.linear(a, H, H, p + "attention.output.dense", lora);
    x = n.layerNorm(n.add(a, x), H, p + "attention.output.LayerNorm", c.eps);
    std::string m = n.gelu(n.linear(x, H, c.intermediate, p + "intermediate.dense", lora));
    m = n.linear(m, c.intermediate, H, p + "output.dense", lora);
    x = n.layerNorm(n.add(m, x), H, p + "output.LayerNorm", c.eps);
  }
  x = n.gelu(n.linear(x, H, H, "cls.predictions.transform.dense", {.bias = true}));
  x = n.layerNorm(x, H, "cls.predictions.transform.LayerNorm", c.eps);
  std::string logits = b.op("MatMul", {x, n.transpose(wordW, {1, 0})}, {}, "linear");
  logits = n.add(logits, n.param("cls.predictions.decoder.bias", {c.vocab}, Init::zeros()));
  b.output(n.crossEntropy(logits, labels, c.vocab), ::onnx::TensorProto::FLOAT, {});
  b.setMetadata("fbl.trainable", "*lora_*");
  return bp;
}

Result<std::unique_ptr<OnnxBuilder>> buildVit(const VitConfig& c, const ZooOptions& o) {
  if (c.hidden % c.heads != 0 || c.image % c.patch != 0)
    return makeError("zoo {}: hidden {} not divisible by heads {}, or image {} by patch {}",
                     c.graphName, c.hidden, c.heads, c.image, c.patch);
  auto bp = std::make_unique<OnnxBuilder>(c.graphName, o.tiny ? Weights::Random : Weights::External, o.seed);
  OnnxBuilder& b = *bp;
  Net n(b, static_cast<int>(o.loraRank), o.loraAlpha);
  const int64_t B = c.batch, H = c.hidden, D = c.hidden / c.heads;
  const int64_t patches = (c.image / c.patch) * (c.image / c.patch), S = patches + 1;
  std::string pixels = b.input("input_0", ::onnx::TensorProto::FLOAT, {B, c.channels, c.image, c.image});
  std::string labels = b.input("input_1", ::onnx::TensorProto::INT64, {B});

  std::string x = n.conv(pixels, c.channels, H, {.k = c.patch, .stride = c.patch},
                         "vit.embeddings.patch_embeddings.projection", {.bias = true});
  x = n.transpose(n.reshape(x, {B, H, patches}), {0, 2, 1});
  std::string cls = b.op("Expand", {n.param("vit.embeddings.cls_token", {1, 1, H}), b.constI64({B, 1, 1})},
                         {}, "expand");
  x = b.op("Concat", {cls, x}, {{"axis", int64_t{1}}}, "cat");
  x = n.add(x, n.param("vit.embeddings.position_embeddings", {1, S, H}));

  std::string mask = zeroMask(b, B, S, S);
  AttentionShape as{B, S, S, c.heads, c.heads, D};
  LinearOpts lin{.bias = true, .lora = !c.adapter};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "vit.layers." + std::to_string(l) + ".";
    std::string h = n.layerNorm(x, H, p + "layernorm_before", c.eps);
    std::string q = n.splitHeads(n.linear(h, H, H, p + "attention.q_proj", lin), B, S, D);
    std::string k = n.splitHeads(n.linear(h, H, H, p + "attention.k_proj", lin), B, S, D);
    std::string v = n.splitHeads(n.linear(h, H, H, p + "attention.v_proj", lin), B, S, D);
    std::string a = n.attention(q, k, v, as, 1.0f / std::sqrt(static_cast<float>(D)), mask);
    x = n.add(n.linear(a, H, H, p + "attention.o_proj", lin), x);
    h = n.layerNorm(x, H, p + "layernorm_after", c.eps);
    std::string m = n.gelu(n.linear(h, H, c.intermediate, p + "mlp.fc1", lin));
    m = n.linear(m, c.intermediate, H, p + "mlp.fc2", lin);
    if (c.adapter) {
      // AdaptFormer: a bottleneck beside the MLP, reading the MLP's input, scaled by 0.1.
      std::string ad = n.relu(n.linear(h, H, c.adapterDim, p + "adaptmlp.down_proj", {.bias = true}));
      ad = n.linear(ad, c.adapterDim, H, p + "adaptmlp.up_proj", {.bias = true});
      m = n.add(m, n.mul(ad, b.scalarF32(c.adapterScale)));
    }
    x = n.add(m, x);
  }
  x = n.layerNorm(x, H, "vit.layernorm", c.eps);
  std::string clsOut = b.op("Gather", {x, b.scalarI64(0)}, {{"axis", int64_t{1}}}, "select");
  std::string logits = n.linear(clsOut, H, c.classes, "classifier", {.bias = true, .lora = true, .rank2 = true});
  b.output(n.crossEntropy(logits, labels, c.classes), ::onnx::TensorProto::FLOAT, {});
  // Adapters train with the classifier head's LoRA (a new task needs a new head).
  b.setMetadata("fbl.trainable", c.adapter ? "*adaptmlp*,*lora_*" : "*lora_*");
  return bp;
}

}  // namespace fbl::zoo
