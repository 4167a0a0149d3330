// Every shape rule against its reference kernel: each case is one node over random constants;
// fold-and-infer evaluates it and fails if the kernel's result disagrees with the inferred
// dtype or shape.
#include <catch2/catch.hpp>

#include <random>

#include "compiler/passes/fold_and_infer.h"
#include "tests/ops/graph_builder.h"

using fbl::ir::DType;
using fbl::ir::Shape;
using fbl::ir::Tensor;
namespace ir = fbl::ir;

namespace {

std::mt19937 rng(5);

// Random contents in [lo, hi) (integers) or [lo, hi) uniform (floats).
Tensor random(DType t, Shape s, double lo = -2, double hi = 2) {
  Tensor out(t, std::move(s));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < out.numel(); ++i) {
    double v = u(rng);
    out.set(i, ir::isFloat(t) ? v : std::floor(v));
  }
  return out;
}
Tensor f(Shape s) { return random(DType::F32, std::move(s)); }
Tensor idx(Shape s, int64_t n) { return random(DType::I64, std::move(s), 0, static_cast<double>(n)); }
Tensor ints(std::vector<int64_t> v) {
  return Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
}
template <typename T>
Tensor sc(T v) { return Tensor::scalar<T>(v); }

struct Case {
  std::string op;
  std::vector<Tensor> inputs;
  std::map<std::string, ir::AttrValue> attrs = {};
  int outputs = 1;
};

using V = std::vector<int64_t>;

std::vector<Case> cases() {
  return {
      {"Add", {f({2, 1, 4}), f({3, 1})}},
      {"Max", {f({4}), f({3, 1}), f({})}},
      {"Pow", {f({2, 3}), sc<float>(2.f)}},
      {"Div", {f({2, 3}), f({3})}},
      {"Equal", {idx({2, 1}, 3), idx({4}, 3)}},
      {"LessOrEqual", {f({3, 1}), f({1, 3})}},
      {"Where", {random(DType::Bool, {2, 1, 3}, 0, 2), f({3}), f({2, 1, 1})}},
      {"Not", {random(DType::Bool, {4}, 0, 2)}},
      {"And", {random(DType::Bool, {2, 1}, 0, 2), random(DType::Bool, {3}, 0, 2)}},
      {"Cast", {f({2, 2})}, {{"to", int64_t{7}}}},
      {"CastLike", {idx({3}, 5), f({})}},
      {"Sqrt", {random(DType::F32, {5}, 0, 4)}},
      {"Gelu", {f({5})}, {{"approximate", std::string("tanh")}}},
      {"Reshape", {f({2, 3, 4}), ints({0, -1})}},
      {"Transpose", {f({2, 3, 4})}, {{"perm", V{1, 2, 0}}}},
      {"Unsqueeze", {f({3, 4}), ints({0, -1})}},
      {"Squeeze", {f({1, 3, 1}), ints({0})}},
      {"Concat", {f({2, 3}), f({2, 1})}, {{"axis", int64_t{-1}}}},
      {"Slice", {f({5, 6}), ints({-1, 1}), ints({-6, 100}), ints({0, 1}), ints({-2, 2})}},
      {"Split", {f({2, 7})}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}}, 3},
      {"Split", {f({5}), ints({2, 3})}, {}, 2},
      {"Pad", {f({2, 3}), ints({0, 1, 1, 2}), sc<float>(1.f)}},
      {"Expand", {f({3, 1}), ints({2, 1, 4})}},
      {"Gather", {f({5, 6, 2}), idx({2, 3}, 6)}, {{"axis", int64_t{1}}}},
      {"GatherElements", {f({4, 3}), idx({4, 2}, 3)}, {{"axis", int64_t{1}}}},
      {"GatherND", {f({2, 3, 4}), idx({2, 1}, 3)}, {{"batch_dims", int64_t{1}}}},
      {"Range", {sc<int64_t>(10), sc<int64_t>(0), sc<int64_t>(-3)}},
      {"Range", {sc<float>(0.f), sc<float>(1.f), sc<float>(0.3f)}},
      {"CumSum", {f({2, 5}), sc<int64_t>(1)}, {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}},
      {"Trilu", {f({3, 4}), sc<int64_t>(-1)}, {{"upper", int64_t{0}}}},
      {"ConstantOfShape", {ints({2, 3})}, {{"value", Tensor::fromVector<int64_t>({1}, {7})}}},
      {"Constant", {}, {{"value_ints", V{1, 2, 3}}}},
      {"Constant", {}, {{"value_float", 2.5f}}},
      {"MatMul", {f({2, 1, 3, 4}), f({5, 4, 2})}},
      {"MatMul", {f({4}), f({3, 4, 2})}},
      {"MatMul", {f({2, 3, 4}), f({4})}},
      {"Gemm", {f({4, 3}), f({5, 4}), f({5})},
       {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5f}}},
      {"Conv", {f({1, 4, 7, 6}), f({6, 2, 3, 2}), f({6})},
       {{"group", int64_t{2}}, {"pads", V{1, 0, 2, 1}}, {"strides", V{2, 1}},
        {"dilations", V{1, 2}}}},
      {"ReduceMean", {f({2, 3, 4}), ints({-1, 0})}, {{"keepdims", int64_t{0}}}},
      {"ReduceSum", {f({2, 3}), ints({})}, {{"noop_with_empty_axes", int64_t{1}}}},
      {"ReduceMax", {f({2, 3, 4})}},
      {"Softmax", {f({2, 5})}, {{"axis", int64_t{0}}}},
      {"LogSoftmax", {f({2, 5})}},
      {"LayerNormalization", {f({2, 3, 4}), f({3, 4}), f({4})}, {{"axis", int64_t{1}}}, 3},
      {"SoftmaxCrossEntropyLoss", {f({4, 6}), idx({4}, 6)}, {}, 2},
      {"SoftmaxCrossEntropyLoss", {f({2, 6, 3}), idx({2, 3}, 6), random(DType::F32, {6}, 0, 1)},
       {{"reduction", std::string("none")}}},
  };
}

}  // namespace

TEST_CASE("shape rules agree with the reference kernels", "[passes]") {
  for (Case& c : cases()) {
    fbl::testing::GraphBuilder b;
    std::vector<ir::ValueId> ins;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      ins.push_back(b.constant("in" + std::to_string(i), c.inputs[i]));
    auto outs = b.node(c.op, ins, c.attrs, c.outputs);
    for (ir::ValueId o : outs) b.output(o);
    fbl::passes::FoldAndInfer pass;
    auto r = pass.run(b.g);
    CAPTURE(c.op);
    INFO((r.ok() ? std::string() : r.error().message));
    REQUIRE(r.ok());
    CHECK(pass.stats().folded == 1);
    for (ir::ValueId o : outs) CHECK(b.g.values[o].kind == ir::ValueKind::Constant);
  }
}
