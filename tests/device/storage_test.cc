// Tensors stored in other layouts than row-major (layout_lowering.h, step 4) on PoCL:
//  - every host tensor a plan packs (weights, trainables, optimizer state in an R-Tile buffer, an
//    R-Tile image, MNN's image or TFLite's texture) round-trips bit-exactly through
//    writeTensor/readTensor, i.e. through the plan's pack and unpack launches, whole or in
//    chunks of rows through a staging tensor smaller than the tensor;
//  - a checkpoint written by one plan loads into a plan of another strategy and storage, and the
//    exported adapters of both then agree byte for byte (bytes leave the device row-major).
// Loss and gradients under every strategy and storage are strategies_test.cc's.
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/onnx/tensor_proto.h"
#include "compiler/driver/compile_command.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

struct Compiled {
  planfile::Plan plan;
  std::string weights;
};

Compiled compileLlamaTiny(const std::string& strategy, const std::string& storage,
                          int64_t stagingBytes = plan::kStagingBytes) {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/storage-" + strategy + "-" + storage + ".fbp";
  a.weights = tempDir() + "/storage-llama-tiny.safetensors";
  a.strategy = strategy;
  a.storage = storage;
  a.stagingBytes = stagingBytes;
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  return {std::move(c->plan), a.weights};
}

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("packed host tensors round-trip bit-exactly in every layout and storage", "[runtime][storage]") {
  const std::pair<const char*, const char*> configs[] = {
      {"fblayout", "buffer"}, {"fblayout", "image"}, {"reuse", "image"}, {"explicit", "image"}};
  std::mt19937 rng(7);
  // 3100 bytes: chunks of 4 to 92 rows for llama-tiny, some tensors ending in a shorter one.
  for (const auto& [strategy, storage] : configs)
    for (const int64_t staging : {plan::kStagingBytes, int64_t{3100}}) {
    INFO(strategy << " / " << storage << ", staging bound " << staging);
    Compiled c = compileLlamaTiny(strategy, storage, staging);
    auto s = openPlan(c.plan, std::string("storage-") + strategy + "-" + storage);
    int packed = 0, images = 0, chunked = 0, partial = 0;  // partial: a last chunk of fewer rows
    int64_t fourRows = 0;  // a chunk's least: 4 rows of the widest packed tensor
    for (size_t t = 0; t < c.plan.tensors.size(); ++t) {
      const planfile::Tensor& pt = c.plan.tensors[t];
      images += pt.image();
      if (pt.pack < 0) continue;
      INFO(pt.name << " stored " << pt.layout << " in " << pt.storage << ", " << pt.transferRows << " rows a transfer");
      REQUIRE(pt.unpack >= 0);
      ++packed;
      chunked += pt.transferRows < planfile::transferRows(pt.shape);
      partial += planfile::transferRows(pt.shape) % pt.transferRows != 0;
      fourRows = std::max(fourRows, 4 * pt.shape.back() * planfile::elementSize(pt.dtype));
      // Arbitrary bit patterns that are finite floats: every bit must survive.
      std::vector<uint32_t> words(static_cast<size_t>(planfile::logicalBytes(pt) / 4));
      for (uint32_t& w : words) w = (rng() & 0x3fffffffu) | ((rng() & 1u) << 31);
      REQUIRE_OK(s->writeTensor(pt.name, words.data(), words.size() * 4));
      std::vector<unsigned char> back;
      REQUIRE_OK(s->readTensor(static_cast<int32_t>(t), &back));
      REQUIRE(back.size() == words.size() * 4);
      CHECK(std::memcmp(back.data(), words.data(), back.size()) == 0);
    }
    std::printf("%s/%s, staging of %lld bytes: %d host tensors packed (%d in chunks, %d ending in a shorter one), %d image tensors\n",
                strategy, storage, static_cast<long long>(c.plan.tensors[c.plan.staging].bytes), packed, chunked, partial, images);
    if (std::string(strategy) == "fblayout") CHECK(packed > 0);
    if (std::string(storage) == "image") CHECK(images > 0);
    if (packed > 0) CHECK(c.plan.tensors[c.plan.staging].bytes <= std::max(staging, fourRows));
    if (staging < 4096) CHECK((chunked > 0 && partial > 0));
  }
}

TEST_CASE("a checkpoint moves between plans of other strategies and storages", "[runtime][storage]") {
  Compiled from = compileLlamaTiny("fblayout", "image", 3100);
  Compiled to = compileLlamaTiny("reuse", "buffer");
  auto a = openPlan(from.plan, "checkpoint-from");
  REQUIRE_OK(a->loadWeights(from.weights));
  const std::string data = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/test_data_set_0";
  for (size_t i = 0; i < from.plan.inputs.size(); ++i) {
    auto t = onnx::readTensorProtoFile(data + "/input_" + std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    REQUIRE_OK(a->writeTensor(from.plan.tensors[from.plan.inputs[i]].name, t->tensor.raw(), t->tensor.nbytes()));
  }
  float loss = 0.0f;
  REQUIRE_OK(a->trainStep(&loss));
  const std::string ckpt = tempDir() + "/moved.ckpt";
  REQUIRE_OK(a->saveCheckpoint(ckpt));

  auto b = openPlan(to.plan, "checkpoint-to");
  REQUIRE_OK(b->loadWeights(to.weights));
  REQUIRE_OK(b->loadCheckpoint(ckpt));
  CHECK(b->step() == 1);
  safetensors::File f = fbl::testing::requireValue(safetensors::read(ckpt));
  int compared = 0;
  for (const planfile::Trainable& t : to.plan.trainables) {
    const planfile::Tensor& pt = to.plan.tensors[t.param];
    INFO(pt.name);
    REQUIRE(f.tensors.count(pt.name) == 1);
    std::vector<unsigned char> bytes;
    REQUIRE_OK(b->readTensor(t.param, &bytes));
    CHECK(bytes == f.tensors.at(pt.name).data);
    ++compared;
  }
  CHECK(compared == static_cast<int>(to.plan.trainables.size()));
  const std::string da = tempDir() + "/adapter-from", db = tempDir() + "/adapter-to";
  std::system(("mkdir -p " + da + " " + db).c_str());
  REQUIRE_OK(a->exportAdapter(da));
  REQUIRE_OK(b->exportAdapter(db));
  CHECK(fileBytes(da + "/adapter_model.safetensors") == fileBytes(db + "/adapter_model.safetensors"));
}

}  // namespace
}  // namespace fbl::testing
