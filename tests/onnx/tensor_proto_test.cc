// TensorProto files: the corpus's inputs, losses and gradients read; fbl's own files written
// atomically and read back.
#include "compiler/onnx/tensor_proto.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "compiler/onnx/importer.h"
#include "tests/onnx/onnx_test_util.h"

namespace fbl::onnx {
namespace {

using fbl::testing::TempDir;
const std::string kData = FBL_TEST_DATA_DIR;

TEST_CASE("corpus inputs and outputs read with the model's input types", "[onnx]") {
  for (const char* model : {"llama-tiny", "bert-tiny", "vit-tiny", "bert-tiny-torchscript",
                            "llama-tiny-folded"}) {
    INFO(model);
    std::string dir = kData + "/" + model;
    auto g = importModel(dir + "/model.onnx");
    REQUIRE(g.ok());
    for (size_t i = 0; i < g->inputs.size(); ++i) {
      auto t = readTensorProtoFile(fmt::format("{}/test_data_set_0/input_{}.pb", dir, i));
      REQUIRE(t.ok());
      const auto& in = g->values[g->inputs[i]];
      CHECK(t->tensor.dtype() == in.dtype);
      CHECK(t->tensor.shape() == in.shape);
    }
    auto loss = readTensorProtoFile(dir + "/test_data_set_0/output_0.pb");
    REQUIRE(loss.ok());
    CHECK(loss->tensor.dtype() == ir::DType::F32);
    CHECK(loss->tensor.numel() == 1);
  }
}

TEST_CASE("gradient files are named by the parameter and shaped like it", "[onnx]") {
  std::string dir = kData + "/llama-tiny";
  auto g = importModel(dir + "/model.onnx");
  REQUIRE(g.ok());
  auto meta = nlohmann::json::parse(fbl::testing::readFile(dir + "/meta.json"));
  size_t n = meta["trainable"].size();
  for (size_t i = 0; i < n; ++i) {
    auto t = readTensorProtoFile(fmt::format("{}/grads/grad_{}.pb", dir, i));
    REQUIRE(t.ok());
    ir::ValueId param = g->findValue("m." + t->name);
    REQUIRE(param != ir::kNoValue);
    CHECK(t->tensor.shape() == g->values[param].shape);
  }
}

TEST_CASE("written tensors read back identically and leave no temporary file", "[onnx]") {
  TempDir tmp;
  std::vector<float> f{1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  auto a = ir::Tensor::fromVector<float>({2, 3}, f);
  auto b = ir::Tensor::fromVector<int64_t>({4}, {1, -2, int64_t{1} << 60, 0});
  auto c = ir::Tensor::fromVector<bool>({3}, {true, false, true});
  auto s = ir::Tensor::scalar<int32_t>(-9);
  int k = 0;
  for (const ir::Tensor* t : {&a, &b, &c, &s}) {
    std::string path = tmp.file(fmt::format("t{}.pb", k++));
    REQUIRE(writeTensorProtoFile(path, "param.x", *t).ok());
    auto back = readTensorProtoFile(path);
    REQUIRE(back.ok());
    CHECK(back->name == "param.x");
    CHECK(back->tensor.dtype() == t->dtype());
    CHECK(back->tensor.shape() == t->shape());
    REQUIRE(back->tensor.nbytes() == t->nbytes());
    CHECK(std::memcmp(back->tensor.raw(), t->raw(), t->nbytes()) == 0);
  }
  // Overwriting is a rename over the old file.
  REQUIRE(writeTensorProtoFile(tmp.file("t0.pb"), "again", b).ok());
  CHECK(readTensorProtoFile(tmp.file("t0.pb"))->name == "again");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    CHECK(e.path().filename().string()[0] != '.');
    ++files;
  }
  CHECK(files == 4);
}

TEST_CASE("bad tensor files give one line", "[onnx]") {
  TempDir tmp;
  auto missing = readTensorProtoFile(tmp.file("none.pb"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == tmp.file("none.pb") + ": no such file");

  fbl::testing::writeFile(tmp.file("junk.pb"), std::string("\xff\xff\xff\xff\xff", 5));
  auto junk = readTensorProtoFile(tmp.file("junk.pb"));
  REQUIRE_FALSE(junk.ok());
  CHECK(junk.error().message.find("protobuf parse failed") != std::string::npos);

  ::onnx::TensorProto p;
  p.set_name("h");
  p.set_data_type(::onnx::TensorProto::FLOAT16);
  p.add_dims(1);
  p.set_raw_data(std::string(2, '\0'));
  fbl::testing::writeFile(tmp.file("half.pb"), p.SerializeAsString());
  auto half = readTensorProtoFile(tmp.file("half.pb"));
  REQUIRE_FALSE(half.ok());
  CHECK(half.error().message.find("unsupported dtype f16 for tensor 'h'") != std::string::npos);

  CHECK_FALSE(writeTensorProtoFile(tmp.file("no/such/dir/x.pb"), "x", ir::Tensor::scalar(1.0f)).ok());
}

}  // namespace
}  // namespace fbl::onnx
