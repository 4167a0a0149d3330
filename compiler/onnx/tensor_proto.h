// onnx.TensorProto files <-> ir::Tensor: the corpus's test_data_set_N/input_N.pb and grads/*.pb,
// and what `fblc run-ref --dump` writes.
#pragma once

#include <string>

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

}  // namespace fbl::onnx
