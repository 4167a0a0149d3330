// CumSum, GatherND, ScatterND and ScatterElements kernels (index_emitters.cc), and Mod, against the reference executor on
// random data, on PoCL; and their guards: with a tuple outside the data, GatherND gathers 0 and
// ScatterND skips it (the reference refuses such tuples, so the expected values come from the
// reference run on the graph without them).
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

using ir::DType;
using ir::Tensor;

TEST_CASE("CumSum kernels match the reference, every direction", "[runtime][kernels][index]") {
  for (const int64_t exclusive : {0, 1})
    for (const int64_t reverse : {0, 1})
      for (const int64_t axis : {1, -1}) {
        INFO("exclusive " << exclusive << " reverse " << reverse << " axis " << axis);
        Case c;
        auto x = c.in("x", DType::F32, {3, 5, 4});
        c.run(c.b.op("CumSum", {x, c.b.ints<int64_t>("ax", {axis})}, {{"exclusive", exclusive}, {"reverse", reverse}}));
      }
  // Position ids from a padding mask: cumsum of 0/1 integers along the sequence.
  Case c;
  auto mask = c.in("mask", DType::I64, {2, 9}, 0, 2);
  c.run(c.b.op("CumSum", {mask, c.b.constant("ax", Tensor::scalar<int64_t>(1))}));
}

TEST_CASE("GatherND kernels match the reference", "[runtime][kernels][index]") {
  {
    Case c;  // pairs of indices into [4, 5], negative ones wrapping; slices of 3
    auto data = c.in("data", DType::F32, {4, 5, 3});
    auto idx = c.b.constant("idx", Tensor::fromVector<int64_t>({2, 3, 2}, {0, 0, 3, 4, -1, -5, 2, 1, 1, 3, -4, 2}));
    c.run(c.b.op("GatherND", {data, idx}));
  }
  {
    Case c;  // whole rows, indices a run-time input
    auto data = c.in("data", DType::F32, {6, 4});
    auto idx = c.in("idx", DType::I64, {5, 1}, -6, 6);
    c.run(c.b.op("GatherND", {data, idx}));
  }
  {
    Case c;  // batch_dims 1
    auto data = c.in("data", DType::F32, {2, 4, 3});
    auto idx = c.b.constant("idx", Tensor::fromVector<int64_t>({2, 3, 1}, {0, 3, 1, 2, 2, -1}));
    c.run(c.b.op("GatherND", {data, idx}, {{"batch_dims", int64_t{1}}}));
  }
}

TEST_CASE("ScatterND kernels match the reference, every reduction", "[runtime][kernels][index]") {
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    INFO(red);
    Case c;  // rows 3, 0 and -1 (= 4) of [5, 6], and row 0 again: the later update wins under none
    auto data = c.in("data", DType::F32, {5, 6});
    auto idx = c.b.constant("idx", Tensor::fromVector<int64_t>({4, 1}, {3, 0, -1, 0}));
    auto upd = c.in("upd", DType::F32, {4, 6});
    c.run(c.b.op("ScatterND", {data, idx, upd}, {{"reduction", std::string(red)}}));
  }
  {
    Case c;  // single elements of [3, 4, 2]: slices of 2
    auto data = c.in("data", DType::F32, {3, 4, 2});
    auto idx = c.b.constant("idx", Tensor::fromVector<int64_t>({3, 2}, {0, 1, 2, 3, -1, 0}));
    auto upd = c.in("upd", DType::F32, {3, 2});
    c.run(c.b.op("ScatterND", {data, idx, upd}));
  }
  {
    Case c;  // T5's shift right: integer ids, the first column of every row
    auto data = c.in("ids", DType::I64, {2, 7}, 0, 100);
    auto idx = c.b.constant("idx", Tensor::fromVector<int64_t>({2, 1, 2}, {0, 0, 1, 0}));
    auto upd = c.in("start", DType::I64, {2, 1}, 0, 100);
    c.run(c.b.op("ScatterND", {data, idx, upd}));
  }
}

TEST_CASE("ScatterElements kernels match the reference, every reduction and axis", "[runtime][kernels][index]") {
  // Every reduction along the middle axis, and none along the first and last (each case is a
  // PoCL program build: the pairs cover every code path of the template).
  const std::vector<std::pair<const char*, int64_t>> cases = {
      {"none", 1}, {"add", 1}, {"mul", 1}, {"max", 1}, {"min", 1}, {"none", 0}, {"none", -1}};
  for (const auto& [red, axis] : cases) {
    INFO(red << " axis " << axis);
    Case c;  // indices smaller than data on every axis, repeats and negative ones included
    const int64_t n = axis == 0 ? 4 : axis == 1 ? 5 : 3;
    auto data = c.in("data", DType::F32, {4, 5, 3});
    auto idx = c.in("idx", DType::I64, {3, 2, 2}, -n, n);
    auto upd = c.in("upd", DType::F32, {3, 2, 2});
    c.run(c.b.op("ScatterElements", {data, idx, upd}, {{"axis", axis}, {"reduction", std::string(red)}}));
  }
  Case c;  // T5's shift right as the dynamo exporter writes it: column 0 of integer ids
  auto ids = c.in("ids", DType::I64, {2, 7}, 0, 100);
  auto idx = c.b.constant("idx", Tensor::fromVector<int64_t>({2, 1}, {0, 0}));
  auto start = c.in("start", DType::I64, {2, 1}, 0, 100);
  c.run(c.b.op("ScatterElements", {ids, idx, start}, {{"axis", int64_t{1}}}));
}

TEST_CASE("Mod kernels match the reference", "[runtime][kernels][index]") {
  for (const int64_t fmod : {0, 1}) {
    Case c;
    auto a = c.in("a", DType::I64, {4, 6}, -40, 40);
    auto b = c.b.constant("b", Tensor::fromVector<int64_t>({6}, {3, -3, 7, -5, 1, 2}));
    c.run(c.b.op("Mod", {a, b}, {{"fmod", fmod}}));
  }
  Case c;
  auto a = c.in("a", DType::F32, {3, 5});
  auto b = c.b.constant("b", Tensor::fromVector<float>({5}, {0.7f, -1.3f, 2.0f, 0.25f, -0.6f}));
  c.run(c.b.op("Mod", {a, b}, {{"fmod", int64_t{1}}}));
}

// Runs the one-node graph `b` on PoCL with `feeds` and returns its output.
Tensor onDevice(GraphBuilder& b, const std::vector<Tensor>& feeds, const std::string& name) {
  REQUIRE(ops::inferNode(b.g, b.g.nodes.back()).ok());
  plan::PlanInputs in;
  in.graph = &b.g;
  in.keep = b.g.outputs;
  in.model = name;
  plan::BuildStats stats;
  auto p = plan::buildPlan(in, testProfile(), &stats);
  REQUIRE(p.ok());
  auto s = openPlan(*p, name);
  for (size_t i = 0; i < b.g.inputs.size(); ++i)
    REQUIRE_OK(s->writeTensor(b.g.values[b.g.inputs[i]].name, feeds[i].raw(), feeds[i].nbytes()));
  REQUIRE_OK(s->runPhases({"forward"}));
  std::vector<unsigned char> bytes;
  REQUIRE_OK(s->readTensor(stats.tensorOfValue.at(b.g.outputs[0]), &bytes));
  const ir::Value& v = b.g.values[b.g.outputs[0]];
  Tensor t(v.dtype, v.shape);
  REQUIRE(bytes.size() == t.nbytes());
  std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

TEST_CASE("GatherND, ScatterND and ScatterElements guards: an index outside the data reads and writes nothing", "[runtime][kernels][index]") {
  std::mt19937 rng(9);
  const Tensor data = randomTensor(DType::F32, {4, 3}, rng);
  const std::vector<int64_t> bad = {1, 4, -5, int64_t{1} << 40, 2};  // rows 1 and 2 are real
  {
    GraphBuilder b;
    auto d = b.input("data", DType::F32, {4, 3});
    auto i = b.input("idx", DType::I64, {5, 1});
    b.output(b.op("GatherND", {d, i}));
    const Tensor got = onDevice(b, {data, Tensor::fromVector<int64_t>({5, 1}, bad)}, "gathernd-guard");
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t c = 0; c < 3; ++c) {
        const bool real = bad[t] >= 0 && bad[t] < 4;
        INFO("tuple " << t << " column " << c);
        CHECK(got.at(t * 3 + c) == (real ? data.at(bad[t] * 3 + c) : 0.0));
      }
  }
  {
    const Tensor upd = randomTensor(DType::F32, {5, 3}, rng);
    GraphBuilder b;
    auto d = b.input("data", DType::F32, {4, 3});
    auto i = b.input("idx", DType::I64, {5, 1});
    auto u = b.input("upd", DType::F32, {5, 3});
    b.output(b.op("ScatterND", {d, i, u}));
    const Tensor got = onDevice(b, {data, Tensor::fromVector<int64_t>({5, 1}, bad), upd}, "scatternd-guard");
    // The reference on the two real tuples only.
    GraphBuilder r;
    auto rd = r.input("data", DType::F32, {4, 3});
    auto ri = r.input("idx", DType::I64, {2, 1});
    auto ru = r.input("upd", DType::F32, {2, 3});
    r.output(r.op("ScatterND", {rd, ri, ru}));
    REQUIRE(ops::inferNode(r.g, r.g.nodes.back()).ok());
    Tensor realUpd(DType::F32, {2, 3});
    for (int64_t c = 0; c < 3; ++c) {
      realUpd.set(c, upd.at(0 * 3 + c));
      realUpd.set(3 + c, upd.at(4 * 3 + c));
    }
    auto want = ref::runGraph(r.g, {data, Tensor::fromVector<int64_t>({2, 1}, {1, 2}), realUpd});
    REQUIRE(want.ok());
    CHECK(scaledError(got, want.value()[0]) == 0.0);
  }
  {
    // ScatterElements along axis 0: an index outside [-4, 4) writes nothing. Expected by hand:
    // the positions in order, each real index wrapped once (the reference refuses the others).
    const std::vector<int64_t> idx = {1, 4, -5, int64_t{1} << 40, 2, -1};
    const Tensor upd = randomTensor(DType::F32, {2, 3}, rng);
    GraphBuilder b;
    auto d = b.input("data", DType::F32, {4, 3});
    auto i = b.input("idx", DType::I64, {2, 3});
    auto u = b.input("upd", DType::F32, {2, 3});
    b.output(b.op("ScatterElements", {d, i, u}, {{"axis", int64_t{0}}}));
    const Tensor got = onDevice(b, {data, Tensor::fromVector<int64_t>({2, 3}, idx), upd}, "scatterelements-guard");
    Tensor want = data;
    for (int64_t p = 0; p < 6; ++p) {
      const int64_t t = idx[p] < 0 ? idx[p] + 4 : idx[p];
      if (t >= 0 && t < 4) want.set(t * 3 + p % 3, upd.at(p));
    }
    CHECK(scaledError(got, want) == 0.0);
  }
}

}  // namespace
}  // namespace fbl::testing
