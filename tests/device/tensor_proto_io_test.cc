// fbl-train's TensorProto reader and writer (runtime/tools/tensor_proto_io.h), which parse the
// wire format themselves, against the compiler's (compiler/onnx/tensor_proto.h, protobuf): the
// same tensors from every TensorProto under tests/data, files either writes read back by the
// other, typed fields packed and unpacked, and the same refusals of broken files.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <random>

#include <onnx/onnx_pb.h>

#include "compiler/onnx/tensor_proto.h"
#include "runtime/tools/tensor_proto_io.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;

void sameTensor(const train::ProtoTensor& mine, const onnx::NamedTensor& theirs) {
  CHECK(mine.name == theirs.name);
  CHECK(mine.dtype == ir::dtypeName(theirs.tensor.dtype()));
  CHECK(mine.shape == std::vector<int64_t>(theirs.tensor.shape().begin(), theirs.tensor.shape().end()));
  REQUIRE(mine.bytes.size() == theirs.tensor.nbytes());
  CHECK(std::memcmp(mine.bytes.data(), theirs.tensor.raw(), mine.bytes.size()) == 0);
}

// Both readers on `bytes`: the same tensor, or both refuse.
void sameVerdict(const std::string& bytes, const std::string& what) {
  INFO(what);
  const std::string path = tempDir() + "/proto-case.pb";
  REQUIRE_OK(safetensors::writeFileAtomic(path, bytes, "a case"));
  const Result<train::ProtoTensor> mine = train::readTensorProto(path);
  const std::string e = fbl::testing::errorText(mine);
  auto theirs = onnx::readTensorProtoFile(path);
  INFO("mine: " << e << "\ntheirs: " << (theirs.ok() ? std::string("ok") : theirs.error().message));
  REQUIRE(mine.ok() == theirs.ok());
  if (theirs.ok()) sameTensor(*mine, *theirs);
  if (!e.empty()) CHECK(e.rfind(path + ": ", 0) == 0);
}

}  // namespace

TEST_CASE("fbl-train's TensorProto reader reads every tensor of tests/data as protobuf does", "[runtime][tensor-proto]") {
  int64_t files = 0;
  for (const auto& f : fs::recursive_directory_iterator(FBL_TEST_DATA_DIR)) {
    if (f.path().extension() != ".pb") continue;
    INFO(f.path().string());
    auto theirs = onnx::readTensorProtoFile(f.path().string());
    if (!theirs.ok()) continue;  // a dtype fbl does not read: the refusals are below
    train::ProtoTensor mine = fbl::testing::requireValue(train::readTensorProto(f.path().string()));
    sameTensor(mine, *theirs);
    ++files;
  }
  CHECK(files >= 100);
}

TEST_CASE("TensorProto files written by either side read back the same by the other", "[runtime][tensor-proto]") {
  std::mt19937 rng(5);
  const std::string a = tempDir() + "/proto-mine.pb", b = tempDir() + "/proto-theirs.pb";
  for (ir::DType dt : {ir::DType::F32, ir::DType::I64, ir::DType::I32, ir::DType::U8, ir::DType::I8, ir::DType::Bool}) {
    for (const ir::Shape& shape : {ir::Shape{}, ir::Shape{0}, ir::Shape{3, 5}, ir::Shape{2, 1, 4}}) {
      INFO(ir::dtypeName(dt) << " " << ir::shapeToString(shape));
      ir::Tensor x(dt, shape);
      for (size_t i = 0; i < x.nbytes(); ++i) x.raw()[i] = std::byte(rng() & (dt == ir::DType::Bool ? 1 : 255));
      train::ProtoTensor t{"x.y/z", std::string(ir::dtypeName(dt)), std::vector<int64_t>(shape.begin(), shape.end()), {}};
      t.bytes.assign(reinterpret_cast<const unsigned char*>(x.raw()), reinterpret_cast<const unsigned char*>(x.raw()) + x.nbytes());
      REQUIRE_OK(train::writeTensorProto(a, t));
      auto back = onnx::readTensorProtoFile(a);
      REQUIRE(back.ok());
      sameTensor(t, *back);
      REQUIRE(onnx::writeTensorProtoFile(b, "x.y/z", x).ok());
      train::ProtoTensor mine = fbl::testing::requireValue(train::readTensorProto(b));
      sameTensor(mine, {"x.y/z", x});
    }
  }
}

TEST_CASE("typed data fields, packed or not, and broken files give both readers one verdict", "[runtime][tensor-proto]") {
  ::onnx::TensorProto p;
  p.set_name("t");
  p.add_dims(2);
  p.add_dims(3);
  p.set_data_type(1);
  for (int i = 0; i < 6; ++i) p.add_float_data(0.5f * i - 1);
  sameVerdict(p.SerializeAsString(), "float_data (packed by protobuf)");
  p.set_data_type(7);
  p.clear_float_data();
  for (int i = 0; i < 6; ++i) p.add_int64_data(int64_t{-3} << (i * 9));
  sameVerdict(p.SerializeAsString(), "int64_data, negative values");
  for (int code : {6, 3, 2, 9}) {
    p.set_data_type(code);
    p.clear_int64_data();
    for (int i = 0; i < 6; ++i) p.add_int32_data(i % 2 ? -7 * i : 200 + i);
    sameVerdict(p.SerializeAsString(), "int32_data for dtype code " + std::to_string(code));
  }
  // Unpacked repeated fields, as a proto2 writer may emit them: dims 2 and 3 one at a time,
  // int64 values one varint each.
  std::string unpacked = std::string("\x08\x02\x08\x03\x10\x07", 6);
  for (int i = 0; i < 6; ++i) unpacked += std::string("\x38", 1) + static_cast<char>(i);
  sameVerdict(unpacked, "unpacked dims and int64_data");
  // Refusals.
  p.set_data_type(1);
  p.clear_int32_data();
  p.set_raw_data(std::string(23, '\0'));
  sameVerdict(p.SerializeAsString(), "raw_data one byte short");
  p.set_raw_data(std::string(24, '\0'));
  p.set_data_type(10);
  sameVerdict(p.SerializeAsString(), "f16, which fbl does not read");
  p.set_data_type(1);
  p.set_data_location(::onnx::TensorProto::EXTERNAL);
  sameVerdict(p.SerializeAsString(), "external data");
  p.set_data_location(::onnx::TensorProto::DEFAULT);
  p.set_dims(0, -2);
  sameVerdict(p.SerializeAsString(), "a negative dimension");
  p.set_dims(0, 2);
  const std::string good = p.SerializeAsString();
  sameVerdict(good, "the good file");
  for (size_t cut = 1; cut < good.size(); cut += 3) sameVerdict(good.substr(0, cut), "cut to " + std::to_string(cut) + " bytes");
  sameVerdict("", "empty");
  sameVerdict(std::string("\x0b\x00", 2), "a group wire type");
  sameVerdict(std::string(12, '\xff'), "a varint longer than 10 bytes");
}

}  // namespace fbl::testing
