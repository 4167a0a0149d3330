// The IR text form: what the printer writes for a known graph, parse(print(g)) == g on every
// corpus model, and one-line parse errors with line numbers.
#include "compiler/ir/printer.h"

#include <catch2/catch.hpp>

#include <cstring>

#include "compiler/ir/parser.h"
#include "compiler/onnx/importer.h"

namespace fbl::ir {
namespace {

const std::string kData = FBL_TEST_DATA_DIR;

const char* kSmall = R"(graph "small" opset 20
  input %x : f32[2,3]
  input %ids : i64[2]
  init %w : f32[3,4]
  init %"odd name:1" : f32[4] external("w.bin", offset=16, length=16)
  const %shape : i64[2] = [4,2]
  const %eps : f32[] = [1e-05]
  const %mask : bool[3] = [true,false,true]
  %y : f32[2,4] = MatMul(%x, %w) @mm
  %t : f32[4,2] = Reshape(%y, %shape) @r
  %p = Pad(%t, %ids, _) {mode="reflect"} @pad
  %a, _ = Split(%p) {axis=0, empty=f[], names=["a","b\"q"], scales=[0.5,2.0]} @split
  %c = Constant() {value=tensor f32[2] [1.0,-inf]} @c
  %m = Not(%mask) @not
  bwd %g : f32[4,2] = Mul(%t, %eps) @g
  opt %u = Sub(%w, %g) {alpha=1.0} @u
  output %u
  output %m
)";

TEST_CASE("parse then print reproduces the text", "[ir]") {
  auto g = parseGraph(kSmall, "small.ir");
  REQUIRE(g.ok());
  PrintOptions all;
  all.maxInlineElements = -1;
  CHECK(printGraph(*g, all) == kSmall);
}

TEST_CASE("the parser builds the graph the text describes", "[ir]") {
  auto g = parseGraph(kSmall, "small.ir");
  REQUIRE(g.ok());
  CHECK(g->name == "small");
  CHECK(g->opset == 20);
  REQUIRE(g->inputs.size() == 2);
  CHECK(g->values[g->inputs[1]].dtype == DType::I64);
  const Value& odd = g->values[g->findValue("odd name:1")];
  CHECK(odd.kind == ValueKind::Initializer);
  REQUIRE(odd.external);
  CHECK(odd.external->location == "w.bin");
  CHECK(odd.external->offset == 16);
  const Value& eps = g->values[g->findValue("eps")];
  REQUIRE(eps.data);
  CHECK(eps.data->rank() == 0);
  CHECK(eps.data->data<float>()[0] == 1e-05f);

  REQUIRE(g->nodes.size() == 8);
  const Node& split = g->nodes[3];
  CHECK(split.op == "Split");
  REQUIRE(split.outputs.size() == 2);
  CHECK(split.outputs[1] == kNoValue);
  CHECK(split.attrInt("axis", -1) == 0);
  CHECK(split.attrFloats("scales") == std::vector<float>{0.5f, 2.0f});
  CHECK(std::get<std::vector<std::string>>(split.attrs.at("names")) ==
        std::vector<std::string>{"a", "b\"q"});
  CHECK(split.attrFloats("empty", {9.0f}).empty());
  const Node& pad = g->nodes[2];
  CHECK(pad.inputs[2] == kNoValue);
  CHECK(pad.attrString("mode", "") == "reflect");
  CHECK_FALSE(g->values[pad.outputs[0]].shapeKnown);
  CHECK(g->nodes[6].phase == Phase::Backward);
  CHECK(g->nodes[7].phase == Phase::Optimizer);
  CHECK(g->nodes[7].attrFloat("alpha", 0) == 1.0f);
  const Tensor* c = g->nodes[4].attrTensor("value");
  REQUIRE(c);
  CHECK(std::isinf(c->data<float>()[1]));
  CHECK(g->values[g->nodes[0].outputs[0]].producer == 0);
}

TEST_CASE("hand-written graphs may leave out names and types", "[ir]") {
  auto g = parseGraph(R"(
    # a comment line
    graph "t" opset 17
      input %x : f32[4]
      %y = Relu(%x)       # trailing comment
      %z = Relu(%y)
      output %z
  )");
  REQUIRE(g.ok());
  CHECK(g->nodes[0].name == "Relu_0");
  CHECK(g->nodes[1].name == "Relu_1");
  CHECK(printNode(*g, g->nodes[1]) == "%z = Relu(%y) @Relu_1");
}

TEST_CASE("big constants print as a hash that the parser refuses", "[ir]") {
  Graph g;
  g.name = "h";
  g.opset = 20;
  std::vector<float> v(100);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  ValueId c = g.newConstant("big", Tensor::fromVector<float>({10, 10}, v));
  g.outputs.push_back(c);
  std::string text = printGraph(g);
  Tensor t = *g.values[c].data;
  CHECK(text.find("const %big : f32[10,10] = hash:" + tensorHash(t)) != std::string::npos);
  t.set(3, 99.0);
  CHECK(tensorHash(t) != tensorHash(*g.values[c].data));
  auto r = parseGraph(text, "h.ir");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.rfind("h.ir:2: this constant was printed as a hash", 0) == 0);
}

TEST_CASE("parse errors name the line", "[ir]") {
  auto err = [](std::string_view text) {
    auto r = parseGraph(text, "e.ir");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find('\n') == std::string::npos);
    return r.error().message;
  };
  CHECK(err("graph \"g\" opset 20\n  %y = Relu(%x)\n") == "e.ir:2: %x is used before it is defined");
  CHECK(err("graph \"g\" opset 20\n  input %x : q7[2]\n") ==
        "e.ir:2: expected a dtype (f32, i64, ...) but found 'q7'");
  CHECK(err("graph \"g\" opset 20\n  const %c : i64[3] = [1,2]\n") ==
        "e.ir:2: 2 values for shape [3], which holds 3");
  CHECK(err("graph \"g\" opset 20\n  input %x : f32[2]\n  input %x : f32[2]\n") ==
        "e.ir:3: %x is defined twice");
  CHECK(err("graph \"g\" opset 20\n  input %x : f32[2]\n  %y = Relu(%x) {a=[1,\"s\"]}\n")
            .rfind("e.ir:3:", 0) == 0);
  CHECK(err("input %x : f32[2]\n").rfind("e.ir:1: expected 'graph'", 0) == 0);
  CHECK(err("graph \"g\" opset 20\n  %y = Relu(%x\n").rfind("e.ir:2:", 0) == 0);
  CHECK(err("graph \"unterminated opset 20\n") == "e.ir:1: unterminated string");
  CHECK(err("") == "e.ir: empty graph text (expected 'graph \"name\" opset N')");
}

bool sameTensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST_CASE("every corpus model round-trips through text", "[ir]") {
  PrintOptions full;
  full.maxInlineElements = -1;
  full.initializerData = true;
  for (const char* model : {"llama-tiny", "bert-tiny", "vit-tiny", "bert-tiny-torchscript",
                            "llama-tiny-folded"}) {
    INFO(model);
    auto g = onnx::importModel(kData + "/" + model + "/model.onnx");
    REQUIRE(g.ok());
    std::string text = printGraph(*g, full);
    auto back = parseGraph(text, model);
    REQUIRE(back.ok());
    CHECK(printGraph(*back, full) == text);
    CHECK(back->nodes.size() == g->nodes.size());
    // Data survives exactly, including floats printed in their shortest form.
    for (const Value& v : g->values) {
      if (!v.data) continue;
      ValueId id = back->findValue(v.name);
      REQUIRE(id != kNoValue);
      REQUIRE(back->values[id].data);
      CHECK(sameTensor(*v.data, *back->values[id].data));
    }
    for (size_t n = 0; n < g->nodes.size(); ++n) {
      const Tensor* t = g->nodes[n].attrTensor("value");
      if (!t) continue;
      const Tensor* u = back->nodes[n].attrTensor("value");
      REQUIRE(u);
      CHECK(sameTensor(*t, *u));
    }
  }
}

TEST_CASE("the default print of llama-full is compact", "[ir]") {
  auto g = onnx::importModel(kData + "/llama-full/model.onnx");
  REQUIRE(g.ok());
  std::string text = printGraph(*g);
  CHECK(text.rfind("graph \"main_graph\" opset 20\n  input %input_0 : i64[1,512]\n", 0) == 0);
  CHECK(text.find("external(\"model.onnx.data\"") != std::string::npos);
  CHECK(text.size() < 2'000'000);
}

// Writes back what the parser found, so print(parse(text)) == text covers every place.
class Echo : public Annotator {
 public:
  explicit Echo(const ParsedAnnotations& a) : a_(a) {}
  std::string value(const Graph&, ValueId v) const override { return find(a_.values, v); }
  std::string input(const Graph&, NodeId n, int slot) const override { return find(a_.inputs, std::pair(n, slot)); }
  std::string node(const Graph&, NodeId n) const override { return find(a_.nodes, n); }

 private:
  template <typename M, typename K>
  static std::string find(const M& m, const K& k) {
    auto it = m.find(k);
    return it == m.end() ? std::string() : it->second.text;
  }
  const ParsedAnnotations& a_;
};

TEST_CASE("annotations are kept as text where they stand", "[ir]") {
  const char* text = R"(graph "a" opset 20
  input %x : f32[2,3] <rtile 2x4 strips>
  init %w : f32[3,4] external("w.bin", offset=0, length=48) <anchor "a > b">
  const %s : i64[2] = [4,2]
  const %k : i64[1] <folded> = [1]
  %y : f32[2,4] <one <nested> note>, _ = Split2(%x <read "<">, %k, %w) @mm <FTD-D>
  %z = Reshape(%y, %s <shape>) @r
  output %z
)";
  ParsedAnnotations found;
  auto g = parseGraph(text, "a.ir", &found);
  INFO((g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  CHECK(found.values.at(g->findValue("x")).text == "rtile 2x4 strips");
  CHECK(found.values.at(g->findValue("x")).line == 2);
  CHECK(found.values.at(g->findValue("w")).text == "anchor \"a > b\"");
  CHECK(found.values.at(g->findValue("k")).text == "folded");
  CHECK(found.values.at(g->findValue("y")).text == "one <nested> note");
  CHECK(found.inputs.at({0, 0}).text == "read \"<\"");
  CHECK(found.inputs.count({0, 1}) == 0);
  CHECK(found.inputs.count({0, 2}) == 0);
  CHECK(found.inputs.at({1, 1}).text == "shape");
  CHECK(found.nodes.at(0).text == "FTD-D");
  CHECK(found.nodes.count(1) == 0);
  Echo echo(found);
  PrintOptions opts;
  opts.annotator = &echo;
  CHECK(printGraph(*g, opts) == text);
  // Without an annotator the graph prints as it always did.
  CHECK(printGraph(*g).find('<') == std::string::npos);
}

TEST_CASE("annotations are refused where nobody reads them, and must close", "[ir]") {
  auto plain = parseGraph("graph \"a\" opset 20\n  input %x : f32[2] <linear>\n", "p.ir");
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.error().message == "p.ir:2: unexpected annotation '<linear>': this reader takes plain graph text");
  ParsedAnnotations found;
  auto open = parseGraph("graph \"a\" opset 20\n  input %x : f32[2] <rtile <2x4>\n", "o.ir", &found);
  REQUIRE_FALSE(open.ok());
  CHECK(open.error().message == "o.ir:2: unterminated annotation: '<' without its '>'");
  auto empty = parseGraph("graph \"a\" opset 20\n  input %x : f32[2] < >\n", "e.ir", &found);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message == "e.ir:2: empty annotation '<>'");
  auto misplaced = parseGraph("graph \"a\" opset 20\n  input %x : f32[2]\n  output %x <no>\n", "m.ir", &found);
  REQUIRE_FALSE(misplaced.ok());
  CHECK(misplaced.error().message == "m.ir:3: unexpected annotation '<no>' at the end of the line");
}

}  // namespace
}  // namespace fbl::ir
