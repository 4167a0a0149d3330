#include "compiler/ir/tensor.h"

#include <fmt/format.h>

#include "compiler/support/float16.h"

namespace fbl::ir {

int64_t numElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shapeToString(const Shape& s) {
  return fmt::format("[{}]", fmt::join(s, ","));
}

std::vector<int64_t> stridesOf(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)),
      bytes_(static_cast<size_t>(numElements(shape_)) * dtypeSize(dtype)) {}

double Tensor::at(int64_t i) const {
  const std::byte* p = bytes_.data();
  switch (dtype_) {
    case DType::F32: return reinterpret_cast<const float*>(p)[i];
    case DType::F64: return reinterpret_cast<const double*>(p)[i];
    case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::I8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::U8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
    case DType::F16: return fromHalf(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return fromBfloat16(reinterpret_cast<const uint16_t*>(p)[i]);
    default: FBL_ASSERT(false && "Tensor::at on unsupported dtype");
  }
  return 0;
}

void Tensor::set(int64_t i, double v) {
  std::byte* p = bytes_.data();
  switch (dtype_) {
    case DType::F32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::F64: reinterpret_cast<double*>(p)[i] = v; return;
    case DType::I64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
    case DType::I32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::I8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::U8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0; return;
    // Through float first: an f32 value, as every caller passes, then rounds once.
    case DType::F16: reinterpret_cast<uint16_t*>(p)[i] = toHalf(static_cast<float>(v)); return;
    case DType::BF16: reinterpret_cast<uint16_t*>(p)[i] = toBfloat16(static_cast<float>(v)); return;
    default: FBL_ASSERT(false && "Tensor::set on unsupported dtype");
  }
}

std::vector<int64_t> Tensor::toInt64s() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  if (dtype_ == DType::I64) {
    if (!out.empty()) std::memcpy(out.data(), bytes_.data(), bytes_.size());
    return out;
  }
  for (int64_t i = 0; i < numel(); ++i) out[i] = static_cast<int64_t>(at(i));
  return out;
}

Tensor Tensor::reshaped(Shape s) const {
  FBL_ASSERT(numElements(s) == numel());
  Tensor t = *this;
  t.shape_ = std::move(s);
  return t;
}

Tensor Tensor::castTo(DType t) const {
  if (t == dtype_) return *this;
  Tensor out(t, shape_);
  for (int64_t i = 0; i < numel(); ++i) out.set(i, at(i));
  return out;
}

}  // namespace fbl::ir
