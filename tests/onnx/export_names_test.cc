// Names from node metadata (compiler/onnx/export_names.h): an optimize=True export must come out
// of the importer with the initializers an optimize=False export of the same model has, in the
// same orientation; without the metadata the trainable glob says what was lost.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>

#include "compiler/autodiff/training_graph.h"
#include "compiler/onnx/export_names.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/load_model.h"
#include "tests/onnx/onnx_test_util.h"

namespace fbl {
namespace {

std::string corpusModel(const std::string& arch, const std::string& style) {
  return std::string(FBL_TEST_DATA_DIR) + "/corpus/" + arch + "/" + style + "/model.onnx";
}

ir::Graph importOk(const std::string& path) {
  auto g = onnx::importModel(path);
  INFO((g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  return std::move(g).value();
}

std::map<std::string, const ir::Value*> loraInitializers(const ir::Graph& g) {
  std::map<std::string, const ir::Value*> out;
  for (const auto& v : g.values)
    if (v.kind == ir::ValueKind::Initializer && v.name.find("lora_") != std::string::npos) out[v.name] = &v;
  return out;
}

TEST_CASE("export names: optimize=True exports get optimize=False's LoRA names and contents", "[onnx][export-names]") {
  // GPT-2's LoRA sits on Conv1D (addmm) layers, Phi-3's on fused projections, T5's on an
  // encoder-decoder: each folded lora_A/lora_B transpose must be undone.
  for (std::string arch : {"gpt2", "phi3", "t5", "swin"}) {
    DYNAMIC_SECTION(arch) {
      ir::Graph plain = importOk(corpusModel(arch, "noopt"));
      ir::Graph folded = importOk(corpusModel(arch, "opt"));
      auto want = loraInitializers(plain);
      auto got = loraInitializers(folded);
      REQUIRE(!want.empty());
      CHECK(got.size() == want.size());
      for (const auto& [name, v] : want) {
        INFO(name);
        REQUIRE(got.count(name) == 1);
        const ir::Value& w = *got.at(name);
        ir::ValueId byName = folded.findValue(name);  // the graph's name index knows it
        REQUIRE(byName != ir::kNoValue);
        CHECK(&folded.values[byName] == &w);
        REQUIRE(w.shape == v->shape);
        REQUIRE(w.data);
        REQUIRE(v->data);
        CHECK(std::memcmp(w.data->raw(), v->data->raw(), v->data->nbytes()) == 0);
      }
    }
  }
}

TEST_CASE("export names: a renamed weight without metadata is reported as lost", "[onnx][export-names]") {
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(testing::readFile(corpusModel("gpt2", "opt"))));
  for (auto& n : *m.mutable_graph()->mutable_node()) n.mutable_unknown_fields()->Clear();
  auto imported = onnx::importModelFromBytes(m.SerializeAsString(), "gpt2-opt-stripped.onnx");
  REQUIRE(imported.ok());
  auto g = passes::simplifyModel(std::move(imported).value());
  REQUIRE(g.ok());
  auto tg = autodiff::buildTrainingGraph(*g, {});
  REQUIRE_FALSE(tg.ok());
  // The optimizer's value metadata (folded_from) still names the parameter the exporter folded.
  CHECK_THAT(tg.error().message, Catch::Contains("gpt2-opt-stripped.onnx") && Catch::Contains("lora_A") &&
                                     Catch::Contains("is not in the graph") && Catch::Contains("optimize=False"));
}

TEST_CASE("export names: metadata is read from the unknown field 9", "[onnx][export-names]") {
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(testing::readFile(corpusModel("gpt2", "opt"))));
  int withFx = 0;
  for (const auto& n : m.graph().node()) {
    onnx::NodeOrigin o = onnx::readNodeOrigin(n);
    if (o.fxNode.empty()) continue;
    ++withFx;
    CHECK(o.fxNode.find("call_function") != std::string::npos);
    REQUIRE(!o.scopes.empty());
    CHECK(o.scopes.front().empty());  // the root module's path
  }
  CHECK(withFx > m.graph().node_size() / 2);
  CHECK(onnx::looksExporterRenamed("val_94"));
  CHECK_FALSE(onnx::looksExporterRenamed("val_"));
  CHECK_FALSE(onnx::looksExporterRenamed("val_9a"));
}

}  // namespace
}  // namespace fbl

namespace fbl {
namespace {

TEST_CASE("export names: a LoRA weight whose readers disagree is an import error, not a silent val_N", "[onnx][export-names]") {
  ::onnx::ModelProto m;
  REQUIRE(m.ParseFromString(testing::readFile(corpusModel("gpt2", "opt"))));
  // The first val_N a LoRA MatMul reads gets a second reader whose metadata names another adapter.
  std::string folded;
  for (const auto& n : m.graph().node()) {
    onnx::NodeOrigin o = onnx::readNodeOrigin(n);
    if (n.op_type() == "MatMul" && o.fxNode.find("lora_a") != std::string::npos &&
        onnx::looksExporterRenamed(n.input(1))) {
      folded = n.input(1);
      break;
    }
  }
  REQUIRE(!folded.empty());
  ::onnx::NodeProto* extra = m.mutable_graph()->add_node();
  extra->set_op_type("Identity");
  extra->set_name("second_reader");
  extra->add_input(folded);
  extra->add_output("second_reader_out");
  ::onnx::StringStringEntryProto fx;
  fx.set_key("pkg.torch.onnx.fx_node");
  fx.set_value("%linear_9 : [num_users=1] = call_function[target=torch.ops.aten.linear.default](args = (%x, "
               "%p_m_base_model_model_transformer_h_1_mlp_c_fc_lora_a_default_weight), kwargs = {})");
  extra->mutable_unknown_fields()->AddLengthDelimited(9, fx.SerializeAsString());
  auto g = onnx::importModelFromBytes(m.SerializeAsString(), "gpt2-opt-disagree.onnx");
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(g.error().message, Catch::Contains("gpt2-opt-disagree.onnx") && Catch::Contains("'" + folded + "'") &&
                                    Catch::Contains("lora_a") && Catch::Contains("optimize=False"));
  CHECK(g.error().message.find('\n') == std::string::npos);
}

}  // namespace
}  // namespace fbl
