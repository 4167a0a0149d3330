// Inputs are checked before any launch, and no kernel reads outside a tensor for any input:
//  - rt::checkInput on a plan written by hand: every error class and its line (no device);
//  - the plan records the bounds (compile, then the plan file round trip), and synthetic batches
//    drawn within them are the graph's;
//  - Session and C API refuse a bad write, write nothing, run no launch, and say so; fbl-train exits 1 with the
//    line, not 139;
//  - the kernel guards, with the checks bypassed (a plan whose input_checks were removed): an
//    index outside the table gathers 0, a label outside the classes counts as ignored.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/driver/compile_command.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "runtime/input_check.h"
#include "runtime/plan_check.h"
#include "runtime/synthetic_inputs.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;
using ir::DType;

planfile::Plan checkedPlan() {
  planfile::Plan p;
  p.model = "checks";
  auto add = [&](std::string name, std::string dt, std::vector<int64_t> shape, planfile::Role role) {
    planfile::Tensor t;
    t.name = std::move(name);
    t.dtype = std::move(dt);
    t.shape = std::move(shape);
    t.role = role;
    t.bytes = planfile::logicalBytes(t);
    p.tensors.push_back(t);
    if (role == planfile::Role::Input) p.inputs.push_back(static_cast<int32_t>(p.tensors.size() - 1));
  };
  add("ids", "i64", {2, 3}, planfile::Role::Input);      // t0
  add("labels", "i32", {4}, planfile::Role::Input);      // t1
  add("x", "f32", {2, 2}, planfile::Role::Input);        // t2
  add("h", "f16", {3}, planfile::Role::Input);           // t3
  add("w", "f32", {2}, planfile::Role::Weight);          // t4
  add("free", "i64", {2}, planfile::Role::Input);        // t5: no consumer bounds it
  planfile::InputCheck gather;
  gather.input = 0;
  gather.lo = -10;
  gather.hi = 10;
  gather.node = "node_embedding";
  gather.table = "embed.weight";
  planfile::InputCheck small = gather;  // a second consumer with a smaller table
  small.lo = -4;
  small.hi = 4;
  small.node = "node_pos";
  small.table = "pos.weight";
  planfile::InputCheck loss;
  loss.input = 1;
  loss.kind = "label";
  loss.hi = 5;
  loss.hasIgnore = true;
  loss.ignoreIndex = -100;
  loss.node = "node_loss";
  p.inputChecks = {gather, small, loss};
  return p;
}

template <typename T>
std::string check(const planfile::Plan& p, int32_t t, const std::vector<T>& v) {
  return fbl::testing::errorText(rt::checkInput(p, t, v.data(), v.size() * sizeof(T)));
}

TEST_CASE("input checks: integer bounds, with the position, coordinates and consumer", "[runtime][inputs]") {
  const planfile::Plan p = checkedPlan();
  CHECK(check<int64_t>(p, 0, {0, 3, -4, -1, 2, 1}) == "");
  CHECK(check<int64_t>(p, 0, {0, 1, 2, 3, 9, 0}) ==
        "input 'ids' position 4 ([1, 1]): index 9 is outside [-4, 4) (the table 'pos.weight' of node 'node_pos')");
  CHECK(check<int64_t>(p, 0, {0, 1, 2, 50000, -11, 7}) ==
        "input 'ids' position 3 ([1, 0]): index 50000 is outside [-10, 10) (the table 'embed.weight' of node "
        "'node_embedding') (and 2 more positions)");
  CHECK(check<int64_t>(p, 0, {0, 1, -5, 0, 0, 0}) ==
        "input 'ids' position 2 ([0, 2]): index -5 is outside [-4, 4) (the table 'pos.weight' of node 'node_pos')");
  CHECK(check<int32_t>(p, 1, {0, 4, -100, 2}) == "");
  CHECK(check<int32_t>(p, 1, {0, 5, -100, 2}) ==
        "input 'labels' position 1 ([1]): label 5 is outside the classes [0, 5) and is not the ignore_index -100 "
        "(node 'node_loss')");
  CHECK_THAT(check<int32_t>(p, 1, {0, 1, -1, 2}), Catch::StartsWith("input 'labels' position 2 ([2]): label -1"));
  CHECK(check<int64_t>(p, 5, {-99999, 99999}) == "");
}

TEST_CASE("input checks: NaN and infinity in float inputs, of every float width", "[runtime][inputs]") {
  const planfile::Plan p = checkedPlan();
  CHECK(check<float>(p, 2, {0.0f, -1.0f, 3e38f, 1e-40f}) == "");
  CHECK(check<float>(p, 2, {0.0f, 1.0f, 2.0f, std::nanf("")}) == "input 'x' position 3 ([1, 1]): value NaN is not finite");
  CHECK(check<float>(p, 2, {0.0f, -INFINITY, INFINITY, 0.0f}) ==
        "input 'x' position 1 ([0, 1]): value -inf is not finite (and 1 more positions)");
  // f16 bit patterns: 0x3C00 is 1.0, 0x7C00 inf, 0xFC00 -inf, 0x7E00 NaN, 0x7BFF the largest finite.
  CHECK(check<uint16_t>(p, 3, {0x3C00, 0x7BFF, 0xFBFF}) == "");
  CHECK(check<uint16_t>(p, 3, {0x3C00, 0x7E00, 0x7C00}) ==
        "input 'h' position 1 ([1]): value NaN is not finite (and 1 more positions)");
  CHECK(check<uint16_t>(p, 3, {0xFC00, 0, 0}) == "input 'h' position 0 ([0]): value -inf is not finite");
  // Weights are not inputs: a NaN weight is the loss check's business.
  CHECK(check<float>(p, 4, {std::nanf(""), 1.0f}) == "");
}

TEST_CASE("input checks: byte counts, dtypes and shapes", "[runtime][inputs]") {
  const planfile::Plan p = checkedPlan();
  const std::vector<int64_t> ids(5, 0);
  CHECK(check<int64_t>(p, 0, ids) == "input 'ids' takes 48 bytes (i64[2,3]), not 40");
  CHECK(check<float>(p, 4, {1.0f}) == "tensor 'w' takes 8 bytes (f32[2]), not 4");
  const std::vector<int64_t> six(6, 0);
  CHECK(fbl::testing::errorText(rt::checkInput(p, 0, "i32", {2, 3}, six.data(), 48)) == "input 'ids' is i32[2,3] but the plan expects i64[2,3]");
  CHECK(fbl::testing::errorText(rt::checkInput(p, 0, "i64", {3, 2}, six.data(), 48)) == "input 'ids' is i64[3,2] but the plan expects i64[2,3]");
  CHECK_OK(rt::checkInput(p, 0, "i64", {2, 3}, six.data(), 48));
  std::vector<int64_t> bad = six;
  bad[5] = 10;
  CHECK_THAT(fbl::testing::errorText(rt::checkInput(p, 0, "i64", {2, 3}, bad.data(), 48)), Catch::StartsWith("input 'ids' position 5 ([1, 2]): index 10"));
}

TEST_CASE("input checks survive the plan file, and a check on no input is refused", "[runtime][inputs]") {
  planfile::Plan p = checkedPlan();
  p.arenaBytes = 4096;
  planfile::Plan back = fbl::testing::requireValue(planfile::parse(planfile::serialize(p)));
  REQUIRE(back.inputChecks.size() == 3);
  CHECK(back.inputChecks[0].table == "embed.weight");
  CHECK(back.inputChecks[2].kind == "label");
  CHECK(back.inputChecks[2].hasIgnore);
  CHECK(back.inputChecks[2].ignoreIndex == -100);
  CHECK_FALSE(back.inputChecks[0].hasIgnore);
  p.inputChecks[1].input = 4;  // the weight
  CHECK_THAT(fbl::testing::errorText(planfile::parse(planfile::serialize(p))), Catch::Contains("bad input check (node 'node_pos')"));
}

driver::CompileArgs argsFor(const std::string& model) {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/" + model + "-inputs.fbp";
  a.weights = tempDir() + "/" + model + "-inputs.safetensors";
  return a;
}

ir::Tensor corpusInput(const std::string& model, int i) {
  auto t = onnx::readTensorProtoFile(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/test_data_set_0/input_" +
                                     std::to_string(i) + ".pb");
  REQUIRE(t.ok());
  return t->tensor;
}

TEST_CASE("compiled plans record the vocabulary and the classes of their inputs", "[runtime][inputs]") {
  // bert-tiny: input_0 (token ids) indexes the word embeddings; input_1 labels the MLM loss, whose
  // scores have as many classes as the table has rows.
  const driver::CompileArgs a = argsFor("bert-tiny");
  auto c = driver::compileModel(a);
  REQUIRE(c.ok());
  const planfile::Plan& p = c->plan;
  REQUIRE(p.inputs.size() == 2);
  bool ids = false, labels = false;
  int64_t rows = 0, classes = 0;
  for (const planfile::InputCheck& k : p.inputChecks) {
    INFO(k.kind << " " << k.node << " [" << k.lo << ", " << k.hi << ")");
    if (k.input == p.inputs[0] && k.kind == "index") {
      // The table's rows (bert-tiny ties its word embeddings to the decoder weight).
      const int32_t table = p.findTensor(k.table);
      REQUIRE(table >= 0);
      CHECK(k.hi == p.tensors[table].shape[0]);
      CHECK(k.lo == 0);  // an embedding: a negative token id is refused, as PyTorch refuses it
      ids = true;
      rows = k.hi;
    }
    if (k.input == p.inputs[1] && k.kind == "label") {
      CHECK(k.lo == 0);
      CHECK(k.hasIgnore);
      CHECK(k.ignoreIndex == -100);
      labels = true;
      classes = k.hi;
    }
  }
  CHECK(ids);
  CHECK(labels);
  CHECK(classes == rows);
  // A check on an input whose values it cannot read (not an integer) is refused at load.
  planfile::Plan floatIds = fbl::testing::requireValue(planfile::parse(planfile::serialize(p)));
  CHECK_OK(rt::checkPlan(floatIds));
  floatIds.tensors[floatIds.inputs[0]].dtype = "f64";
  CHECK_THAT(fbl::testing::errorText(rt::checkPlan(floatIds)), Catch::Contains("tensor '" + p.tensors[p.inputs[0]].name + "' is f64, not an integer input"));
}

// fbl-train draws synthetic batches from the plan (runtime/synthetic_inputs.h, bounds from its
// input_checks); the compiler draws them from the ONNX graph (zoo::syntheticInputs, bounds from
// analysis::inputBounds). The two must be the same bytes: token ids, labels and pixels.
TEST_CASE("a plan's synthetic batch is its graph's", "[runtime][inputs]") {
  for (const char* model : {"llama-tiny", "bert-tiny", "vit-tiny"}) {
    INFO(model);
    const driver::CompileArgs a = argsFor(model);
    auto c = driver::compileModel(a);
    REQUIRE(c.ok());
    auto g = passes::loadModel(a.model);
    REQUIRE(g.ok());
    const std::vector<rt::SyntheticInput> specs = rt::syntheticInputs(c->plan);
    REQUIRE(specs.size() == g->inputs.size());
    bool integers = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].dtype != "i64") continue;
      CHECK(specs[i].bound == zoo::integerInputBound(*g, g->inputs[i]));
      CHECK(specs[i].bound < rt::kDefaultIntegerBound);  // a vocabulary or a class count, not the default
      integers = true;
    }
    CHECK(integers);
    for (const int64_t step : {0, 3}) {
      std::vector<std::vector<unsigned char>> fromPlan = fbl::testing::requireValue(rt::syntheticBatch(specs, 7, step));
      auto fromGraph = zoo::syntheticInputs(*g, 7, step);
      REQUIRE(fromGraph.ok());
      for (size_t i = 0; i < specs.size(); ++i) {
        const ir::Tensor& t = fromGraph->at(g->inputs[i]);
        INFO(specs[i].name << " step " << step);
        REQUIRE(fromPlan[i].size() == t.nbytes());
        CHECK(std::memcmp(fromPlan[i].data(), t.raw(), t.nbytes()) == 0);
      }
    }
  }
}

TEST_CASE("Session and C API refuse a bad input before any launch", "[runtime][inputs]") {
  const driver::CompileArgs a = argsFor("llama-tiny");
  auto c = driver::compileModel(a);
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  const planfile::Plan& p = c->plan;
  REQUIRE(p.inputs.size() == 1);
  const std::string name = p.tensors[p.inputs[0]].name;
  ir::Tensor ids = corpusInput("llama-tiny", 0);
  ir::Tensor bad = ids;
  bad.set(5, 50000);
  auto s = openPlan(p, "llama-inputs");
  REQUIRE_OK(s->loadWeights(a.weights));
  const std::string err = fbl::testing::errorText(s->writeTensor(name, bad.raw(), bad.nbytes()));
  CHECK_THAT(err, Catch::StartsWith("input '" + name + "' position 5 ([0, 5]): index 50000 is outside [0, 256)"));
  // Nothing was written: the step refuses to run on an input no check has passed.
  float loss = 0.0f;
  CHECK_THAT(fbl::testing::errorText(s->trainStep(&loss)), Catch::Contains("input '" + name + "' was never written"));
  CHECK_THAT(fbl::testing::errorText(s->runPhases({"forward"})), Catch::Contains("never written"));
  CHECK_THAT(fbl::testing::errorText(s->writeInput(name, "i32", {1, 16}, ids.raw(), 64)), Catch::Contains("is i32[1,16] but the plan expects i64[1,16]"));
  REQUIRE_OK(s->writeInput(name, "i64", {1, 16}, ids.raw(), ids.nbytes()));
  CHECK_OK(s->trainStep(&loss));
  CHECK(std::isfinite(loss));

  // The C API: FBL_ERROR_INPUT and the same line from fbl_last_error, after the function's name.
  const std::string path = tempDir() + "/llama-inputs-c.fbp";
  REQUIRE_OK(safetensors::writeFileAtomic(path, planfile::serialize(p)));
  fbl_session* cs = nullptr;
  REQUIRE(fbl_open(path.c_str(), -1, nullptr, &cs) == FBL_OK);
  REQUIRE(fbl_load_weights(cs, a.weights.c_str()) == FBL_OK);
  int reports = 0;  // one a launch: none may run on a refused batch
  fbl_set_progress(cs, [](void* n, const fbl_progress*) { return ++*static_cast<int*>(n), 0; }, &reports, 1);
  CHECK(fbl_write_tensor(cs, name.c_str(), bad.raw(), bad.nbytes()) == FBL_ERROR_INPUT);
  CHECK(std::string(fbl_last_error()) == "fbl_write_tensor: " + err);
  CHECK(fbl_train_step(cs, &loss) == FBL_ERROR);
  CHECK_THAT(std::string(fbl_last_error()), Catch::Contains("input '" + name + "' was never written"));
  CHECK(reports == 0);
  CHECK(fbl_step(cs) == 0);
  const int64_t shape[] = {1, 16};
  CHECK(fbl_write_input(cs, name.c_str(), "i64", shape, 2, bad.raw(), bad.nbytes()) == FBL_ERROR_INPUT);
  CHECK(std::string(fbl_last_error()) == "fbl_write_input: " + err);
  CHECK(fbl_write_input(cs, name.c_str(), "f32", shape, 2, ids.raw(), 64) == FBL_ERROR_INPUT);
  CHECK(fbl_write_tensor(cs, "no_such_input", ids.raw(), ids.nbytes()) == FBL_ERROR);
  CHECK_THAT(std::string(fbl_last_error()), Catch::Contains("no tensor 'no_such_input'"));
  CHECK(fbl_write_input(cs, name.c_str(), "i64", shape, 2, ids.raw(), ids.nbytes()) == FBL_OK);
  CHECK(std::string(fbl_last_error()).empty());
  CHECK(reports == 0);
  CHECK(fbl_train_step(cs, &loss) == FBL_OK);
  CHECK(reports > 0);
  CHECK(fbl_step(cs) == 1);
  fbl_close(cs);
}

TEST_CASE("fbl-train prints the bad input's line and exits 1", "[runtime][inputs]") {
  const driver::CompileArgs a = argsFor("llama-tiny");
  auto c = driver::compileModel(a);
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  const std::string planPath = tempDir() + "/llama-train-inputs.fbp";
  REQUIRE_OK(safetensors::writeFileAtomic(planPath, planfile::serialize(c->plan)));
  // Two batches, the second bad: the run stops before its first step.
  const std::string data = tempDir() + "/bad-data";
  fs::create_directories(data + "/test_data_set_0");
  fs::create_directories(data + "/test_data_set_1");
  ir::Tensor ids = corpusInput("llama-tiny", 0);
  REQUIRE(onnx::writeTensorProtoFile(data + "/test_data_set_0/input_0.pb", "input_0", ids).ok());
  ids.set(15, -1);  // PyTorch refuses a negative token id; ONNX would read the last row
  REQUIRE(onnx::writeTensorProtoFile(data + "/test_data_set_1/input_0.pb", "input_0", ids).ok());
  const std::string log = tempDir() + "/bad-data.log";
  const std::string cmd = std::string(FBL_BIN_DIR) + "/fbl-train " + planPath + " --weights " + a.weights + " --data " +
                          data + " --steps 2 > " + log + " 2>&1";
  const int st = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(log).rdbuf();
  INFO(out.str());
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 1);
  CHECK_THAT(out.str(), Catch::Contains("error: " + data + "/test_data_set_1/input_0.pb: sample 1: input 'input_0' position 15 "
                                        "([0, 15]): index -1 is outside [0, 256)"));
  CHECK_THAT(out.str(), !Catch::Contains("step 1/"));
}

// With the checks bypassed, every out-of-range index gathers 0 and every in-range one its row;
// `expect` is the naive host gather.
TEST_CASE("kernel guards: indices outside the table gather 0 with the checks bypassed", "[runtime][inputs]") {
  const int64_t V = 6, D = 5;
  std::mt19937 rng(3);
  const ir::Tensor table = randomTensor(DType::F32, {V, D}, rng);
  // In range, negative, just outside either end, far outside (an unguarded read faults).
  const std::vector<int64_t> idsV = {0, 5, -6, 6, -7, int64_t{1} << 40, -(int64_t{1} << 40), 3};
  for (const bool elements : {false, true}) {
    INFO((elements ? "GatherElements" : "Gather"));
    GraphBuilder b;
    auto data = b.input("data", DType::F32, {V, D});
    auto idx = b.input("idx", DType::I64, elements ? ir::Shape{8, D} : ir::Shape{8});
    auto y = b.op(elements ? "GatherElements" : "Gather", {data, idx});
    b.output(y);
    REQUIRE(ops::inferNode(b.g, b.g.nodes.back()).ok());
    plan::PlanInputs in;
    in.graph = &b.g;
    in.keep = b.g.outputs;
    in.model = "guard";
    plan::BuildStats stats;
    auto built = plan::buildPlan(in, testProfile(), &stats);
    REQUIRE(built.ok());
    planfile::Plan p = built.value();
    REQUIRE_FALSE(p.inputChecks.empty());
    ir::Tensor ids(DType::I64, b.g.values[idx].shape);
    for (int64_t i = 0; i < ids.numel(); ++i) ids.set(i, static_cast<double>(idsV[(i / (elements ? D : 1)) % 8]));
    {
      auto checked = openPlan(p, "guard-checked");
      CHECK_THAT(fbl::testing::errorText(checked->writeTensor("idx", ids.raw(), ids.nbytes())), Catch::Contains("index 6 is outside [-6, 6)"));
    }
    p.inputChecks.clear();  // the bypass
    auto s = openPlan(p, "guard");
    REQUIRE_OK(s->writeTensor("data", table.raw(), table.nbytes()));
    REQUIRE_OK(s->writeTensor("idx", ids.raw(), ids.nbytes()));
    REQUIRE_OK(s->runPhases({"forward"}));
    std::vector<unsigned char> bytes;
    REQUIRE_OK(s->readTensor(stats.tensorOfValue.at(y), &bytes));
    const auto* got = reinterpret_cast<const float*>(bytes.data());
    for (int64_t r = 0; r < 8; ++r)
      for (int64_t c = 0; c < D; ++c) {
        const int64_t id = idsV[r], row = id < 0 ? id + V : id;
        const float want = row >= 0 && row < V ? static_cast<float>(table.at(row * D + c)) : 0.0f;
        INFO("id " << id << " column " << c);
        CHECK(got[r * D + c] == want);
      }
  }
}

TEST_CASE("kernel guards: labels outside the classes count as ignored with the checks bypassed", "[runtime][inputs]") {
  // Loss and gradient of labels {2, 9, 0, -3} (C = 4) equal the reference's of {2, -100, 0, -100}
  // with ignore_index -100.
  const int64_t N = 4, C = 4;
  std::mt19937 rng(5);
  const ir::Tensor x = randomTensor(DType::F32, {N, C}, rng, -2, 2);
  const ir::Tensor dl = ir::Tensor::scalar<float>(1.5f);
  auto build = [&](GraphBuilder& b) {
    auto scores = b.input("x", DType::F32, {N, C});
    auto labels = b.input("labels", DType::I64, {N});
    auto dloss = b.input("dl", DType::F32, {});
    const std::map<std::string, ir::AttrValue> at{{"ignore_index", int64_t{-100}}, {"reduction", std::string("mean")}};
    auto l = b.op("SoftmaxCrossEntropyLoss", {scores, labels}, at);
    REQUIRE(ops::inferNode(b.g, b.g.nodes.back()).ok());
    auto dx = b.op("fbl.SoftmaxCrossEntropyLossGrad", {dloss, scores, labels}, at);
    b.g.values[dx].dtype = DType::F32;
    b.g.values[dx].shape = {N, C};
    b.g.values[dx].shapeKnown = true;
    b.output(l);
    b.output(dx);
  };
  GraphBuilder ref;
  build(ref);
  const ir::Tensor ignored = ir::Tensor::fromVector<int64_t>({N}, {2, -100, 0, -100});
  auto expected = ref::runGraph(ref.g, {x, ignored, dl});
  REQUIRE(expected.ok());
  GraphBuilder b;
  build(b);
  plan::PlanInputs in;
  in.graph = &b.g;
  in.keep = b.g.outputs;
  in.model = "guard-loss";
  plan::BuildStats stats;
  auto built = plan::buildPlan(in, testProfile(), &stats);
  REQUIRE(built.ok());
  planfile::Plan p = built.value();
  REQUIRE(p.inputChecks.size() == 1);
  p.inputChecks.clear();
  auto s = openPlan(p, "guard-loss");
  const ir::Tensor bad = ir::Tensor::fromVector<int64_t>({N}, {2, 9, 0, -3});
  REQUIRE_OK(s->writeTensor("x", x.raw(), x.nbytes()));
  REQUIRE_OK(s->writeTensor("labels", bad.raw(), bad.nbytes()));
  REQUIRE_OK(s->writeTensor("dl", dl.raw(), dl.nbytes()));
  REQUIRE_OK(s->runPhases({"forward", "backward"}));
  for (size_t o = 0; o < 2; ++o) {
    std::vector<unsigned char> bytes;
    REQUIRE_OK(s->readTensor(stats.tensorOfValue.at(b.g.outputs[o]), &bytes));
    ir::Tensor got(DType::F32, b.g.values[b.g.outputs[o]].shape);
    REQUIRE(bytes.size() == got.nbytes());
    std::memcpy(got.raw(), bytes.data(), bytes.size());
    INFO("output " << o);
    CHECK(scaledError(got, expected.value()[o]) <= 1e-5);
  }
}

}  // namespace
}  // namespace fbl::testing
