// External data through the one loader (importModel -> loadAvailableExternalData):
// tests/data/llama-tiny-external is llama-tiny with every initializer's bytes moved to
// model.onnx.data, as torch.onnx.export writes by default. Loading, run-ref's trainer, compile
// and the weight writer give the same graph, loss, gradients, plan and weights for both files;
// without the data file, what needs the bytes names it. An optimize=True corpus export moved out
// the same way gets its LoRA names back from the data file.
//
// The fixture is regenerated from llama-tiny by this test; it fails when the committed files
// differ, and rewrites them with FBL_UPDATE_FIXTURES=1.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "compiler/autodiff/training_graph.h"
#include "compiler/driver/compile_command.h"
#include "compiler/ir/printer.h"
#include "compiler/onnx/external_data.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/load_model.h"
#include "compiler/train/ref_trainer.h"
#include "runtime/safetensors.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::onnx {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::TempDir;
using testing::writeFile;

const std::string kData = FBL_TEST_DATA_DIR;
const std::string kInline = kData + "/llama-tiny/model.onnx";
const std::string kFixture = kData + "/llama-tiny-external";

// Moves every initializer's bytes to `data` (16-byte aligned, in graph order) and points the
// initializer at `location`, as ONNX's external-data writers do.
void externalize(::onnx::ModelProto* m, const std::string& location, std::string* data) {
  for (::onnx::TensorProto& t : *m->mutable_graph()->mutable_initializer()) {
    std::string bytes;
    if (t.has_raw_data()) {
      bytes = t.raw_data();
    } else if (t.float_data_size() > 0) {
      bytes.assign(reinterpret_cast<const char*>(t.float_data().data()), t.float_data_size() * sizeof(float));
    } else if (t.int64_data_size() > 0) {
      bytes.assign(reinterpret_cast<const char*>(t.int64_data().data()), t.int64_data_size() * sizeof(int64_t));
    } else {
      REQUIRE(t.int32_data_size() == 0);  // no other kind occurs in llama-tiny
    }
    while (data->size() % 16 != 0) data->push_back('\0');
    const size_t offset = data->size();
    *data += bytes;
    t.clear_raw_data();
    t.clear_float_data();
    t.clear_int64_data();
    t.set_data_location(::onnx::TensorProto::EXTERNAL);
    t.clear_external_data();
    for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", location},
                               {"offset", std::to_string(offset)}, {"length", std::to_string(bytes.size())}}) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  }
}

TEST_CASE("external data: the fixture is llama-tiny with every initializer moved out", "[onnx][external]") {
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(readFile(kInline)));
  std::string data;
  externalize(&m, "model.onnx.data", &data);
  std::string model;
  REQUIRE(m.SerializeToString(&model));
  if (std::getenv("FBL_UPDATE_FIXTURES")) {
    fs::create_directories(kFixture);
    writeFile(kFixture + "/model.onnx", model);
    writeFile(kFixture + "/model.onnx.data", data);
  }
  CHECK(m.graph().initializer_size() > 0);
  CHECK((readFile(kFixture + "/model.onnx") == model));  // parenthesised: no 1 MB dump on failure
  CHECK((readFile(kFixture + "/model.onnx.data") == data));
}

TEST_CASE("external data: import reads every initializer of the data file", "[onnx][external]") {
  auto inl = importModel(kInline);
  auto ext = importModel(kFixture + "/model.onnx");
  REQUIRE(inl.ok());
  REQUIRE(ext.ok());
  size_t initializers = 0;
  for (const ir::Value& v : inl->values) {
    if (v.kind != ir::ValueKind::Initializer) continue;
    ++initializers;
    INFO(v.name);
    const ir::ValueId e = ext->findValue(v.name);
    REQUIRE(e != ir::kNoValue);
    const ir::Value& ev = ext->values[e];
    CHECK(ev.external.has_value());
    REQUIRE(ev.data);
    REQUIRE(ev.data->nbytes() == v.data->nbytes());
    CHECK(std::memcmp(ev.data->raw(), v.data->raw(), v.data->nbytes()) == 0);
  }
  CHECK(initializers > 50);
  // Without the loader the same import keeps only the records.
  ImportOptions records;
  records.loadExternalData = false;
  auto lazy = importModel(kFixture + "/model.onnx", records);
  REQUIRE(lazy.ok());
  for (const ir::Value& v : lazy->values)
    if (v.kind == ir::ValueKind::Initializer) CHECK(v.data == nullptr);
}

// The printed graph with the external records dropped, for comparing the two files.
std::string printed(ir::Graph g) {
  for (ir::Value& v : g.values) v.external.reset();
  g.name = g.sourcePath = "model";
  return ir::printGraph(g);
}

// Compiles `ca` (weights inside) and `cb` (weights outside) for PoCL and checks the plans are the
// same but for the model's name, which is the folder's, in the plan and in the program's first
// line.
std::pair<driver::Compiled, driver::Compiled> compileAlike(driver::CompileArgs& ca, driver::CompileArgs& cb) {
  for (driver::CompileArgs* c : {&ca, &cb}) c->profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  auto pa = driver::compileModel(ca);
  auto pb = driver::compileModel(cb);
  INFO((pa.ok() ? std::string() : pa.error().message) << (pb.ok() ? std::string() : pb.error().message));
  REQUIRE((pa.ok() && pb.ok()));
  const auto body = [](const std::string& program) { return program.substr(program.find('\n')); };
  CHECK((body(pa->plan.program) == body(pb->plan.program)));
  pb->plan.model = pa->plan.model;
  pb->plan.program = pa->plan.program;
  CHECK((planfile::serialize(pa->plan) == planfile::serialize(pb->plan)));
  return {std::move(*pa), std::move(*pb)};
}

TEST_CASE("external data: load, run-ref, compile and the weight writer agree on both files", "[onnx][external]") {
  auto inl = passes::loadModel(kInline);
  auto ext = passes::loadModel(kFixture + "/model.onnx");
  REQUIRE(inl.ok());
  REQUIRE(ext.ok());
  CHECK(printed(*inl) == printed(*ext));
  REQUIRE(requireInitializerData(*ext).ok());

  // run-ref's trainer: bit-identical loss and gradients over two steps.
  auto opts = train::trainingOptions(train::RunRefArgs{});
  REQUIRE(opts.ok());
  auto batchIn = train::loadInputs(*inl, kData + "/llama-tiny/test_data_set_0");
  auto batchEx = train::loadInputs(*ext, kData + "/llama-tiny/test_data_set_0");
  REQUIRE((batchIn.ok() && batchEx.ok()));
  auto tgIn = autodiff::buildTrainingGraph(*inl, *opts);
  auto tgEx = autodiff::buildTrainingGraph(*ext, *opts);
  REQUIRE((tgIn.ok() && tgEx.ok()));
  auto a = train::RefTrainer::create(std::move(tgIn.value()));
  auto b = train::RefTrainer::create(std::move(tgEx.value()));
  for (int step = 0; step < 2; ++step) {
    auto ra = a->step(*batchIn);
    auto rb = b->step(*batchEx);
    REQUIRE((ra.ok() && rb.ok()));
    CHECK(ra->loss == rb->loss);
    REQUIRE(ra->grads.size() == rb->grads.size());
    for (size_t g = 0; g < ra->grads.size(); ++g)
      CHECK(std::memcmp(ra->grads[g].raw(), rb->grads[g].raw(), ra->grads[g].nbytes()) == 0);
  }

  // compile: the same plan; the weight writer: the same tensors.
  TempDir tmp;
  driver::CompileArgs ca, cb;
  ca.model = kInline;
  cb.model = kFixture + "/model.onnx";
  ca.weights = tmp.file("inline.safetensors");
  cb.weights = tmp.file("external.safetensors");
  const auto [pa, pb] = compileAlike(ca, cb);
  REQUIRE(driver::writeWeights(ca, pa.plan).ok());
  REQUIRE(driver::writeWeights(cb, pb.plan).ok());
  safetensors::File wa, wb;
  wa = fbl::testing::requireValue(safetensors::read(ca.weights));
  wb = fbl::testing::requireValue(safetensors::read(cb.weights));
  REQUIRE(wa.tensors.size() == wb.tensors.size());
  REQUIRE_FALSE(wa.tensors.empty());
  for (const auto& [name, e] : wa.tensors) {
    INFO(name);
    REQUIRE(wb.tensors.count(name) == 1);
    CHECK(wb.tensors.at(name).shape == e.shape);
    CHECK(wb.tensors.at(name).data == e.data);
  }
}

// torch.onnx.export's default: optimize=True with the weights in model.onnx.data. The optimizer
// folds Transpose(lora_A) into val_N initializers, which name recovery must read from the data
// file to store transposed back under their PyTorch names: the same graph, trainables and plan
// as with the weights inside.
TEST_CASE("external data: an optimize=True export gets its LoRA names back from the data file", "[onnx][external]") {
  const std::string inlinePath = kData + "/corpus/qwen2_left/opt/model.onnx";
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(readFile(inlinePath)));
  std::string data, model;
  externalize(&m, "model.onnx.data", &data);
  REQUIRE(m.SerializeToString(&model));
  TempDir tmp;
  writeFile(tmp.file("model.onnx"), model);
  writeFile(tmp.file("model.onnx.data"), data);
  auto inl = passes::loadModel(inlinePath);
  auto ext = passes::loadModel(tmp.file("model.onnx"));
  INFO((ext.ok() ? std::string() : ext.error().message));
  REQUIRE((inl.ok() && ext.ok()));
  CHECK(printed(*inl) == printed(*ext));
  auto tgIn = autodiff::buildTrainingGraph(*inl, {});
  auto tgEx = autodiff::buildTrainingGraph(*ext, {});
  REQUIRE((tgIn.ok() && tgEx.ok()));
  REQUIRE(tgEx->trainables.size() == 28);  // 2 layers x 7 modules x lora_A, lora_B
  for (size_t i = 0; i < tgEx->trainables.size(); ++i) {
    const ir::Value& a = tgIn->graph.values[tgIn->trainables[i].param];
    const ir::Value& b = tgEx->graph.values[tgEx->trainables[i].param];
    INFO(b.name);
    CHECK(b.name.find(".lora_") != std::string::npos);
    CHECK(a.name == b.name);
    CHECK(a.shape == b.shape);
    REQUIRE((a.data && b.data));
    CHECK(std::memcmp(a.data->raw(), b.data->raw(), a.data->nbytes()) == 0);
  }
  driver::CompileArgs ca, cb;
  ca.model = inlinePath;
  cb.model = tmp.file("model.onnx");
  compileAlike(ca, cb);
}

TEST_CASE("external data: without the data file, what needs the bytes names it", "[onnx][external]") {
  TempDir tmp;
  fs::copy_file(kFixture + "/model.onnx", tmp.file("model.onnx"));
  auto g = passes::loadModel(tmp.file("model.onnx"));
  REQUIRE(g.ok());  // names and shapes need no bytes
  auto st = requireInitializerData(*g);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.error().message, Catch::Contains("external data file '" + tmp.file("model.onnx.data") + "' is missing"));
  train::RunRefArgs args;
  args.model = tmp.file("model.onnx");
  args.dataDir = kData + "/llama-tiny/test_data_set_0";
  CHECK(train::runRefCommand(args) == 1);
  driver::CompileArgs ca;
  ca.model = tmp.file("model.onnx");
  ca.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  ca.weights = tmp.file("w.safetensors");
  auto c = driver::compileModel(ca);
  REQUIRE(c.ok());  // the plan needs shapes only
  auto w = driver::writeWeights(ca, c->plan);
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(w.error().message, Catch::Contains("is missing"));
}

}  // namespace
}  // namespace fbl::onnx
