// Decoder-only LLMs of Table 3: Llama 3.2 1B, Qwen2.5 1.5B, Gemma 2 2B (HF transformers
// LlamaForCausalLM / Qwen2ForCausalLM / Gemma2ForCausalLM with peft LoRA on q,k,v,o,gate,up,down).
//
// 1. Embedding Gather (Gemma: times sqrt(hidden)).
// 2. Per layer: RMSNorm, q/k/v LoRA linears (Qwen: with bias), heads split, RoPE as
//    x*cos + rotate_half(x)*sin with rotate_half = Concat(Neg(Slice hi), Slice lo), GQA by
//    Unsqueeze/Expand/Reshape, scaled scores (Gemma: softcapped by Tanh) plus the causal mask
//    (a folded constant), Softmax, o_proj, residual; RMSNorm, SwiGLU (Gemma: GeGLU with tanh
//    Gelu) MLP, residual. Gemma 2 adds its post-attention and pre/post-feed-forward norms.
// 3. Final RMSNorm, lm_head (Gemma: final softcap), labels = ids shifted left by Pad + Slice
//    (the HF loss pads with -100), SoftmaxCrossEntropyLoss(mean, ignore_index=-100).
// buildLlamaAttention keeps step 2's attention half alone, on float hidden states, with a
// mean-square loss, so that a benchmark sees attention's layout transformations and no MLP.
#include <cmath>
#include <limits>

#include "compiler/zoo/zoo.h"
#include "compiler/zoo/zoo_layers.h"

namespace fbl::zoo {

namespace {

std::vector<float> inverseFrequencies(const LlamaConfig& c) {
  std::vector<float> inv;
  for (int64_t i = 0; i < c.headDim / 2; ++i) {
    double f = std::pow(static_cast<double>(c.ropeTheta), -2.0 * i / c.headDim);
    if (c.ropeLlama3Factor > 0) {
      // Llama 3.1+ rope_scaling: low_freq_factor 1, high_freq_factor 4, original length 8192.
      const double factor = c.ropeLlama3Factor, lowF = 1.0, highF = 4.0, old = 8192.0;
      double wavelen = 2 * M_PI / f;
      if (wavelen > old / lowF) {
        f /= factor;
      } else if (wavelen >= old / highF) {
        double smooth = (old / wavelen - lowF) / (highF - lowF);
        f = (1 - smooth) * f / factor + smooth * f;
      }
    }
    inv.push_back(static_cast<float>(f));
  }
  return inv;
}

// cos and sin tables [1,1,S,D] for positions 0..S-1 (HF duplicates the D/2 frequencies).
std::pair<std::string, std::string> ropeTables(OnnxBuilder& b, const LlamaConfig& c) {
  std::vector<float> inv = inverseFrequencies(c);
  std::vector<float> cs, sn;
  for (int64_t p = 0; p < c.seq; ++p)
    for (int64_t d = 0; d < c.headDim; ++d) {
      float a = static_cast<float>(p) * inv[d % (c.headDim / 2)];
      cs.push_back(std::cos(a));
      sn.push_back(std::sin(a));
    }
  return {b.constF32({1, 1, c.seq, c.headDim}, cs), b.constF32({1, 1, c.seq, c.headDim}, sn)};
}

std::string rope(Net& n, const std::string& x, const std::string& cos, const std::string& sin,
                 int64_t headDim) {
  OnnxBuilder& b = n.b;
  int64_t half = headDim / 2;
  std::string axes = b.constI64({3}), steps = b.constI64({1});
  std::string lo = b.op("Slice", {x, b.constI64({0}), b.constI64({half}), axes, steps}, {}, "slice");
  std::string hi = b.op("Slice", {x, b.constI64({half}), b.constI64({std::numeric_limits<int64_t>::max()}), axes, steps},
                        {}, "slice");
  std::string rot = b.op("Concat", {b.op("Neg", {hi}, {}, "neg"), lo}, {{"axis", int64_t{-1}}}, "cat");
  return n.add(n.mul(x, cos), n.mul(rot, sin));
}

}  // namespace

Result<std::unique_ptr<OnnxBuilder>> buildLlama(const LlamaConfig& c, const ZooOptions& o) {
  if (c.heads % c.kvHeads != 0 || c.headDim % 2 != 0)
    return makeError("zoo {}: heads {} must be a multiple of kv heads {} and head_dim {} even",
                     c.graphName, c.heads, c.kvHeads, c.headDim);
  auto bp = std::make_unique<OnnxBuilder>(c.graphName, o.tiny ? Weights::Random : Weights::External, o.seed);
  OnnxBuilder& b = *bp;
  Net n(b, static_cast<int>(o.loraRank), o.loraAlpha);
  const int64_t B = c.batch, S = c.seq, H = c.hidden;
  std::string ids = b.input("input_0", ::onnx::TensorProto::INT64, {B, S});

  std::string embedW = n.param("model.embed_tokens.weight", {c.vocab, H});
  std::string x = b.op("Gather", {embedW, ids}, {{"axis", int64_t{0}}}, "embedding");
  if (c.gemma) x = n.mul(x, b.scalarF32(std::sqrt(static_cast<float>(H))));
  auto [cos, sin] = ropeTables(b, c);
  std::string mask = causalMask(b, S);
  AttentionShape as{B, S, S, c.heads, c.kvHeads, c.headDim};
  float scale = 1.0f / std::sqrt(c.queryPreAttnScalar > 0 ? c.queryPreAttnScalar
                                                          : static_cast<float>(c.headDim));
  LinearOpts qkv{.bias = c.qkvBias, .lora = true};
  LinearOpts plain{.bias = false, .lora = true};

  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    std::string h = n.rmsNorm(x, H, p + "input_layernorm", c.rmsEps, c.gemma);
    std::string q = n.linear(h, H, c.heads * c.headDim, p + "self_attn.q_proj", qkv);
    q = n.splitHeads(q, B, S, c.headDim);
    std::string k = n.linear(h, H, c.kvHeads * c.headDim, p + "self_attn.k_proj", qkv);
    k = n.splitHeads(k, B, S, c.headDim);
    std::string v = n.linear(h, H, c.kvHeads * c.headDim, p + "self_attn.v_proj", qkv);
    v = n.splitHeads(v, B, S, c.headDim);
    q = rope(n, q, cos, sin, c.headDim);
    k = rope(n, k, cos, sin, c.headDim);
    std::string a = n.attention(q, k, v, as, scale, mask, c.attnSoftcap);
    a = n.linear(a, c.heads * c.headDim, H, p + "self_attn.o_proj", plain);
    if (c.gemma) a = n.rmsNorm(a, H, p + "post_attention_layernorm", c.rmsEps, true);
    x = n.add(x, a);

    h = n.rmsNorm(x, H, p + (c.gemma ? "pre_feedforward_layernorm" : "post_attention_layernorm"),
                  c.rmsEps, c.gemma);
    std::string gate = n.linear(h, H, c.intermediate, p + "mlp.gate_proj", plain);
    gate = c.gemma ? n.gelu(gate, /*tanh=*/true) : n.silu(gate);
    std::string up = n.linear(h, H, c.intermediate, p + "mlp.up_proj", plain);
    std::string m = n.linear(n.mul(gate, up), c.intermediate, H, p + "mlp.down_proj", plain);
    if (c.gemma) m = n.rmsNorm(m, H, p + "post_feedforward_layernorm", c.rmsEps, true);
    x = n.add(x, m);
  }
  x = n.rmsNorm(x, H, "model.norm", c.rmsEps, c.gemma);
  std::string headW = c.tieEmbeddings ? embedW : n.param("lm_head.weight", {c.vocab, H});
  std::string logits = b.op("MatMul", {x, n.transpose(headW, {1, 0})}, {}, "linear");
  if (c.finalSoftcap > 0) logits = n.softcap(logits, c.finalSoftcap);

  // labels = ids; the causal-LM loss predicts token t+1 from t, the last position padded -100.
  std::string padded = b.op("Pad", {ids, b.constI64({0, 0, 0, 1}), b.scalarI64(-100)},
                            {{"mode", std::string("constant")}}, "pad");
  std::string one = b.constI64({1});
  std::string labels = b.op("Slice", {padded, one, b.constI64({std::numeric_limits<int64_t>::max()}), one, one},
                            {}, "slice");
  b.output(n.crossEntropy(logits, labels, c.vocab), ::onnx::TensorProto::FLOAT, {});
  b.setMetadata("fbl.trainable", "*lora_*");
  return bp;
}

Result<std::unique_ptr<OnnxBuilder>> buildLlamaAttention(const LlamaConfig& c, const ZooOptions& o) {
  if (c.heads < 1 || c.hidden % c.heads != 0 || (c.hidden / c.heads) % 2 != 0)
    return makeError("zoo {}: hidden {} must be a multiple of heads {} with an even head_dim", c.graphName,
                     c.hidden, c.heads);
  auto bp = std::make_unique<OnnxBuilder>(c.graphName, o.tiny ? Weights::Random : Weights::External, o.seed);
  OnnxBuilder& b = *bp;
  Net n(b, static_cast<int>(o.loraRank), o.loraAlpha);
  const int64_t B = c.batch, S = c.seq, H = c.hidden, D = c.hidden / c.heads;
  std::string x = b.input("input_0", ::onnx::TensorProto::FLOAT, {B, S, H});
  auto [cos, sin] = ropeTables(b, [&] { LlamaConfig r = c; r.headDim = D; return r; }());
  LinearOpts lora{.bias = false, .lora = true};
  const std::string p = "model.layers.0.";
  std::string h = n.rmsNorm(x, H, p + "input_layernorm", c.rmsEps);
  std::string q = rope(n, n.splitHeads(n.linear(h, H, H, p + "self_attn.q_proj", lora), B, S, D), cos, sin, D);
  std::string k = rope(n, n.splitHeads(n.linear(h, H, H, p + "self_attn.k_proj", lora), B, S, D), cos, sin, D);
  std::string v = n.splitHeads(n.linear(h, H, H, p + "self_attn.v_proj", lora), B, S, D);
  std::string a = n.attention(q, k, v, AttentionShape{B, S, S, c.heads, c.heads, D},
                              1.0f / std::sqrt(static_cast<float>(D)), causalMask(b, S));
  std::string y = n.add(x, n.linear(a, H, H, p + "self_attn.o_proj", lora));
  std::string loss = b.op("ReduceMean", {n.mul(y, y), b.constI64({0, 1, 2})},
                          {{"keepdims", int64_t{0}}, {"noop_with_empty_axes", int64_t{0}}}, "loss");
  b.output(loss, ::onnx::TensorProto::FLOAT, {});
  b.setMetadata("fbl.trainable", "*lora_*");
  return bp;
}

}  // namespace fbl::zoo
