// The frozen base stored narrower: `--base-weights fp16|int8|int4` of `fblc compile` and
// `fblc run-ref`.
//
// LoRA never updates the base: its weights are only read, by the forward product and by the
// backward one that carries the gradient to the activations (dX = dY W^T). So a base weight may
// be stored as fp16, or as signed 8- or 4-bit integers with an fp16 scale per group of
// consecutive elements along the forward product's reduction axis, and every reader
// dequantizes in registers. The semantics change once, at compile time: the model trains on
// decode(encode(W)), and run-ref with the same option reads exactly those values, so a quantized
// plan's gradients are checked against the reference as tightly as an fp32 plan's.
//
// Which weights: float matrices that are not trainable and that only products (MatMul, Gemm:
// either operand) and embedding tables (Gather's data) read, directly or through transposes.
// Others (norms, biases, convolutions, a matrix an elementwise op reads) stay fp32.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/layout/layout.h"
#include "compiler/support/result.h"

namespace fbl::quant {

// The elements per scale unless the command says otherwise (docs/precision.md: why 32).
inline constexpr int64_t kDefaultGroup = 32;

struct BaseWeights {
  int bits = 32;                  // 32 (nothing changes), 16, 8 or 4
  int64_t group = kDefaultGroup;  // elements per scale (8 and 4 bits)
};
// `--base-weights fp32|fp16|int8|int4` and `--base-weights-group` (a positive multiple of 4, so
// that a texel's four elements share their scale).
Result<BaseWeights> parseBaseWeights(const std::string& text, int64_t group);

// The encoding of every frozen weight `base` applies to, by initializer name. A weight whose
// grouped axis the group does not divide stays fp32; `skipped` (optional) gets each frozen
// float matrix left fp32 and why.
std::map<std::string, layout::Encoding> chooseEncodings(const ir::Graph& forward, const std::set<std::string>& trainables,
                                                        BaseWeights base,
                                                        std::map<std::string, std::string>* skipped = nullptr);

// chooseEncodings with the trainables the globs select (autodiff::selectTrainables): what
// `fblc compile` stores and what `fblc run-ref` decodes, from one place.
Result<std::map<std::string, layout::Encoding>> encodingsFor(const ir::Graph& forward,
                                                             const std::vector<std::string>& trainableGlobs,
                                                             BaseWeights base,
                                                             std::map<std::string, std::string>* skipped = nullptr);

// The bytes of `values` (a row-major [e.rows x e.cols] matrix, initializer `name`) as
// planfile::encodedBytes lays them out, and the values those bytes hold. An integer group's scale
// is its element of largest magnitude over -2^(bits-1) (that element is then exact, unless fp16
// rounds the scale), in fp16. An error for a value the encoding cannot store (not finite, or
// beyond fp16's range).
Result<std::vector<uint8_t>> encode(const std::string& name, std::span<const float> values, const layout::Encoding& e);
std::vector<float> decode(std::span<const uint8_t> bytes, const layout::Encoding& e);

// Replaces each encoded initializer's data by decode(encode(data)): the values a plan stored
// that way computes with. Every initializer in `encodings` must hold f32 data.
Status applyToData(ir::Graph& g, const std::map<std::string, layout::Encoding>& encodings);

}  // namespace fbl::quant
