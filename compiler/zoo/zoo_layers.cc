#include "compiler/zoo/zoo_layers.h"

#include <limits>

namespace fbl::zoo {

std::string Net::linear(const std::string& x, int64_t in, int64_t out, const std::string& module,
                        LinearOpts o) {
  std::string base = o.lora ? module + ".base_layer" : module;
  std::string w = param(base + ".weight", {out, in});
  std::string bias = o.bias ? param(base + ".bias", {out}, Init::zeros()) : "";
  std::string y;
  if (o.rank2) {
    std::vector<std::string> ins{x, w};
    if (o.bias) ins.push_back(bias);
    y = b.op("Gemm", ins, {{"alpha", 1.0f}, {"beta", 1.0f}, {"transA", int64_t{0}}, {"transB", int64_t{1}}},
             "linear");
  } else {
    y = b.op("MatMul", {x, transpose(w, {1, 0})}, {}, "linear");
    if (o.bias) y = b.op("Add", {y, bias}, {}, "linear");
  }
  if (!o.lora) return y;
  std::string a = param(module + ".lora_A.default.weight", {rank_, in});
  // peft starts B at zero; random here so that every tiny-model gradient is non-zero.
  std::string bw = param(module + ".lora_B.default.weight", {out, rank_});
  std::string h;
  if (o.rank2) {
    auto gemm = [&](const std::string& u, const std::string& m) {
      return b.op("Gemm", {u, m}, {{"alpha", 1.0f}, {"beta", 1.0f}, {"transA", int64_t{0}}, {"transB", int64_t{1}}},
                  "linear");
    };
    h = gemm(gemm(x, a), bw);
  } else {
    h = b.op("MatMul", {x, transpose(a, {1, 0})}, {}, "linear");
    h = b.op("MatMul", {h, transpose(bw, {1, 0})}, {}, "linear");
  }
  return add(y, mul(h, b.scalarF32(scale_)));
}

std::string Net::conv(const std::string& x, int64_t in, int64_t out, const ConvGeom& g,
                      const std::string& module, LinearOpts o) {
  std::vector<int64_t> kernel = g.kernel2.empty() ? std::vector<int64_t>{g.k, g.k} : g.kernel2;
  std::vector<int64_t> strides =
      g.strides2.empty() ? std::vector<int64_t>{g.stride, g.stride} : g.strides2;
  std::vector<int64_t> pads =
      g.pads4.empty() ? std::vector<int64_t>{g.pad, g.pad, g.pad, g.pad} : g.pads4;
  auto attrs = [&](const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                   const std::vector<int64_t>& p, int64_t groups) {
    return std::vector<Attr>{{"auto_pad", std::string("NOTSET")}, {"dilations", std::vector<int64_t>{1, 1}},
                             {"group", groups}, {"kernel_shape", k}, {"pads", p}, {"strides", s}};
  };
  std::string base = o.lora ? module + ".base_layer" : module;
  std::vector<std::string> ins{x, param(base + ".weight", {out, in / g.groups, kernel[0], kernel[1]})};
  if (o.bias) ins.push_back(param(base + ".bias", {out}, Init::zeros()));
  std::string y = b.op("Conv", ins, attrs(kernel, strides, pads, g.groups), "conv2d");
  if (!o.lora) return y;
  std::string a = param(module + ".lora_A.default.weight", {rank_, in, kernel[0], kernel[1]});
  std::string bw = param(module + ".lora_B.default.weight", {out, rank_, 1, 1});
  std::string h = b.op("Conv", {x, a}, attrs(kernel, strides, pads, 1), "conv2d");
  h = b.op("Conv", {h, bw}, attrs({1, 1}, {1, 1}, {0, 0, 0, 0}, 1), "conv2d");
  return add(y, mul(h, b.scalarF32(scale_)));
}

std::string Net::layerNorm(const std::string& x, int64_t dim, const std::string& module, float eps) {
  std::string w = param(module + ".weight", {dim}, Init::ones());
  std::string bias = param(module + ".bias", {dim}, Init::zeros());
  return b.op("LayerNormalization", {x, w, bias},
              {{"axis", int64_t{-1}}, {"epsilon", eps}, {"stash_type", int64_t{1}}}, "layer_norm");
}

std::string Net::rmsNorm(const std::string& x, int64_t dim, const std::string& module, float eps,
                         bool onePlusWeight) {
  std::string sq = b.op("Pow", {x, b.scalarF32(2.0f)}, {}, "pow");
  std::string mean = b.op("ReduceMean", {sq, b.constI64({-1})},
                          {{"keepdims", int64_t{1}}, {"noop_with_empty_axes", int64_t{0}}}, "mean");
  std::string r = b.op("Reciprocal", {b.op("Sqrt", {add(mean, b.scalarF32(eps))}, {}, "sqrt")}, {}, "rsqrt");
  std::string normed = mul(x, r);
  // Gemma stores the weight as an offset from one (its norm multiplies by 1 + w).
  std::string w = param(module + ".weight", {dim}, onePlusWeight ? Init::zeros() : Init::ones());
  if (onePlusWeight) return mul(normed, add(w, b.scalarF32(1.0f)));
  return mul(w, normed);
}

std::string Net::splitHeads(const std::string& x, int64_t batch, int64_t len, int64_t headDim) {
  return transpose(reshape(x, {batch, len, -1, headDim}), {0, 2, 1, 3});
}

std::string Net::repeatKv(const std::string& x, const AttentionShape& s) {
  if (s.kvHeads == s.heads) return x;
  int64_t rep = s.heads / s.kvHeads;
  std::string u = b.op("Unsqueeze", {x, b.constI64({2})}, {}, "unsqueeze");
  std::string e = b.op("Expand", {u, b.constI64({s.batch, s.kvHeads, rep, s.kvLen, s.headDim})}, {}, "expand");
  return reshape(e, {s.batch, s.heads, s.kvLen, s.headDim});
}

std::string Net::softcap(const std::string& x, float cap) {
  std::string t = b.op("Tanh", {b.op("Div", {x, b.scalarF32(cap)}, {}, "div")}, {}, "tanh");
  return mul(t, b.scalarF32(cap));
}

std::string Net::attention(const std::string& q, const std::string& k, const std::string& v,
                           const AttentionShape& s, float scale, const std::string& mask,
                           float cap) {
  std::string kt = transpose(repeatKv(k, s), {0, 1, 3, 2});
  std::string scores = mul(b.op("MatMul", {q, kt}, {}, "matmul"), b.scalarF32(scale));
  if (cap > 0) scores = softcap(scores, cap);
  if (!mask.empty()) scores = add(scores, mask);
  std::string p = b.op("Softmax", {scores}, {{"axis", int64_t{-1}}}, "softmax");
  std::string o = b.op("MatMul", {p, repeatKv(v, s)}, {}, "matmul");
  return reshape(transpose(o, {0, 2, 1, 3}), {s.batch, s.qLen, -1});
}

std::string Net::crossEntropy(const std::string& logits, const std::string& labels, int64_t vocab) {
  std::string l = reshape(logits, {-1, vocab});
  std::string t = reshape(labels, {-1});
  return b.op("SoftmaxCrossEntropyLoss", {l, t},
              {{"ignore_index", int64_t{-100}}, {"reduction", std::string("mean")}}, "loss");
}

std::string causalMask(OnnxBuilder& b, int64_t len) {
  std::string full = b.fill({1, 1, len, len}, std::numeric_limits<float>::lowest(), "full");
  return b.op("Trilu", {full, b.scalarI64(1)}, {{"upper", int64_t{1}}}, "triu");
}

std::string zeroMask(OnnxBuilder& b, int64_t batch, int64_t qLen, int64_t kvLen) {
  return b.fill({batch, 1, qLen, kvLen}, 0.0f, "where");
}

}  // namespace fbl::zoo
