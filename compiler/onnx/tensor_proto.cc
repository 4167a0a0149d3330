#include "compiler/onnx/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <unistd.h>

#include "compiler/onnx/external_data.h"
#include "compiler/onnx/proto_tensor.h"

namespace fbl::onnx {

std::string onnxDTypeName(int32_t code) {
  switch (code) {
    case 0: return "undefined";
    case 1: return "f32";
    case 2: return "u8";
    case 3: return "i8";
    case 4: return "u16";
    case 5: return "i16";
    case 6: return "i32";
    case 7: return "i64";
    case 8: return "string";
    case 9: return "bool";
    case 10: return "f16";
    case 11: return "f64";
    case 12: return "u32";
    case 13: return "u64";
    case 14: return "complex64";
    case 15: return "complex128";
    case 16: return "bf16";
    case 17: return "f8e4m3fn";
    case 18: return "f8e4m3fnuz";
    case 19: return "f8e5m2";
    case 20: return "f8e5m2fnuz";
    case 21: return "u4";
    case 22: return "i4";
    default: return fmt::format("code {}", code);
  }
}

Result<ir::DType> supportedDType(int32_t code, std::string_view what) {
  switch (code) {
    case 1: return ir::DType::F32;
    case 2: return ir::DType::U8;
    case 3: return ir::DType::I8;
    case 6: return ir::DType::I32;
    case 7: return ir::DType::I64;
    case 9: return ir::DType::Bool;
    default:
      return makeError("unsupported dtype {} for {} (fbl supports f32, i64, i32, bool, u8, i8; "
                       "export the model in f32)",
                       onnxDTypeName(code), what);
  }
}

Result<ir::Shape> checkedShape(const int64_t* dims, int n, ir::DType t, std::string_view what) {
  ir::Shape s(dims, dims + n);
  int64_t count = 1;
  for (int64_t d : s) {
    if (d < 0) return makeError("{} has a negative dimension {}", what, d);
    if (__builtin_mul_overflow(count, d, &count))
      return makeError("{} has too many elements ({})", what, ir::shapeToString(s));
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(ir::dtypeSize(t)), &bytes))
    return makeError("{} has too many elements ({})", what, ir::shapeToString(s));
  return s;
}

Result<ir::Tensor> tensorFromProto(const ::onnx::TensorProto& p, std::string_view where) {
  const std::string& name = p.name();
  std::string what = fmt::format("tensor '{}'", name);
  auto dt = supportedDType(p.data_type(), what);
  if (!dt.ok()) return Error{fmt::format("{}: {}", where, dt.error().message)};
  auto shape = checkedShape(p.dims().data(), p.dims_size(), *dt, what);
  if (!shape.ok()) return Error{fmt::format("{}: {}", where, shape.error().message)};
  if (p.data_location() == ::onnx::TensorProto::EXTERNAL)
    return makeError("{}: tensor '{}' keeps its data in an external file, which is not allowed "
                     "here",
                     where, name);
  if (p.has_segment())
    return makeError("{}: tensor '{}' is segmented, which fbl does not support", where, name);

  const int64_t numel = ir::numElements(*shape);
  const size_t elem = ir::dtypeSize(*dt);
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    // numel * elem cannot overflow: checkedShape proved it.
    if (raw.size() != static_cast<size_t>(numel) * elem)
      return makeError("{}: tensor '{}' has {} bytes of raw_data but its shape {} of {} needs {}",
                       where, name, raw.size(), ir::shapeToString(*shape), ir::dtypeName(*dt),
                       static_cast<size_t>(numel) * elem);
    ir::Tensor t(*dt, std::move(*shape));
    if (!raw.empty()) std::memcpy(t.raw(), raw.data(), raw.size());
    if (*dt == ir::DType::Bool)  // any non-zero byte is true; keep the 0/1 invariant
      for (int64_t i = 0; i < numel; ++i) t.raw()[i] = std::byte(t.raw()[i] != std::byte(0));
    return t;
  }

  // Typed fields: the count is checked against the shape before anything is allocated.
  std::string_view field = "int32_data";
  int64_t count = p.int32_data_size();
  if (*dt == ir::DType::F32) {
    field = "float_data";
    count = p.float_data_size();
  } else if (*dt == ir::DType::I64) {
    field = "int64_data";
    count = p.int64_data_size();
  }
  if (count != numel) {
    if (count == 0)
      return makeError("{}: tensor '{}' of shape {} has no data", where, name,
                       ir::shapeToString(*shape));
    return makeError("{}: tensor '{}' has {} values in {} but its shape {} holds {}", where,
                     name, count, field, ir::shapeToString(*shape), numel);
  }
  ir::Tensor t(*dt, std::move(*shape));
  for (int i = 0; i < static_cast<int>(numel); ++i) {
    switch (*dt) {
      case ir::DType::F32: t.data<float>()[i] = p.float_data(i); break;
      case ir::DType::I64: t.data<int64_t>()[i] = p.int64_data(i); break;
      case ir::DType::I32: t.data<int32_t>()[i] = p.int32_data(i); break;
      case ir::DType::I8: t.data<int8_t>()[i] = static_cast<int8_t>(p.int32_data(i)); break;
      case ir::DType::U8: t.data<uint8_t>()[i] = static_cast<uint8_t>(p.int32_data(i)); break;
      default: t.raw()[i] = std::byte(p.int32_data(i) != 0 ? 1 : 0); break;  // bool
    }
  }
  return t;
}

void tensorToProto(const ir::Tensor& t, std::string_view name, ::onnx::TensorProto* p) {
  p->Clear();
  p->set_name(std::string(name));
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_raw_data(reinterpret_cast<const char*>(t.raw()), t.nbytes());
}

Result<NamedTensor> readTensorProtoFile(const std::string& path) {
  FBL_ASSIGN(std::string bytes, readWholeFile(path));
  if (bytes.empty()) return makeError("{}: empty file, not an ONNX TensorProto", path);
  ::onnx::TensorProto p;
  if (!p.ParseFromString(bytes))
    return makeError("{}: not a valid ONNX TensorProto (protobuf parse failed)", path);
  FBL_ASSIGN(ir::Tensor t, tensorFromProto(p, path));
  return NamedTensor{p.name(), std::move(t)};
}

Status writeTensorProtoFile(const std::string& path, const std::string& name,
                            const ir::Tensor& t) {
  ::onnx::TensorProto p;
  tensorToProto(t, name, &p);
  std::string bytes;
  if (!p.SerializeToString(&bytes))
    return makeError("{}: could not serialize tensor '{}'", path, name);

  // Same folder as the target, so that rename() is atomic (no cross-device move).
  std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  std::string tmpl =
      (dir.empty() ? std::filesystem::path(".") : dir) / ("." + target.filename().string() + ".XXXXXX");
  int fd = mkstemp(tmpl.data());
  if (fd < 0) return makeError("{}: cannot create a temporary file in its folder", path);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) {
      ::close(fd);
      std::remove(tmpl.c_str());
      return makeError("{}: write failed", path);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::remove(tmpl.c_str());
    return makeError("{}: write failed", path);
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    std::remove(tmpl.c_str());
    return makeError("{}: cannot rename the temporary file into place", path);
  }
  return {};
}

}  // namespace fbl::onnx
