// Whisper-Large (v2; WhisperForConditionalGeneration): the encoder frozen, the decoder
// fine-tuned with LoRA on its self- and cross-attention q,k,v,out and fc1/fc2 (Table 3's note).
//
// 1. Encoder stem: Conv1d(mels->d, k3, p1), GELU, Conv1d(d->d, k3, s2, p1), GELU. The reference
//    executor's Conv is 2-D, so each Conv1d runs as a Conv over a unit-height image: the
//    features are Unsqueezed to [B,mels,1,T], kernels are [out,in,1,3] (PyTorch's [out,in,3]
//    with a unit axis), pads 0,1,0,1, strides 1,s; a Reshape drops the unit axis again.
// 2. + sinusoidal positions (Slice of the table), pre-norm layers (self-attention, GELU MLP),
//    final LayerNorm.
// 3. Decoder: token + learned positions, pre-norm layers of causal self-attention,
//    cross-attention over the encoder output and a GELU MLP, final LayerNorm, logits against the
//    tied token embeddings, cross-entropy against the labels input (already shifted, as the HF
//    data collator gives them).
#include <cmath>

#include "compiler/zoo/zoo.h"
#include "compiler/zoo/zoo_layers.h"

namespace fbl::zoo {

namespace {

struct WhisperConfig {
  std::string graphName = "whisper-large";
  int64_t dModel = 1280, encoderLayers = 32, decoderLayers = 32, heads = 20, ffn = 5120;
  int64_t vocab = 51865, mels = 80, maxSource = 1500, maxTarget = 448;
  float eps = 1e-5f;
  int64_t batch = 2, frames = 300, decoderLen = 128;
};

WhisperConfig whisperLarge(bool tiny) {
  WhisperConfig c;  // openai/whisper-large-v2 config.json
  if (tiny) c.dModel = 64, c.encoderLayers = 2, c.decoderLayers = 2, c.heads = 4, c.ffn = 128,
      c.vocab = 256, c.mels = 16, c.maxSource = 16, c.maxTarget = 16, c.frames = 32,
      c.decoderLen = 8;
  return c;
}

std::string positions(Net& n, const std::string& table, int64_t len) {
  OnnxBuilder& b = n.b;
  return b.op("Slice", {table, b.constI64({0}), b.constI64({len}), b.constI64({0}), b.constI64({1})},
              {}, "slice");
}

std::string mlp(Net& n, const std::string& x, const WhisperConfig& c, const std::string& p,
                bool lora) {
  std::string h = n.gelu(n.linear(x, c.dModel, c.ffn, p + "fc1", {.bias = true, .lora = lora}));
  return n.linear(h, c.ffn, c.dModel, p + "fc2", {.bias = true, .lora = lora});
}

// Whisper's attention: k_proj has no bias; q, v and out_proj have one.
std::string attention(Net& n, const std::string& x, const std::string& kv, int64_t kvLen,
                      const WhisperConfig& c, int64_t len, const std::string& p, bool lora,
                      const std::string& mask) {
  const int64_t D = c.dModel / c.heads, B = c.batch;
  LinearOpts withBias{.bias = true, .lora = lora}, noBias{.bias = false, .lora = lora};
  std::string q = n.splitHeads(n.linear(x, c.dModel, c.dModel, p + "q_proj", withBias), B, len, D);
  std::string k = n.splitHeads(n.linear(kv, c.dModel, c.dModel, p + "k_proj", noBias), B, kvLen, D);
  std::string v = n.splitHeads(n.linear(kv, c.dModel, c.dModel, p + "v_proj", withBias), B, kvLen, D);
  AttentionShape as{B, len, kvLen, c.heads, c.heads, D};
  std::string a = n.attention(q, k, v, as, 1.0f / std::sqrt(static_cast<float>(D)), mask);
  return n.linear(a, c.dModel, c.dModel, p + "out_proj", withBias);
}

Result<std::unique_ptr<OnnxBuilder>> buildWhisper(const WhisperConfig& c, const ZooOptions& o) {
  const int64_t encLen = (c.frames + 1) / 2;
  if (c.dModel % c.heads != 0 || encLen > c.maxSource || c.decoderLen > c.maxTarget)
    return makeError("zoo {}: {} frames give {} encoder positions (at most {})", c.graphName,
                     c.frames, encLen, c.maxSource);
  auto bp = std::make_unique<OnnxBuilder>(c.graphName, o.tiny ? Weights::Random : Weights::External, o.seed);
  OnnxBuilder& b = *bp;
  Net n(b, static_cast<int>(o.loraRank), o.loraAlpha);
  const int64_t B = c.batch, d = c.dModel;
  std::string feats = b.input("input_0", ::onnx::TensorProto::FLOAT, {B, c.mels, c.frames});
  std::string ids = b.input("input_1", ::onnx::TensorProto::INT64, {B, c.decoderLen});
  std::string labels = b.input("input_2", ::onnx::TensorProto::INT64, {B, c.decoderLen});

  std::string x = b.op("Unsqueeze", {feats, b.constI64({2})}, {}, "unsqueeze");
  ConvGeom k3{.kernel2 = {1, 3}, .strides2 = {1, 1}, .pads4 = {0, 1, 0, 1}};
  x = n.gelu(n.conv(x, c.mels, d, k3, "model.encoder.conv1", {.bias = true}));
  k3.strides2 = {1, 2};
  x = n.gelu(n.conv(x, d, d, k3, "model.encoder.conv2", {.bias = true}));
  x = n.transpose(n.reshape(x, {B, d, encLen}), {0, 2, 1});
  x = n.add(x, positions(n, n.param("model.encoder.embed_positions.weight", {c.maxSource, d}), encLen));
  for (int64_t l = 0; l < c.encoderLayers; ++l) {
    std::string p = "model.encoder.layers." + std::to_string(l) + ".";
    std::string h = n.layerNorm(x, d, p + "self_attn_layer_norm", c.eps);
    x = n.add(x, attention(n, h, h, encLen, c, encLen, p + "self_attn.", false, ""));
    x = n.add(x, mlp(n, n.layerNorm(x, d, p + "final_layer_norm", c.eps), c, p, false));
  }
  std::string enc = n.layerNorm(x, d, "model.encoder.layer_norm", c.eps);

  std::string embedW = n.param("model.decoder.embed_tokens.weight", {c.vocab, d});
  std::string y = b.op("Gather", {embedW, ids}, {{"axis", int64_t{0}}}, "embedding");
  y = n.add(y, positions(n, n.param("model.decoder.embed_positions.weight", {c.maxTarget, d}), c.decoderLen));
  std::string mask = causalMask(b, c.decoderLen);
  for (int64_t l = 0; l < c.decoderLayers; ++l) {
    std::string p = "model.decoder.layers." + std::to_string(l) + ".";
    std::string h = n.layerNorm(y, d, p + "self_attn_layer_norm", c.eps);
    y = n.add(y, attention(n, h, h, c.decoderLen, c, c.decoderLen, p + "self_attn.", true, mask));
    h = n.layerNorm(y, d, p + "encoder_attn_layer_norm", c.eps);
    y = n.add(y, attention(n, h, enc, encLen, c, c.decoderLen, p + "encoder_attn.", true, ""));
    y = n.add(y, mlp(n, n.layerNorm(y, d, p + "final_layer_norm", c.eps), c, p, true));
  }
  y = n.layerNorm(y, d, "model.decoder.layer_norm", c.eps);
  std::string logits = b.op("MatMul", {y, n.transpose(embedW, {1, 0})}, {}, "linear");
  b.output(n.crossEntropy(logits, labels, c.vocab), ::onnx::TensorProto::FLOAT, {});
  b.setMetadata("fbl.trainable", "*lora_*");
  return bp;
}

}  // namespace

ZooFamily whisperModels() {
  return {{{"whisper-large",
            "encoder-decoder speech model (v2), 32+32 layers, d 1280, 20 heads; encoder frozen, decoder LoRA; batch 2, 300 frames, 128 decoder tokens",
            "openai/whisper-large-v2 config.json"},
           [](const ZooOptions& o) {
             WhisperConfig c = whisperLarge(o.tiny);
             if (o.layers > 0) c.encoderLayers = c.decoderLayers = o.layers;
             if (o.batch > 0) c.batch = o.batch;
             if (o.seq > 0) c.frames = o.seq;
             return buildWhisper(c, o);
           }}};
}

}  // namespace fbl::zoo
