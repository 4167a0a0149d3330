// Stable Diffusion v1.5's UNet (diffusers UNet2DConditionModel), the part Table 3 fine-tunes,
// with LoRA on every attention projection (to_q, to_k, to_v, to_out.0), trained with the
// denoising loss mean((unet(latents, t, text) - target)^2).
//
// 1. Timestep: Cast, times exp(-ln(10000) i/160), [cos, sin] (flip_sin_to_cos), Linear, SiLU,
//    Linear.
// 2. conv_in; down blocks (2 resnets each, cross-attention transformers in the first three, a
//    stride-2 conv between levels), the mid block (resnet, transformer, resnet), up blocks (3
//    resnets each over the concatenated skips, transformers in the last three, nearest 2x
//    upsampling as Unsqueeze/Expand/Reshape then a conv), GroupNorm, SiLU, conv_out.
// 3. GroupNorm is Reshape to [B, groups, -1], LayerNormalization with unit scale (a folded
//    constant), Reshape back, then the per-channel affine; the vocabulary has no GroupNorm.
// 4. A transformer: GroupNorm, 1x1 proj_in, to tokens, (LayerNorm, self-attention, Add),
//    (LayerNorm, cross-attention over the text context, Add), (LayerNorm, GEGLU feed-forward
//    with the halves taken by Slice, Add), back to NCHW, 1x1 proj_out, Add.
#include <cmath>
#include <limits>

#include "compiler/zoo/zoo.h"
#include "compiler/zoo/zoo_layers.h"

namespace fbl::zoo {

namespace {

struct UnetConfig {
  std::string graphName = "stable-diffusion-1.5";
  std::vector<int64_t> channels = {320, 640, 1280, 1280};
  int64_t layersPerBlock = 2, heads = 8, groups = 32, latentChannels = 4, timeSteps = 1000;
  int64_t contextLen = 77, contextDim = 768;
  float gnEps = 1e-5f, transformerGnEps = 1e-6f, lnEps = 1e-5f;
  int64_t batch = 2, image = 512;  // latents are image/8
};

UnetConfig sd15(bool tiny) {
  UnetConfig c;  // runwayml/stable-diffusion-v1-5 unet/config.json
  if (tiny) c.channels = {16, 32, 32, 32}, c.heads = 2, c.groups = 8, c.contextLen = 4,
      c.contextDim = 16, c.image = 64;
  return c;
}

class Unet {
 public:
  Unet(Net& n, const UnetConfig& c) : n(n), b(n.b), c(c) {}

  std::string groupNorm(const std::string& x, int64_t ch, int64_t hw, const std::string& module,
                        float eps) {
    int64_t per = ch / c.groups * hw;
    std::string g = n.reshape(x, {c.batch, c.groups, per});
    std::string ones = b.fill({per}, 1.0f, "ones"), zeros = b.fill({per}, 0.0f, "zeros");
    g = b.op("LayerNormalization", {g, ones, zeros},
             {{"axis", int64_t{-1}}, {"epsilon", eps}, {"stash_type", int64_t{1}}}, "group_norm");
    g = n.reshape(g, {c.batch, ch, hw});
    std::string w = n.reshape(n.param(module + ".weight", {ch}, Init::ones()), {ch, 1});
    std::string bias = n.reshape(n.param(module + ".bias", {ch}, Init::zeros()), {ch, 1});
    return n.add(n.mul(g, w), bias);
  }

  std::string conv(const std::string& x, int64_t in, int64_t out, int64_t k, int64_t stride,
                   const std::string& module) {
    return n.conv(x, in, out, {.k = k, .stride = stride, .pad = k / 2}, module, {.bias = true});
  }

  std::string resnet(const std::string& x, int64_t in, int64_t out, int64_t side,
                     const std::string& p) {
    int64_t hw = side * side;
    std::string h = n.silu(groupNorm(n.reshape(x, {c.batch, in, hw}), in, hw, p + "norm1", c.gnEps));
    h = conv(n.reshape(h, {c.batch, in, side, side}), in, out, 3, 1, p + "conv1");
    std::string t = n.linear(n.silu(temb), 4 * c.channels[0], out, p + "time_emb_proj",
                             {.bias = true, .rank2 = true});
    h = n.add(h, n.reshape(t, {c.batch, out, 1, 1}));
    h = n.silu(groupNorm(n.reshape(h, {c.batch, out, hw}), out, hw, p + "norm2", c.gnEps));
    h = conv(n.reshape(h, {c.batch, out, side, side}), out, out, 3, 1, p + "conv2");
    std::string skip = in == out ? x : conv(x, in, out, 1, 1, p + "conv_shortcut");
    return n.add(skip, h);
  }

  std::string attention(const std::string& x, const std::string& ctx, int64_t len, int64_t ctxLen,
                        int64_t dim, int64_t ctxDim, const std::string& p) {
    const int64_t D = dim / c.heads, B = c.batch;
    LinearOpts lora{.bias = false, .lora = true};
    std::string q = n.splitHeads(n.linear(x, dim, dim, p + "to_q", lora), B, len, D);
    std::string k = n.splitHeads(n.linear(ctx, ctxDim, dim, p + "to_k", lora), B, ctxLen, D);
    std::string v = n.splitHeads(n.linear(ctx, ctxDim, dim, p + "to_v", lora), B, ctxLen, D);
    AttentionShape as{B, len, ctxLen, c.heads, c.heads, D};
    std::string a = n.attention(q, k, v, as, 1.0f / std::sqrt(static_cast<float>(D)), "");
    return n.linear(a, dim, dim, p + "to_out.0", {.bias = true, .lora = true});
  }

  std::string transformer(const std::string& x, int64_t ch, int64_t side, const std::string& p) {
    int64_t hw = side * side;
    std::string h = groupNorm(n.reshape(x, {c.batch, ch, hw}), ch, hw, p + "norm", c.transformerGnEps);
    h = conv(n.reshape(h, {c.batch, ch, side, side}), ch, ch, 1, 1, p + "proj_in");
    h = n.transpose(n.reshape(h, {c.batch, ch, hw}), {0, 2, 1});
    std::string q = p + "transformer_blocks.0.";
    std::string a = n.layerNorm(h, ch, q + "norm1", c.lnEps);
    h = n.add(attention(a, a, hw, hw, ch, ch, q + "attn1."), h);
    a = n.layerNorm(h, ch, q + "norm2", c.lnEps);
    h = n.add(attention(a, context, hw, c.contextLen, ch, c.contextDim, q + "attn2."), h);
    a = n.layerNorm(h, ch, q + "norm3", c.lnEps);
    std::string proj = n.linear(a, ch, 8 * ch, q + "ff.net.0.proj", {.bias = true});
    std::string axes = b.constI64({2}), one = b.constI64({1});
    std::string val = b.op("Slice", {proj, b.constI64({0}), b.constI64({4 * ch}), axes, one}, {}, "slice");
    std::string gate = b.op("Slice", {proj, b.constI64({4 * ch}), b.constI64({8 * ch}), axes, one}, {}, "slice");
    std::string ff = n.linear(n.mul(val, n.gelu(gate)), 4 * ch, ch, q + "ff.net.2", {.bias = true});
    h = n.add(ff, h);
    h = n.reshape(n.transpose(h, {0, 2, 1}), {c.batch, ch, side, side});
    return n.add(conv(h, ch, ch, 1, 1, p + "proj_out"), x);
  }

  std::string upsample(const std::string& x, int64_t ch, int64_t side, const std::string& p) {
    std::string u = b.op("Unsqueeze", {x, b.constI64({3, 5})}, {}, "unsqueeze");
    u = b.op("Expand", {u, b.constI64({c.batch, ch, side, 2, side, 2})}, {}, "expand");
    u = n.reshape(u, {c.batch, ch, 2 * side, 2 * side});
    return conv(u, ch, ch, 3, 1, p + "conv");
  }

  Result<std::string> build(const std::string& sample, const std::string& timestep) {
    const int64_t base = c.channels[0], half = base / 2;
    // Diffusers' get_timestep_embedding with flip_sin_to_cos=True, downscale_freq_shift=0.
    std::vector<float> freqs(half);
    for (int64_t i = 0; i < half; ++i)
      freqs[i] = std::exp(-std::log(10000.0f) * static_cast<float>(i) / static_cast<float>(half));
    std::string t = b.op("Unsqueeze", {b.op("Cast", {timestep}, {{"to", int64_t{1}}}, "cast"),
                                       b.constI64({1})}, {}, "unsqueeze");
    t = n.mul(t, b.constF32({1, half}, freqs));
    t = b.op("Concat", {b.op("Cos", {t}, {}, "cos"), b.op("Sin", {t}, {}, "sin")},
             {{"axis", int64_t{-1}}}, "cat");
    t = n.linear(t, base, 4 * base, "time_embedding.linear_1", {.bias = true, .rank2 = true});
    temb = n.linear(n.silu(t), 4 * base, 4 * base, "time_embedding.linear_2", {.bias = true, .rank2 = true});

    int64_t side = c.image / 8;
    std::string x = conv(sample, c.latentChannels, base, 3, 1, "conv_in");
    std::vector<std::pair<std::string, int64_t>> skips{{x, base}};
    int64_t ch = base;
    const size_t levels = c.channels.size();
    for (size_t i = 0; i < levels; ++i) {
      bool attn = i + 1 < levels;
      for (int64_t j = 0; j < c.layersPerBlock; ++j) {
        std::string p = "down_blocks." + std::to_string(i);
        x = resnet(x, ch, c.channels[i], side, p + ".resnets." + std::to_string(j) + ".");
        ch = c.channels[i];
        if (attn) x = transformer(x, ch, side, p + ".attentions." + std::to_string(j) + ".");
        skips.push_back({x, ch});
      }
      if (i + 1 < levels) {
        x = n.conv(x, ch, ch, {.k = 3, .stride = 2, .pad = 1},
                   "down_blocks." + std::to_string(i) + ".downsamplers.0.conv", {.bias = true});
        side /= 2;
        skips.push_back({x, ch});
      }
    }
    x = resnet(x, ch, ch, side, "mid_block.resnets.0.");
    x = transformer(x, ch, side, "mid_block.attentions.0.");
    x = resnet(x, ch, ch, side, "mid_block.resnets.1.");
    for (size_t i = 0; i < levels; ++i) {
      int64_t out = c.channels[levels - 1 - i];
      bool attn = i > 0;
      std::string p = "up_blocks." + std::to_string(i);
      for (int64_t j = 0; j <= c.layersPerBlock; ++j) {
        auto [skip, skipCh] = skips.back();
        skips.pop_back();
        x = b.op("Concat", {x, skip}, {{"axis", int64_t{1}}}, "cat");
        x = resnet(x, ch + skipCh, out, side, p + ".resnets." + std::to_string(j) + ".");
        ch = out;
        if (attn) x = transformer(x, ch, side, p + ".attentions." + std::to_string(j) + ".");
      }
      if (i + 1 < levels) {
        x = upsample(x, ch, side, p + ".upsamplers.0.");
        side *= 2;
      }
    }
    int64_t hw = side * side;
    x = n.silu(groupNorm(n.reshape(x, {c.batch, ch, hw}), ch, hw, "conv_norm_out", c.gnEps));
    return conv(n.reshape(x, {c.batch, ch, side, side}), ch, c.latentChannels, 3, 1, "conv_out");
  }

  Net& n;
  OnnxBuilder& b;
  const UnetConfig& c;
  std::string temb, context;
};

Result<std::unique_ptr<OnnxBuilder>> buildUnet(const UnetConfig& c, const ZooOptions& o) {
  int64_t levels = static_cast<int64_t>(c.channels.size());
  if (c.image % (8 << (levels - 1)) != 0)
    return makeError("zoo {}: image side {} must be a multiple of {}", c.graphName, c.image,
                     8 << (levels - 1));
  auto bp = std::make_unique<OnnxBuilder>(c.graphName, o.tiny ? Weights::Random : Weights::External, o.seed);
  OnnxBuilder& b = *bp;
  // Diffusers' LoRA training script names its adapters like peft on the UNet's own modules.
  Net n(b, static_cast<int>(o.loraRank), o.loraAlpha, "m.unet.");
  const int64_t side = c.image / 8;
  std::string sample = b.input("input_0", ::onnx::TensorProto::FLOAT, {c.batch, c.latentChannels, side, side});
  std::string timestep = b.input("input_1", ::onnx::TensorProto::INT64, {c.batch});
  std::string context = b.input("input_2", ::onnx::TensorProto::FLOAT, {c.batch, c.contextLen, c.contextDim});
  std::string target = b.input("input_3", ::onnx::TensorProto::FLOAT, {c.batch, c.latentChannels, side, side});
  Unet u(n, c);
  u.context = context;
  FBL_ASSIGN(std::string pred, u.build(sample, timestep));
  std::string err = b.op("Sub", {pred, target}, {}, "sub");
  std::string sq = b.op("Pow", {err, b.scalarF32(2.0f)}, {}, "pow");
  std::string loss = b.op("ReduceMean", {sq, b.constI64({0, 1, 2, 3})},
                          {{"keepdims", int64_t{0}}, {"noop_with_empty_axes", int64_t{0}}}, "loss");
  b.output(loss, ::onnx::TensorProto::FLOAT, {});
  b.setMetadata("fbl.trainable", "*lora_*");
  return bp;
}

}  // namespace

ZooFamily unetModels() {
  return {{{"stable-diffusion-1.5",
            "SD v1.5 UNet, channels 320/640/1280/1280, 8 heads, text context 77x768; LoRA on attention q,k,v,out; batch 2, 512x512 (64x64 latents)",
            "runwayml/stable-diffusion-v1-5 unet/config.json"},
           [](const ZooOptions& o) -> Result<std::unique_ptr<OnnxBuilder>> {
             UnetConfig c = sd15(o.tiny);
             if (o.layers > 0) c.layersPerBlock = o.layers;
             if (o.batch > 0) c.batch = o.batch;
             if (o.seq > 0) c.image = o.seq;
             return buildUnet(c, o);
           }}};
}

}  // namespace fbl::zoo
