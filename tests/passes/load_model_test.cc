// The whole load pipeline (import, fold-and-infer, decompose-ops, drop-noops, dead-code) on every corpus model.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include <onnx/onnx_pb.h>

#include "compiler/passes/fold_and_infer.h"
#include "compiler/passes/load_model.h"

namespace ir = fbl::ir;

namespace {

const char* const kModels[] = {"llama-tiny",        "bert-tiny", "bert-tiny-torchscript",
                               "vit-tiny",          "llama-tiny-folded", "llama-full"};

std::string modelPath(const std::string& m) {
  return std::string(FBL_TEST_DATA_DIR) + "/" + m + "/model.onnx";
}

std::map<std::string, int> histogram(const ir::Graph& g) {
  std::map<std::string, int> h;
  for (const auto& n : g.nodes)
    if (!n.dead) ++h[n.op];
  return h;
}

}  // namespace

TEST_CASE("every corpus model loads with static shapes and nothing left to fold", "[passes]") {
  for (std::string model : kModels) {
    SECTION(model) {
      auto g = fbl::passes::loadModel(modelPath(model));
      INFO((g.ok() ? std::string() : g.error().message));
      REQUIRE(g.ok());
      CHECK(fbl::passes::countValuesWithoutStaticShape(*g) == 0);
      for (const auto& n : g->nodes) {
        INFO(ir::describeNode(*g, n));
        REQUIRE_FALSE(n.dead);
        for (const char* op : {"Constant", "ConstantOfShape", "Shape", "Identity", "Range",
                               "CumSum"})
          CHECK(n.op != op);
        if (n.op == "Cast" || n.op == "CastLike")
          CHECK(g->values[n.inputs[0]].dtype != g->values[n.outputs[0]].dtype);
        // A node reading only constants should have been folded.
        bool allConst = !n.inputs.empty();
        for (ir::ValueId v : n.inputs)
          allConst = allConst && (v == ir::kNoValue || g->values[v].kind == ir::ValueKind::Constant);
        CHECK_FALSE(allConst);
      }
      CHECK(g->outputs.size() == 1);
      CHECK(g->values[g->outputs[0]].shape == ir::Shape{});
    }
  }
}

TEST_CASE("raw import keeps the file's nodes when simplify is off", "[passes]") {
  fbl::passes::LoadOptions opts;
  opts.simplify = false;
  auto g = fbl::passes::loadModel(modelPath("llama-tiny"), opts);
  REQUIRE(g.ok());
  CHECK(g->nodes.size() == 578);
}

TEST_CASE("the load passes run under the pass manager: verifier, --dump-after, --disable-pass", "[passes]") {
  for (std::string model : {"llama-tiny", "bert-tiny-torchscript"}) {
    fbl::passes::LoadOptions raw;
    raw.simplify = false;
    auto imported = fbl::passes::loadModel(modelPath(model), raw);
    REQUIRE(imported.ok());
    fbl::passes::PassOptions o;
    o.verify = true;  // the raw import is checked without shapes, every pass after fold-and-infer with them
    std::string dumped;
    o.sink = [&](std::string_view s) { dumped += s; };
    o.dumpAfter = {"dead-code"};
    auto g = fbl::passes::simplifyModel(*imported, o);
    INFO(model << ": " << (g.ok() ? std::string() : g.error().message));
    REQUIRE(g.ok());
    CHECK(dumped.rfind("// ---- IR after dead-code ----\n", 0) == 0);
    CHECK(dumped.find("Identity(") == std::string::npos);

    fbl::passes::PassOptions off;
    off.disabled = {"fold-and-infer"};
    auto refused = fbl::passes::simplifyModel(*imported, off);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message ==
          "--disable-pass fold-and-infer: the pipeline cannot run without it (every later pass needs static shapes "
          "and dtypes)");
  }
}

// Prints each model's op histogram after loading and the load time: `fbl_tests "[load-report]"`.
TEST_CASE("load report", "[.][load-report]") {
  for (std::string model : kModels) {
    auto start = std::chrono::steady_clock::now();
    auto g = fbl::passes::loadModel(modelPath(model));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(g.ok());
    std::printf("%s: %zu nodes, loaded in %.3f s:", model.c_str(), g->liveNodeCount(), secs);
    for (const auto& [op, count] : histogram(*g)) std::printf(" %s=%d", op.c_str(), count);
    std::printf("\n");
  }
}

// x [batch,4] -> Reshape(x, Concat(Shape(x)[0:1], [2,2])) -> ReduceSum -> loss, written as an
// ONNX file with a symbolic batch dimension.
static std::string writeSymbolicModel() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(20);
  auto* g = m.mutable_graph();
  g->set_name("symbolic");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  auto* tail = g->add_initializer();
  tail->set_name("tail");
  tail->set_data_type(::onnx::TensorProto::INT64);
  tail->add_dims(2);
  tail->add_int64_data(2);
  tail->add_int64_data(2);
  auto node = [&](const char* op, std::vector<std::string> ins, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(std::string("n_") + out);
    for (auto& i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  };
  auto* shape = node("Shape", {"x"}, "s");
  auto* end = shape->add_attribute();
  end->set_name("end");
  end->set_type(::onnx::AttributeProto::INT);
  end->set_i(1);
  auto* cat = node("Concat", {"s", "tail"}, "target");
  auto* axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(0);
  node("Reshape", {"x", "target"}, "y");
  auto* sum = node("ReduceSum", {"y"}, "loss");
  auto* keep = sum->add_attribute();
  keep->set_name("keepdims");
  keep->set_type(::onnx::AttributeProto::INT);
  keep->set_i(0);
  g->add_output()->set_name("loss");
  std::string path = std::string(FBL_BIN_DIR) + "/load_model_test_symbolic.onnx";
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

TEST_CASE("a symbolic input dimension needs --shape, the override drives folding", "[passes]") {
  std::string path = writeSymbolicModel();
  auto bare = fbl::passes::loadModel(path);
  REQUIRE_FALSE(bare.ok());
  CHECK_THAT(bare.error().message, Catch::Contains("input 'x'") && Catch::Contains("batch"));

  fbl::passes::LoadOptions opts;
  opts.shapeOverrides["x"] = {3, 4};
  auto g = fbl::passes::loadModel(path, opts);
  INFO((g.ok() ? std::string() : g.error().message));
  REQUIRE(g.ok());
  ir::ValueId y = g->findValue("y");
  CHECK(g->values[y].shape == ir::Shape{3, 2, 2});
  ir::ValueId target = g->findValue("target");
  REQUIRE(g->values[target].kind == ir::ValueKind::Constant);
  CHECK(g->values[target].data->toInt64s() == std::vector<int64_t>{3, 2, 2});
  CHECK(g->nodes.size() == 2);  // Reshape, ReduceSum
}
