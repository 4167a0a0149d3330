// onnx.TensorProto files <-> ir::Tensor: the corpus's test_data_set_N/input_N.pb and grads/*.pb,
// and what `fblc run-ref --dump` writes. The dtype and shape checks below are shared with the
// importer, so every tensor that enters fbl from a proto is checked by the same code (the
// proto conversions themselves are in proto_tensor.h, which pulls in protobuf).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/ir/tensor.h"
#include "compiler/support/result.h"

namespace fbl::onnx {

struct NamedTensor {
  std::string name;
  ir::Tensor tensor;
};

Result<NamedTensor> readTensorProtoFile(const std::string& path);
// Written atomically (temporary file, then rename).
Status writeTensorProtoFile(const std::string& path, const std::string& name,
                            const ir::Tensor& t);

// The ONNX data-type code as a short name: "f32", "f16", "string", "complex64", "code 99".
std::string onnxDTypeName(int32_t code);
// The dtypes fbl computes in (f32, i64, i32, bool, u8, i8); anything else is an error that
// names `what` ("tensor 'w'"): "unsupported dtype f16 for tensor 'w'".
Result<ir::DType> supportedDType(int32_t code, std::string_view what);
// Dims -> Shape: every dim >= 0 and the element count times the element size fits in int64.
Result<ir::Shape> checkedShape(const int64_t* dims, int n, ir::DType t, std::string_view what);

}  // namespace fbl::onnx
