// onnx.TensorProto <-> ir::Tensor. Kept apart from tensor_proto.h so that only the files that
// handle protos see <onnx/onnx_pb.h> and its global `onnx` namespace (which would clash with
// `fbl::onnx` under `using namespace fbl`).
#pragma once

#include <onnx/onnx_pb.h>

#include <string_view>

#include "compiler/ir/tensor.h"
#include "compiler/support/result.h"

namespace fbl::onnx {

// A TensorProto with its data inline (raw_data or the typed field that matches its dtype).
// External data is refused here; the importer handles it. Errors name `where` (the file).
Result<ir::Tensor> tensorFromProto(const ::onnx::TensorProto& p, std::string_view where);
void tensorToProto(const ir::Tensor& t, std::string_view name, ::onnx::TensorProto* p);

}  // namespace fbl::onnx
