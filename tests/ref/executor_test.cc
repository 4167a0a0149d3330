#include <memory>

#include "compiler/ref/executor.h"
#include "tests/ref/ref_test_util.h"

using namespace fbl;
using namespace fbl::reftest;
using ir::ValueId;

namespace {

ValueId addInput(ir::Graph& g, const std::string& name, DType dt, Shape s, ir::ValueKind kind) {
  ir::Value v;
  v.name = name;
  v.dtype = dt;
  v.shape = std::move(s);
  v.shapeKnown = true;
  v.kind = kind;
  return g.addValue(std::move(v));
}

ValueId addNode(ir::Graph& g, const std::string& op, std::vector<ValueId> ins, Attrs attrs = {}) {
  ir::Node n;
  n.op = op;
  n.name = op + "_" + std::to_string(g.nodes.size());
  n.inputs = std::move(ins);
  n.attrs = std::move(attrs);
  ValueId out = g.newValue(n.name + "_out");
  n.outputs.push_back(out);
  g.addNode(std::move(n));
  return out;
}

// y = relu(x @ w + b), loss = ReduceSum(y).
struct SmallGraph {
  ir::Graph g;
  ValueId x, w, b, mm, y, loss;
  Tensor wData, bData;

  explicit SmallGraph(std::mt19937& rng) {
    g.name = "small";
    x = addInput(g, "x", DType::F32, {4, 3}, ir::ValueKind::Input);
    w = addInput(g, "w", DType::F32, {3, 5}, ir::ValueKind::Initializer);
    wData = randomF32({3, 5}, rng);
    g.values[w].data = std::make_shared<const Tensor>(wData);
    bData = randomF32({5}, rng);
    b = g.newConstant("b", bData);
    g.inputs.push_back(x);
    mm = addNode(g, "MatMul", {x, w});
    ValueId sum = addNode(g, "Add", {mm, b});
    y = addNode(g, "Relu", {sum});
    loss = addNode(g, "ReduceSum", {y}, {{"keepdims", int64_t{0}}});
    g.outputs.push_back(loss);
  }
};

double naiveLoss(const Tensor& x, const Tensor& w, const Tensor& b) {
  double total = 0;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double acc = b.at(j);
      for (int64_t k = 0; k < 3; ++k) acc += x.at(i * 3 + k) * w.at(k * 5 + j);
      total += std::max(acc, 0.0);
    }
  return total;
}

}  // namespace

TEST_CASE("Executor runs a graph, fetches intermediates, takes overrides", "[ref]") {
  std::mt19937 rng(51);
  SmallGraph sg(rng);
  Tensor x = randomF32({4, 3}, rng);
  ref::Executor ex(sg.g);
  auto r = ex.run({{sg.x, x}});
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->at(0).at(0) == Approx(naiveLoss(x, sg.wData, sg.bData)).epsilon(1e-5));

  auto both = ex.run({{sg.x, x}}, {sg.mm, sg.loss});
  REQUIRE(both.ok());
  CHECK(both->at(0).shape() == Shape{4, 5});

  // A training loop's update: the parameter's new contents win over Value::data.
  Tensor w2 = randomF32({3, 5}, rng);
  REQUIRE(ex.setValue(sg.w, w2).ok());
  auto r2 = ex.run({{sg.x, x}});
  REQUIRE(r2.ok());
  CHECK(r2->at(0).at(0) == Approx(naiveLoss(x, w2, sg.bData)).epsilon(1e-5));
  CHECK_FALSE(ex.setValue(sg.w, randomF32({5, 3}, rng)).ok());
  ex.clearValue(sg.w);
  CHECK(ex.run({{sg.x, x}})->at(0).at(0) == Approx(r->at(0).at(0)));

  // Feeding an intermediate skips its producer.
  Tensor mm = Tensor(DType::F32, {4, 5});
  auto r3 = ex.run({{sg.mm, mm}});
  REQUIRE(r3.ok());
  double ref = 0;
  for (int64_t j = 0; j < 5; ++j) ref += 4 * std::max(sg.bData.at(j), 0.0);
  CHECK(r3->at(0).at(0) == Approx(ref));
}

TEST_CASE("Executor errors name the missing input, initializer or node", "[ref]") {
  std::mt19937 rng(52);
  SmallGraph sg(rng);
  ref::Executor ex(sg.g);
  auto missing = ex.run({});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("'x'") != std::string::npos);

  auto wrongShape = ex.run({{sg.x, randomF32({2, 3}, rng)}});
  REQUIRE_FALSE(wrongShape.ok());
  CHECK(wrongShape.error().message.find("'x'") != std::string::npos);

  sg.g.values[sg.w].data.reset();
  auto noData = ref::Executor(sg.g).run({{sg.x, randomF32({4, 3}, rng)}});
  REQUIRE_FALSE(noData.ok());
  CHECK(noData.error().message.find("initializer 'w'") != std::string::npos);

  // A kernel error carries the file and the node.
  sg.g.sourcePath = "small.onnx";
  sg.g.values[sg.w].data = std::make_shared<const Tensor>(randomF32({3, 5}, rng));
  sg.g.values[sg.x].shapeKnown = false;
  auto bad = ref::Executor(sg.g).run({{sg.x, randomF32({4, 2}, rng)}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("small.onnx: node 'MatMul_0'") != std::string::npos);
}

TEST_CASE("Executor frees intermediates after their last use", "[ref]") {
  ir::Graph g;
  g.name = "chain";
  ValueId x = addInput(g, "x", DType::F32, {1024}, ir::ValueKind::Input);
  g.inputs.push_back(x);
  ValueId v = x;
  const int kLength = 20;
  for (int i = 0; i < kLength; ++i) v = addNode(g, i % 2 ? "Neg" : "Exp", {v});
  g.outputs.push_back(v);
  std::mt19937 rng(53);
  Tensor in = randomF32({1024}, rng, -0.1f, 0.1f);
  ref::Executor ex(g);
  int calls = 0;
  ex.setNodeCallback([&](const ir::Node&, const std::vector<const Tensor*>& outs) {
    ++calls;
    CHECK(outs.size() == 1);
    return Status::success();
  });
  auto r = ex.run({{x, in}});
  REQUIRE(r.ok());
  CHECK(calls == kLength);
  // At most the tensor being read and the one being written are alive at once.
  CHECK(ex.lastPeakBytes() <= 2 * 1024 * sizeof(float));
  Tensor expect = in;
  for (int i = 0; i < kLength; ++i) expect = mustRun(i % 2 ? "Neg" : "Exp", {&expect})[0];
  requireEqual(r->at(0), expect);

  // The callback can stop a run.
  ex.setNodeCallback([](const ir::Node& n, const std::vector<const Tensor*>&) -> Status {
    return makeError("stopped at {}", n.name);
  });
  auto stopped = ex.run({{x, in}});
  REQUIRE_FALSE(stopped.ok());
  CHECK(stopped.error().message == "stopped at Exp_0");
}

TEST_CASE("Executor checks kernel outputs against inferred types", "[ref]") {
  ir::Graph g;
  g.name = "typed";
  ValueId x = addInput(g, "x", DType::F32, {2, 3}, ir::ValueKind::Input);
  g.inputs.push_back(x);
  ValueId y = addNode(g, "Transpose", {x});
  g.values[y].dtype = DType::F32;
  g.values[y].shape = {2, 3};  // wrong on purpose: Transpose gives [3,2]
  g.values[y].shapeKnown = true;
  g.outputs.push_back(y);
  Tensor in(DType::F32, {2, 3});
  auto r = ref::Executor(g).run({{x, in}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("Transpose_0") != std::string::npos);
  ref::ExecOptions loose;
  loose.checkInferredTypes = false;
  CHECK(ref::Executor(g, loose).run({{x, in}}).ok());
}
