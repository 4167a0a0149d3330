#include "compiler/ir/dtype.h"

namespace fbl::ir {

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::I64: case DType::F64: return 8;
    case DType::U8: case DType::I8: case DType::Bool: return 1;
    case DType::F16: case DType::BF16: return 2;
    case DType::Undefined: return 0;
  }
  return 0;
}

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::U8: return "u8";
    case DType::I8: return "i8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
    case DType::F16: return "f16";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::Undefined: return "undefined";
  }
  return "undefined";
}

std::optional<DType> dtypeFromOnnx(int32_t code) {
  switch (code) {
    case 1: case 2: case 3: case 6: case 7: case 9: case 10: case 11: case 16:
      return static_cast<DType>(code);
    default: return std::nullopt;
  }
}

std::optional<DType> dtypeFromName(std::string_view name) {
  for (DType t : {DType::F32, DType::U8, DType::I8, DType::I32, DType::I64, DType::Bool,
                  DType::F16, DType::F64, DType::BF16})
    if (dtypeName(t) == name) return t;
  return std::nullopt;
}

bool isFloat16(DType t) { return t == DType::F16 || t == DType::BF16; }

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::F64 || t == DType::BF16;
}

}  // namespace fbl::ir
