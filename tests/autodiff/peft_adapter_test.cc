// peft's adapter config and keys read off small graphs: what the corpus does not hold (a square r,
// modules of different ranks, a LoRA target that is a Sequential's numbered child). The corpus
// test (tests/train/corpus_test.cc) compares real exports with what peft saved.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "compiler/ir/parser.h"
#include "compiler/autodiff/peft_adapter.h"

namespace fbl::autodiff {
namespace {

const std::string kRoot = "m.base_model.model.";

struct Module {
  std::string path;
  int64_t r = 8;
  double scaling = 2.0;
};

// x [2,16] through each module in turn: base(x) + (x A^T B^T) * scaling, as peft's LoRA Linear
// exports; `frozen`: modules that only have a weight.
std::string graphText(const std::vector<Module>& lora, const std::vector<std::string>& frozen) {
  std::string s = "graph \"peft\" opset 20\n  input %x0 : f32[2,16]\n";
  for (const std::string& f : frozen) s += fmt::format("  init %\"{}{}.weight\" : f32[16,16]\n", kRoot, f);
  for (size_t i = 0; i < lora.size(); ++i) {
    const Module& m = lora[i];
    const std::string p = kRoot + m.path;
    s += fmt::format("  init %\"{0}.base_layer.weight\" : f32[16,16]\n"
                     "  init %\"{0}.lora_A.default.weight\" : f32[{1},16]\n"
                     "  init %\"{0}.lora_B.default.weight\" : f32[16,{1}]\n"
                     "  const %s{2} : f32[] = [{3}]\n"
                     "  %wt{2} = Transpose(%\"{0}.base_layer.weight\") {{perm=[1,0]}}\n"
                     "  %at{2} = Transpose(%\"{0}.lora_A.default.weight\") {{perm=[1,0]}}\n"
                     "  %bt{2} = Transpose(%\"{0}.lora_B.default.weight\") {{perm=[1,0]}}\n"
                     "  %base{2} = MatMul(%x{2}, %wt{2})\n"
                     "  %h{2} = MatMul(%x{2}, %at{2})\n"
                     "  %l{2} = MatMul(%h{2}, %bt{2})\n"
                     "  %ls{2} = Mul(%l{2}, %s{2})\n"
                     "  %x{4} = Add(%base{2}, %ls{2})\n",
                     p, m.r, i, fmt::format("{:.9g}", m.scaling), i + 1);
  }
  s += fmt::format("  output %x{}\n", lora.size());
  return s;
}

PeftAdapter adapterOf(const std::vector<Module>& lora, const std::vector<std::string>& frozen = {},
                      PeftAdapterOptions o = {}) {
  auto g = ir::parseGraph(graphText(lora, frozen));
  INFO((g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  std::vector<std::string> names;
  for (const Module& m : lora)
    for (const char* ab : {"lora_A", "lora_B"}) names.push_back(fmt::format("{}{}.{}.default.weight", kRoot, m.path, ab));
  auto a = peftAdapter(*g, names, o);
  INFO((a.ok() ? "" : a.error().message));
  REQUIRE(a.ok());
  return *a;
}

std::set<std::string> targets(const PeftAdapter& a) {
  return a.config.at("target_modules").get<std::set<std::string>>();
}

TEST_CASE("peft keys drop the adapter name as peft's save_pretrained does", "[plan][peft]") {
  CHECK(peftAdapterKey("m.base_model.model.l.0.q.lora_A.default.weight") == "base_model.model.l.0.q.lora_A.weight");
  CHECK(peftAdapterKey("m.base_model.model.embed_tokens.lora_embedding_B.default") ==
        "base_model.model.embed_tokens.lora_embedding_B");
  CHECK(peftAdapterKey("base_model.model.l.0.q.lora_magnitude_vector.default.weight") ==
        "base_model.model.l.0.q.lora_magnitude_vector");
  CHECK(peftAdapterKey("m.base_model.model.classifier.modules_to_save.default.bias") ==
        "base_model.model.classifier.bias");
  CHECK(peftAdapterKey("m.base_model.model.embed_tokens.base_layer.weight") ==
        "base_model.model.embed_tokens.base_layer.weight");
}

TEST_CASE("a Sequential's numbered child is named with its parent, not by its index", "[plan][peft]") {
  // "1" alone would select the containers stages.1 and layers.1 too: peft refuses those.
  const auto a = adapterOf({{"net.stages.0.down.1"}, {"net.stages.1.down.1"}},
                           {"net.stages.0.down.0", "net.stages.1.down.0", "net.stages.1.layers.1.conv"});
  CHECK(targets(a) == std::set<std::string>{"down.1"});
}

TEST_CASE("a leaf name shared with a module left alone is made longer", "[plan][peft]") {
  const auto a = adapterOf({{"enc.layer.0.attention.output.dense"}, {"enc.layer.0.output.dense"},
                            {"enc.layer.0.attention.self.query"}},
                           {"head.dense"});
  CHECK(targets(a) == std::set<std::string>{"attention.output.dense", "output.dense", "query"});
}

TEST_CASE("r and alpha come from lora_A and the scaling, other ranks go to rank_pattern", "[plan][peft]") {
  const auto a = adapterOf({{"l.0.q", 8, 2.0}, {"l.0.k", 8, 2.0}, {"l.0.v", 2, 2.0}});
  CHECK(a.config.at("r") == 8);
  CHECK(a.config.at("lora_alpha") == 16);
  CHECK(a.config.at("use_rslora") == false);
  CHECK(a.config.at("rank_pattern") == nlohmann::json{{"l.0.v", 2}});
  CHECK(a.config.at("alpha_pattern") == nlohmann::json{{"l.0.v", 4}});
  CHECK_FALSE(a.config.contains("fbl_lora_alpha"));
}

TEST_CASE("a square r leaves rsLoRA open: assumed off and noted, or settled by --lora-alpha", "[plan][peft]") {
  const std::vector<Module> m = {{"l.0.q", 4, 2.0}};  // alpha 8 (alpha/r) or alpha 4 (alpha/sqrt(r))
  const auto assumed = adapterOf(m);
  CHECK(assumed.config.at("lora_alpha") == 8);
  CHECK(assumed.config.at("use_rslora") == false);
  CHECK_THAT(assumed.config.at("fbl_lora_alpha").get<std::string>(), Catch::Contains("assumed"));
  PeftAdapterOptions o;
  o.loraAlpha = 4;
  const auto rs = adapterOf(m, {}, o);
  CHECK(rs.config.at("lora_alpha") == 4);
  CHECK(rs.config.at("use_rslora") == true);
  CHECK_THAT(rs.config.at("fbl_lora_alpha").get<std::string>(), Catch::Contains("--lora-alpha 4"));
  // r = 8: 2 * sqrt(8) is no whole number, so the graph settles it without the flag.
  const auto settled = adapterOf({{"l.0.q", 8, 16.0 / std::sqrt(8.0)}});
  CHECK(settled.config.at("use_rslora") == true);
  CHECK(settled.config.at("lora_alpha") == 16);
}

TEST_CASE("LoRA on a module's parameters (target_parameters) is not written, and says why", "[plan][peft]") {
  // peft wraps an MoE's experts per parameter: the base layer holds `gate_up_proj`, not a weight.
  std::string text = graphText({{"model.layers.0.mlp.experts"}}, {});
  const std::string from = "experts.base_layer.weight", to = "experts.base_layer.gate_up_proj";
  for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
  auto g = ir::parseGraph(text);
  INFO((g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  auto a = peftAdapter(*g, {kRoot + "model.layers.0.mlp.experts.lora_A.default.weight",
                            kRoot + "model.layers.0.mlp.experts.lora_B.default.weight"});
  REQUIRE(a.ok());
  CHECK(a->config.empty());
  CHECK_THAT(a->refusal, Catch::Contains("model.layers.0.mlp.experts") && Catch::Contains("target_parameters"));
}

}  // namespace
}  // namespace fbl::autodiff
