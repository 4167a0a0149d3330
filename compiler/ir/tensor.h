// A host tensor: dtype, static shape and densely packed row-major bytes. Constants, folded
// values and the reference executor's buffers are all Tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/ir/dtype.h"
#include "compiler/support/result.h"

namespace fbl::ir {

using Shape = std::vector<int64_t>;

int64_t numElements(const Shape& s);
std::string shapeToString(const Shape& s);  // "[1,16,64]"
// Row-major strides in elements.
std::vector<int64_t> stridesOf(const Shape& s);

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<double>() { return DType::F64; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::I64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::I32; }
template <> constexpr DType dtypeOf<int8_t>() { return DType::I8; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::U8; }
template <> constexpr DType dtypeOf<bool>() { return DType::Bool; }

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled.
  Tensor(DType dtype, Shape shape);

  template <typename T>
  static Tensor fromVector(Shape shape, const std::vector<T>& values);
  template <typename T>
  static Tensor scalar(T v) { return fromVector<T>({}, std::vector<T>{v}); }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numElements(shape_); }
  size_t nbytes() const { return bytes_.size(); }

  // Typed access; the dtype must match T (bool is stored as one byte per element).
  template <typename T> T* data() {
    FBL_ASSERT(dtypeOf<T>() == dtype_);
    return reinterpret_cast<T*>(bytes_.data());
  }
  template <typename T> const T* data() const {
    FBL_ASSERT(dtypeOf<T>() == dtype_);
    return reinterpret_cast<const T*>(bytes_.data());
  }
  std::byte* raw() { return bytes_.data(); }
  const std::byte* raw() const { return bytes_.data(); }

  // Element i converted to/from double, for any dtype (slow path: folding, printing, tests).
  double at(int64_t i) const;
  void set(int64_t i, double v);
  // All elements as int64 (shape tensors, indices); any integer or bool dtype.
  std::vector<int64_t> toInt64s() const;
  // Same elements under a new shape of equal element count.
  Tensor reshaped(Shape s) const;
  // A copy converted to another dtype.
  Tensor castTo(DType t) const;

 private:
  DType dtype_ = DType::Undefined;
  Shape shape_;
  std::vector<std::byte> bytes_;
};

template <typename T>
Tensor Tensor::fromVector(Shape shape, const std::vector<T>& values) {
  Tensor t(dtypeOf<T>(), std::move(shape));
  FBL_ASSERT(static_cast<int64_t>(values.size()) == t.numel());
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < values.size(); ++i) t.bytes_[i] = std::byte(values[i] ? 1 : 0);
  } else if (!values.empty()) {
    std::memcpy(t.bytes_.data(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

}  // namespace fbl::ir
