// The layers every zoo family shares, written node for node as the PyTorch dynamo exporter
// writes them once fbl's folding has removed the shape chains (tests/data/*-tiny show the
// originals): a Linear is Transpose(W) + MatMul (+ Add bias), or Gemm(transB=1) on a 2-D input;
// a peft LoRA branch is Transpose(A) MatMul Transpose(B) MatMul Mul(alpha/r) Add; attention is
// Transpose(K) MatMul Mul(scale) Add(mask) Softmax MatMul.
#pragma once

#include <string>

#include "compiler/zoo/onnx_builder.h"

namespace fbl::zoo {

// What a Linear/Conv carries besides its weight.
struct LinearOpts {
  bool bias = false;
  bool lora = false;
  bool rank2 = false;  // the input is [N, in]: the exporter writes Gemm
};

// A square kernel k, stride s, padding p on all sides, unless the 2-D fields are set (whisper's
// Conv1d runs as a Conv over a unit-height image: kernel 1xk, stride 1xs, pads 0,p,0,p).
struct ConvGeom {
  int64_t k = 1, stride = 1, pad = 0, groups = 1;
  std::vector<int64_t> kernel2, strides2, pads4;
};

struct AttentionShape {
  int64_t batch = 1, qLen = 1, kvLen = 1, heads = 1, kvHeads = 1, headDim = 1;
};

class Net {
 public:
  Net(OnnxBuilder& b, int loraRank, float loraAlpha, std::string prefix = "m.base_model.model.")
      : b(b), rank_(loraRank), scale_(loraAlpha / static_cast<float>(loraRank)),
        prefix_(std::move(prefix)) {}

  OnnxBuilder& b;

  std::string name(const std::string& module) const { return prefix_ + module; }
  std::string param(const std::string& module, const ir::Shape& s, Init init = Init::normal()) {
    return b.param(name(module), s, init);
  }
  int loraRank() const { return rank_; }

  // y = x W^T (+ b) (+ scale * x A^T B^T); `module` is the PyTorch module path.
  std::string linear(const std::string& x, int64_t in, int64_t out, const std::string& module,
                     LinearOpts o);
  // Conv2d (NCHW) with a peft Conv2d LoRA branch when o.lora: A is a conv of the layer's kernel,
  // stride and padding to r channels, B a 1x1 conv back to `out`.
  std::string conv(const std::string& x, int64_t in, int64_t out, const ConvGeom& g,
                   const std::string& module, LinearOpts o);
  std::string layerNorm(const std::string& x, int64_t dim, const std::string& module, float eps);
  // RMSNorm as exported: Pow ReduceMean Add Sqrt Reciprocal Mul, then Mul by the weight
  // (Gemma: by 1 + weight).
  std::string rmsNorm(const std::string& x, int64_t dim, const std::string& module, float eps,
                      bool onePlusWeight = false);
  // [B,S,H*D] -> [B,H,S,D].
  std::string splitHeads(const std::string& x, int64_t batch, int64_t len, int64_t headDim);
  // repeat_kv: [B,KV,S,D] -> [B,H,S,D] (Unsqueeze Expand Reshape; nothing when KV == H).
  std::string repeatKv(const std::string& x, const AttentionShape& s);
  // softmax(q k^T * scale (+ softcap) + mask) v, merged back to [B,Sq,H*D]. `mask` may be empty.
  std::string attention(const std::string& q, const std::string& k, const std::string& v,
                        const AttentionShape& s, float scale, const std::string& mask,
                        float softcap = 0.0f);
  // Mean token cross-entropy: logits [B,S,V] or [B,V] with integer labels.
  std::string crossEntropy(const std::string& logits, const std::string& labels, int64_t vocab);

  // Elementwise helpers.
  std::string add(const std::string& a, const std::string& c) { return b.op("Add", {a, c}, {}, "add"); }
  std::string mul(const std::string& a, const std::string& c) { return b.op("Mul", {a, c}, {}, "mul"); }
  std::string reshape(const std::string& x, const std::vector<int64_t>& shape) {
    return b.op("Reshape", {x, b.constI64(shape)}, {}, "view");
  }
  std::string transpose(const std::string& x, const std::vector<int64_t>& perm) {
    return b.op("Transpose", {x}, {{"perm", perm}}, "transpose");
  }
  std::string silu(const std::string& x) { return mul(x, b.op("Sigmoid", {x}, {}, "sigmoid")); }
  std::string gelu(const std::string& x, bool tanh = false) {
    return b.op("Gelu", {x}, {{"approximate", std::string(tanh ? "tanh" : "none")}}, "gelu");
  }
  std::string relu(const std::string& x) { return b.op("Relu", {x}, {}, "relu"); }
  // Softcapping as Gemma 2 writes it: tanh(x / cap) * cap.
  std::string softcap(const std::string& x, float cap);

 private:
  int rank_;
  float scale_;
  std::string prefix_;
};

// A causal additive mask [1,1,S,S] (0 on and below the diagonal, float min above) built from
// ConstantOfShape and Trilu, which fold to a constant; a zero mask [B,1,S,S] likewise.
std::string causalMask(OnnxBuilder& b, int64_t len);
std::string zeroMask(OnnxBuilder& b, int64_t batch, int64_t qLen, int64_t kvLen);

}  // namespace fbl::zoo
