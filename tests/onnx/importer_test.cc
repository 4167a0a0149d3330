// ONNX import: every corpus model, and each kind of bad input giving one line that names the
// file, node and tensor at fault (never a crash).
#include "compiler/onnx/importer.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <random>
#include <unordered_set>

#include "compiler/onnx/external_data.h"
#include "tests/onnx/onnx_test_util.h"

namespace fbl::onnx {
namespace {

using fbl::testing::addF32Initializer;
using fbl::testing::addInput;
using fbl::testing::addNode;
using fbl::testing::bytesOf;
using fbl::testing::TempDir;
using fbl::testing::tinyModel;

const std::string kData = FBL_TEST_DATA_DIR;

// The error of a failed import, checked to be exactly one line.
std::string importError(const Result<ir::Graph>& r) {
  REQUIRE_FALSE(r.ok());
  const std::string& msg = r.error().message;
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_FALSE(msg.empty());
  return msg;
}

std::string importError(const ::onnx::ModelProto& m, const ImportOptions& opts = {}) {
  return importError(importModelFromBytes(bytesOf(m), "hand.onnx", opts));
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

size_t countKind(const ir::Graph& g, ir::ValueKind k) {
  size_t n = 0;
  for (const auto& v : g.values) n += v.kind == k ? 1 : 0;
  return n;
}

TEST_CASE("every corpus model imports with the node count of its meta.json", "[onnx]") {
  for (const char* model : {"llama-tiny", "bert-tiny", "vit-tiny", "bert-tiny-torchscript",
                            "llama-tiny-folded", "llama-full"}) {
    INFO(model);
    std::string dir = kData + "/" + model;
    auto meta = nlohmann::json::parse(fbl::testing::readFile(dir + "/meta.json"));
    ImportOptions asInFile;
    asInFile.recoverExportNames = false;  // llama-tiny-folded's val_N stay as the file has them
    auto g = importModel(dir + "/model.onnx", asInFile);
    REQUIRE(g.ok());
    CHECK(g->nodes.size() == meta["nodes"].get<size_t>());
    CHECK(g->opset == meta["opset"][0][1].get<int64_t>());
    REQUIRE(g->inputs.size() == meta["inputs"].size());
    for (size_t i = 0; i < g->inputs.size(); ++i)
      CHECK(g->values[g->inputs[i]].shape == meta["inputs"][i].get<ir::Shape>());
    REQUIRE(g->outputs.size() == 1);
    CHECK(g->values[g->outputs[0]].name == "loss");

    // Every initializer the exporter listed, with its shape.
    CHECK(countKind(*g, ir::ValueKind::Initializer) == meta["initializers"].size());
    for (const auto& init : meta["initializers"]) {
      ir::ValueId id = g->findValue(init[0].get<std::string>());
      REQUIRE(id != ir::kNoValue);
      CHECK(g->values[id].kind == ir::ValueKind::Initializer);
      CHECK(g->values[id].shape == init[1].get<ir::Shape>());
    }

    // Topological order and producers as the IR promises.
    std::vector<bool> defined(g->values.size(), false);
    for (const auto& v : g->values)
      if (v.kind != ir::ValueKind::Intermediate) defined[&v - g->values.data()] = true;
    for (size_t n = 0; n < g->nodes.size(); ++n) {
      for (ir::ValueId in : g->nodes[n].inputs) CHECK((in == ir::kNoValue || defined[in]));
      for (ir::ValueId out : g->nodes[n].outputs) {
        if (out == ir::kNoValue) continue;
        CHECK(g->values[out].producer == static_cast<ir::NodeId>(n));
        defined[out] = true;
      }
    }
  }
}

TEST_CASE("initializer bytes are the file's bytes", "[onnx]") {
  std::string path = kData + "/llama-tiny/model.onnx";
  auto g = importModel(path);
  REQUIRE(g.ok());
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(fbl::testing::readFile(path)));
  for (const auto& init : m.graph().initializer()) {
    INFO(init.name());
    const auto& v = g->values[g->findValue(init.name())];
    REQUIRE(v.data);
    CHECK_FALSE(v.external.has_value());
    CHECK(v.data->dtype() == ir::DType::F32);
    REQUIRE(v.data->nbytes() == init.raw_data().size());
    CHECK(std::memcmp(v.data->raw(), init.raw_data().data(), v.data->nbytes()) == 0);
  }
}

TEST_CASE("llama-full imports fast with its external data absent", "[onnx]") {
  std::string path = kData + "/llama-full/model.onnx";
  auto start = std::chrono::steady_clock::now();
  auto g = importModel(path);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(g.ok());
  // Reported, not asserted: a bound on wall time fails on a loaded machine (~0.05 s in release
  // builds; docs/results/compile-time.md keeps compile times).
  WARN("llama-full import: " << seconds * 1000 << " ms");
  CHECK(g->nodes.size() == 3420);

  size_t external = 0;
  ir::ValueId firstExternal = ir::kNoValue;
  for (ir::ValueId id = 0; id < static_cast<ir::ValueId>(g->values.size()); ++id) {
    const auto& v = g->values[id];
    if (!v.external) continue;
    ++external;
    if (firstExternal == ir::kNoValue) firstExternal = id;
    CHECK(v.data == nullptr);
    CHECK(v.external->location == "model.onnx.data");
    CHECK(v.external->length ==
          ir::numElements(v.shape) * static_cast<int64_t>(ir::dtypeSize(v.dtype)));
  }
  CHECK(external == 370);
  auto t = loadExternalTensor(*g, firstExternal);
  REQUIRE_FALSE(t.ok());
  CHECK(contains(t.error().message, "is missing"));
  CHECK(contains(t.error().message, g->values[firstExternal].name));
  CHECK(loadAvailableExternalData(*g).ok());  // absent files are left alone
}

TEST_CASE("unreadable files give one line naming the file", "[onnx]") {
  TempDir tmp;
  SECTION("missing") {
    auto msg = importError(importModel(tmp.file("nope.onnx")));
    CHECK(contains(msg, "nope.onnx: no such file"));
  }
  SECTION("empty") {
    fbl::testing::writeFile(tmp.file("empty.onnx"), "");
    CHECK(contains(importError(importModel(tmp.file("empty.onnx"))), "empty file (0 bytes)"));
  }
  SECTION("a folder") {
    CHECK(contains(importError(importModel(tmp.path().string())), "is a folder"));
  }
  SECTION("truncated") {
    std::string bytes = fbl::testing::readFile(kData + "/llama-tiny/model.onnx");
    fbl::testing::writeFile(tmp.file("half.onnx"), bytes.substr(0, bytes.size() / 2));
    auto msg = importError(importModel(tmp.file("half.onnx")));
    CHECK(contains(msg, "half.onnx: not a valid ONNX model (protobuf parse failed)"));
  }
  SECTION("random bytes") {
    std::mt19937 rng(7);
    for (size_t size : {1, 3, 17, 100, 4096, 100000}) {
      std::string bytes(size, '\0');
      for (char& c : bytes) c = static_cast<char>(rng());
      importError(importModelFromBytes(bytes, "random.onnx"));
    }
  }
  SECTION("no graph") {
    ::onnx::ModelProto m;
    m.add_opset_import()->set_version(20);
    CHECK(contains(importError(m), "has no graph"));
  }
}

TEST_CASE("a hand-made model imports as written", "[onnx]") {
  auto g = importModelFromBytes(bytesOf(tinyModel()), "hand.onnx");
  REQUIRE(g.ok());
  CHECK(g->name == "tiny");
  CHECK(g->sourcePath == "hand.onnx");
  REQUIRE(g->nodes.size() == 2);
  CHECK(g->nodes[0].op == "MatMul");
  CHECK(g->nodes[0].name == "mm");
  const auto& w = g->values[g->findValue("w")];
  REQUIRE(w.data);
  for (int64_t i = 0; i < 12; ++i) CHECK(w.data->at(i) == static_cast<double>(i) * 0.5);
  CHECK(g->values[g->inputs[0]].shape == ir::Shape{2, 3});
}

TEST_CASE("nodes out of order are sorted, a cycle is an error naming a node on it", "[onnx]") {
  SECTION("reversed order") {
    auto m = tinyModel();
    m.mutable_graph()->mutable_node()->SwapElements(0, 1);
    auto g = importModelFromBytes(bytesOf(m), "hand.onnx");
    REQUIRE(g.ok());
    CHECK(g->nodes[0].name == "mm");
    CHECK(g->nodes[1].name == "relu");
  }
  SECTION("cycle") {
    auto m = tinyModel();
    auto* g = m.mutable_graph();
    g->mutable_node(0)->set_input(0, "z");  // mm reads relu's output, relu reads mm's
    auto msg = importError(m);
    CHECK(contains(msg, "hand.onnx: the graph has a cycle through node"));
    CHECK((contains(msg, "'mm'") && contains(msg, "'relu'")));
  }
  SECTION("self loop") {
    auto m = tinyModel();
    m.mutable_graph()->mutable_node(1)->set_input(0, "z");
    CHECK(contains(importError(m), "cycle through node 'relu' (Relu)"));
  }
}

TEST_CASE("structural errors name the node and the value", "[onnx]") {
  auto m = tinyModel();
  auto* g = m.mutable_graph();
  SECTION("undefined input") {
    g->mutable_node(1)->set_input(0, "ghost");
    CHECK(importError(m) ==
          "hand.onnx: node 'relu' (Relu) reads 'ghost', which no graph input, initializer or "
          "node output defines");
  }
  SECTION("a name with control characters is quoted escaped, the error one line") {
    // The importer fuzzer's finding: a corrupted name carried a newline into the error.
    g->mutable_node(1)->set_input(0, std::string("gh\nost\t\x01", 8));
    CHECK(importError(m) ==
          "hand.onnx: node 'relu' (Relu) reads 'gh\\nost\\t\\x01', which no graph input, initializer or "
          "node output defines");
  }
  SECTION("duplicate producer") {
    g->mutable_node(1)->set_output(0, "y");
    CHECK(contains(importError(m), "value 'y' is produced twice, by node 'mm' and node 'relu'"));
  }
  SECTION("output overwrites an initializer") {
    g->mutable_node(1)->set_output(0, "w");
    CHECK(contains(importError(m), "node 'relu' (Relu): writes 'w'"));
  }
  SECTION("unknown graph output") {
    g->mutable_output(0)->set_name("nowhere");
    CHECK(contains(importError(m), "graph output 'nowhere'"));
  }
  SECTION("empty node names are generated") {
    g->mutable_node(0)->clear_name();
    g->mutable_node(1)->clear_name();
    auto r = importModelFromBytes(bytesOf(m), "hand.onnx");
    REQUIRE(r.ok());
    CHECK(r->nodes[0].name == "MatMul_0");
    CHECK(r->nodes[1].name == "Relu_1");
  }
  SECTION("duplicate node names are made unique") {
    g->mutable_node(1)->set_name("mm");
    auto r = importModelFromBytes(bytesOf(m), "hand.onnx");
    REQUIRE(r.ok());
    CHECK(r->nodes[0].name != r->nodes[1].name);
  }
  SECTION("an empty input name is an omitted optional input") {
    auto* pad = addNode(g, "Pad", "pad", {"z", "pads", ""}, {"p"});
    pad->add_attribute()->set_name("mode");
    pad->mutable_attribute(0)->set_type(::onnx::AttributeProto::STRING);
    pad->mutable_attribute(0)->set_s("constant");
    auto* pads = g->add_initializer();
    pads->set_name("pads");
    pads->set_data_type(::onnx::TensorProto::INT64);
    pads->add_dims(4);
    for (int64_t v : {0, 1, 0, 1}) pads->add_int64_data(v);
    auto r = importModelFromBytes(bytesOf(m), "hand.onnx");
    REQUIRE(r.ok());
    const auto& n = r->nodes.back();
    REQUIRE(n.inputs.size() == 3);
    CHECK(n.inputs[2] == ir::kNoValue);
    CHECK(n.attrString("mode", "") == "constant");
    const auto& p = r->values[r->findValue("pads")];
    REQUIRE(p.data);
    CHECK(p.data->toInt64s() == std::vector<int64_t>{0, 1, 0, 1});
  }
}

TEST_CASE("many nodes with one name import in linear time", "[onnx]") {
  auto m = tinyModel();
  auto* g = m.mutable_graph();
  const int count = 50000;
  std::string prev = "z";
  for (int i = 0; i < count; ++i) {
    std::string out = "r" + std::to_string(i);
    addNode(g, "Relu", "same", {prev}, {out});
    prev = out;
  }
  g->mutable_output(0)->set_name(prev);
  auto start = std::chrono::steady_clock::now();
  auto r = importModelFromBytes(bytesOf(m), "hand.onnx");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(r.ok());
  // Quadratic renaming took minutes here (ctest's timeout catches that); the time is reported,
  // not asserted, since a bound on wall time fails on a loaded machine.
  WARN("50000 nodes named alike: import " << seconds * 1000 << " ms");
  std::unordered_set<std::string> names;
  for (const auto& n : r->nodes) names.insert(n.name);
  CHECK(names.size() == r->nodes.size());
  CHECK(r->nodes[2].name == "same");
  CHECK(r->nodes[3].name == "same_1");
}

TEST_CASE("unsupported ops, domains, attributes and opsets say what to do", "[onnx]") {
  auto m = tinyModel();
  auto* g = m.mutable_graph();
  SECTION("unsupported op") {
    g->mutable_node(1)->set_op_type("LSTM");
    auto msg = importError(m);
    CHECK(contains(msg, "hand.onnx: node 'relu' (LSTM)"));
    CHECK(contains(msg, "LSTM is not supported at opset 20"));
    CHECK(contains(msg, "docs/ops.md"));
  }
  SECTION("unknown attribute") {
    auto* a = g->mutable_node(1)->add_attribute();
    a->set_name("bogus");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(1);
    auto msg = importError(m);
    CHECK(contains(msg, "node 'relu' (Relu)"));
    CHECK(contains(msg, "'bogus'"));
  }
  SECTION("graph attribute") {
    auto* a = g->mutable_node(1)->add_attribute();
    a->set_name("body");
    a->set_type(::onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name("sub");
    CHECK(contains(importError(m), "node 'relu' (Relu): attribute 'body' has type GRAPH"));
  }
  SECTION("other domain") {
    g->mutable_node(1)->set_domain("com.microsoft");
    auto msg = importError(m);
    CHECK(contains(msg, "node 'relu' (Relu)"));
    CHECK(contains(msg, "domain 'com.microsoft'"));
  }
  SECTION("opset too new or too old") {
    m.mutable_opset_import(0)->set_version(21);
    CHECK(contains(importError(m), "opset 21 is not supported; fbl supports opsets 13 to 20"));
    m.mutable_opset_import(0)->set_version(11);
    CHECK(contains(importError(m), "opset 11 is not supported"));
  }
  SECTION("ai.onnx spelled out") {
    m.mutable_opset_import(0)->set_domain("ai.onnx");
    m.mutable_graph()->mutable_node(1)->set_domain("ai.onnx");
    CHECK(importModelFromBytes(bytesOf(m), "hand.onnx").ok());
  }
}

TEST_CASE("initializer data is checked against dtype and shape", "[onnx]") {
  auto m = tinyModel();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  SECTION("f16") {
    w->set_data_type(::onnx::TensorProto::FLOAT16);
    CHECK(importError(m) ==
          "hand.onnx: unsupported dtype f16 for tensor 'w' (fbl supports f32, i64, i32, bool, "
          "u8, i8; export the model in f32)");
  }
  SECTION("raw_data of the wrong size") {
    w->mutable_raw_data()->resize(20);
    CHECK(contains(importError(m), "tensor 'w' has 20 bytes of raw_data but its shape [3,4]"));
  }
  SECTION("negative dim") {
    w->set_dims(0, -3);
    CHECK(contains(importError(m), "tensor 'w' has a negative dimension -3"));
  }
  SECTION("element count overflows") {
    w->set_dims(0, int64_t{1} << 40);
    w->set_dims(1, int64_t{1} << 40);
    CHECK(contains(importError(m), "tensor 'w' has too many elements"));
  }
  SECTION("no data at all") {
    w->clear_raw_data();
    CHECK(contains(importError(m), "tensor 'w' of shape [3,4] has no data"));
  }
  SECTION("typed fields") {
    w->clear_raw_data();
    for (int i = 0; i < 12; ++i) w->add_float_data(static_cast<float>(i));
    auto g = importModelFromBytes(bytesOf(m), "hand.onnx");
    REQUIRE(g.ok());
    const auto& t = *g->values[g->findValue("w")].data;
    for (int64_t i = 0; i < 12; ++i) CHECK(t.at(i) == static_cast<double>(i));
  }
  SECTION("too few typed values") {
    w->clear_raw_data();
    w->add_float_data(1.0f);
    CHECK(contains(importError(m), "tensor 'w' has 1 values in float_data"));
  }
}

TEST_CASE("external data paths may not leave the model's folder", "[onnx]") {
  TempDir tmp;
  auto m = tinyModel();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  std::string raw = w->raw_data();
  w->clear_raw_data();
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto setLocation = [&](const std::string& loc) {
    w->clear_external_data();
    auto* kv = w->add_external_data();
    kv->set_key("location");
    kv->set_value(loc);
  };
  std::string model = tmp.file("model.onnx");
  auto importHere = [&] { return importModelFromBytes(bytesOf(m), model); };

  SECTION("parent folder") {
    setLocation("../../etc/passwd");
    auto msg = importError(importHere());
    CHECK(contains(msg, "tensor 'w': external data path '../../etc/passwd' leaves the model's"));
  }
  SECTION("absolute") {
    setLocation("/etc/passwd");
    CHECK(contains(importError(importHere()), "tensor 'w': external data path '/etc/passwd' is "
                                              "absolute"));
  }
  SECTION("dot-dot that stays inside is fine") {
    setLocation("sub/../w.bin");
    CHECK(importHere().ok());
  }
  SECTION("symlink out of the folder") {
    std::filesystem::create_directory_symlink("/etc", tmp.path() / "etc_link");
    setLocation("etc_link/passwd");
    auto msg = importError(importHere());
    CHECK(contains(msg, "tensor 'w': external data path 'etc_link/passwd' resolves to"));
    CHECK(contains(msg, "outside the model's folder"));
  }
  SECTION("a present file loads lazily, with offset and length checked") {
    fbl::testing::writeFile(tmp.file("w.bin"), std::string(8, 'x') + raw);
    setLocation("w.bin");
    auto* off = w->add_external_data();
    off->set_key("offset");
    off->set_value("8");
    auto g = importHere();
    REQUIRE(g.ok());
    ir::ValueId id = g->findValue("w");
    CHECK(g->values[id].data == nullptr);
    REQUIRE(g->values[id].external.has_value());
    CHECK(g->values[id].external->offset == 8);
    auto t = loadExternalTensor(*g, id);
    REQUIRE(t.ok());
    for (int64_t i = 0; i < 12; ++i) CHECK(t->at(i) == static_cast<double>(i) * 0.5);

    REQUIRE(loadAvailableExternalData(*g).ok());
    REQUIRE(g->values[id].data);
    CHECK(g->values[id].data->at(11) == 5.5);

    g->values[id].external->offset = 100;
    auto bad = loadExternalTensor(*g, id);
    REQUIRE_FALSE(bad.ok());
    CHECK(contains(bad.error().message, "tensor 'w': offset 100"));
  }
  SECTION("a length that does not match the shape") {
    setLocation("w.bin");
    auto* len = w->add_external_data();
    len->set_key("length");
    len->set_value("7");
    CHECK(contains(importError(importHere()), "tensor 'w': external data length 7"));
  }
  SECTION("an offset that is not a number") {
    setLocation("w.bin");
    auto* off = w->add_external_data();
    off->set_key("offset");
    off->set_value("12abc");
    CHECK(contains(importError(importHere()), "external data offset '12abc' is not a byte count"));
  }
}

TEST_CASE("symbolic input dimensions need --shape", "[onnx]") {
  ::onnx::ModelProto m = tinyModel();
  auto* in = m.mutable_graph()->mutable_input(0);
  in->set_name("input_0");
  m.mutable_graph()->mutable_node(0)->set_input(0, "input_0");
  auto* dim = in->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
  dim->set_dim_param("batch");
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(512);
  SECTION("no override") {
    CHECK(importError(m) ==
          "hand.onnx: input 'input_0' has symbolic dimension 'batch'; pass --shape "
          "input_0=1x512");
  }
  SECTION("override applies") {
    ImportOptions opts;
    opts.shapeOverrides["input_0"] = {3, 512};
    auto g = importModelFromBytes(bytesOf(m), "hand.onnx", opts);
    REQUIRE(g.ok());
    CHECK(g->values[g->inputs[0]].shape == ir::Shape{3, 512});
    CHECK(g->values[g->inputs[0]].shapeKnown);
  }
  SECTION("override of the wrong rank") {
    ImportOptions opts;
    opts.shapeOverrides["input_0"] = {3};
    CHECK(contains(importError(m, opts), "--shape input_0=3 has rank 1 but input 'input_0'"));
  }
  SECTION("override of a name that is not an input") {
    ImportOptions opts;
    opts.shapeOverrides["input_0"] = {1, 512};
    opts.shapeOverrides["w"] = {3, 4};
    CHECK(importError(m, opts) ==
          "hand.onnx: --shape names 'w', which is not a graph input (inputs: input_0)");
  }
  SECTION("unknown rank") {
    in->mutable_type()->mutable_tensor_type()->clear_shape();
    CHECK(contains(importError(m), "input 'input_0' has no shape; pass --shape input_0="));
  }
}

TEST_CASE("corpus overrides: --shape on a static input replaces it", "[onnx]") {
  ImportOptions opts;
  opts.shapeOverrides["input_0"] = {1, 8};
  auto g = importModel(kData + "/llama-tiny/model.onnx", opts);
  REQUIRE(g.ok());
  CHECK(g->values[g->inputs[0]].shape == ir::Shape{1, 8});
}

}  // namespace
}  // namespace fbl::onnx
