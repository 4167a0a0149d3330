// ONNX TensorProto files for fbl-train, without protobuf: the datasets it reads (DIR/input_K.pb,
// DIR/test_data_set_*/input_K.pb) and the gradients --dump-grads writes. Only the protobuf wire
// format's few fields a tensor needs are read: dims, data_type, name, raw_data and the typed data
// fields; the dtypes are fbl's (f32, i64, i32, bool, u8, i8), as the compiler's reader
// (compiler/onnx/tensor_proto.h) takes them, and tests/device/tensor_proto_io_test.cc holds
// the two readers to the same tensors and refusals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace fbl::train {

struct ProtoTensor {
  std::string name;
  std::string dtype;  // fbl spelling: "f32", "i64", ...
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;  // row-major
};

// The tensor of one TensorProto, else a line naming the file.
Result<ProtoTensor> readTensorProto(const std::string& path);
// Parses `bytes` (the file's contents; `path` names it in errors).
Result<ProtoTensor> parseTensorProto(const std::string& bytes, const std::string& path);
// Written atomically (a temporary file, then rename): name, dims, data_type and raw_data.
Status writeTensorProto(const std::string& path, const ProtoTensor& t);

}  // namespace fbl::train
