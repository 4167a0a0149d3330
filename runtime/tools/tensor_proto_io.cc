#include "runtime/tools/tensor_proto_io.h"

#include <cstring>

#include "compiler/onnx/tensor_proto.h"

namespace fbl::train {

std::string readTensorProto(const std::string& path, ProtoTensor* out) {
  auto t = onnx::readTensorProtoFile(path);
  if (!t.ok()) return t.error().message;
  const ir::Tensor& x = t->tensor;
  const auto* bytes = reinterpret_cast<const unsigned char*>(x.raw());
  *out = ProtoTensor{t->name, std::string(ir::dtypeName(x.dtype())), std::vector<int64_t>(x.shape().begin(), x.shape().end()),
                     std::vector<unsigned char>(bytes, bytes + x.nbytes())};
  return "";
}

std::string writeTensorProto(const std::string& path, const ProtoTensor& t) {
  const std::optional<ir::DType> dt = ir::dtypeFromName(t.dtype);
  if (!dt) return path + ": no TensorProto for dtype " + t.dtype;
  ir::Tensor x(*dt, ir::Shape(t.shape.begin(), t.shape.end()));
  if (x.nbytes() != t.bytes.size())
    return path + ": tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) + " bytes, not " + std::to_string(x.nbytes());
  if (!t.bytes.empty()) std::memcpy(x.raw(), t.bytes.data(), t.bytes.size());
  if (auto st = onnx::writeTensorProtoFile(path, t.name, x); !st.ok()) return st.error().message;
  return "";
}

}  // namespace fbl::train
