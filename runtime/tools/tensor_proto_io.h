// What fbl-train takes from the compiler library, all of it: ONNX TensorProto files, which need
// protobuf (the runtime parses none). fbl-train reads them as datasets (DIR/input_K.pb,
// DIR/test_data_set_*/input_K.pb) and writes them for --dump-grads. Everything else it needs is
// the runtime's: weights from the .safetensors `fblc compile` writes beside the plan, synthetic
// inputs from the plan's input_checks (runtime/synthetic_inputs.h). Only tensor_proto_io.cc
// includes compiler headers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::train {

struct ProtoTensor {
  std::string name;
  std::string dtype;  // fbl spelling: "f32", "i64", ...
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;  // row-major
};

// "" or a line naming the file.
std::string readTensorProto(const std::string& path, ProtoTensor* out);
// Written atomically (a temporary file, then rename).
std::string writeTensorProto(const std::string& path, const ProtoTensor& t);

}  // namespace fbl::train
