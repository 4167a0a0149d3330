// Element types the IR knows. Values match onnx.TensorProto.DataType so import is a cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fbl::ir {

enum class DType : int32_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  I32 = 6,
  I64 = 7,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  BF16 = 16,
};

// Size of one element in bytes (0 for Undefined).
size_t dtypeSize(DType t);
std::string_view dtypeName(DType t);  // "f32", "i64", ...
// Maps an ONNX TensorProto.DataType code to a supported DType, nullopt if unsupported.
std::optional<DType> dtypeFromOnnx(int32_t code);
std::optional<DType> dtypeFromName(std::string_view name);
bool isFloat(DType t);
// f16 or bf16. fbl stores activations in them (compiler/passes/pack_saved.h) but computes on
// neither: kernels and the reference executor only convert them to and from f32.
bool isFloat16(DType t);

}  // namespace fbl::ir
