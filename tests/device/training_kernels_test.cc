// The kernels of fbl's backward and optimizer ops against their reference kernels
// (compiler/ops/training_schemas.cc) on random data, on PoCL.
#include "tests/device/device_test_util.h"

namespace fbl::testing {
namespace {

using ir::DType;
using Ints = std::vector<int64_t>;

TEST_CASE("pointwise gradient kernels match the reference", "[runtime][kernels][training]") {
  for (const char* op : {"fbl.SigmoidGrad", "fbl.TanhGrad", "fbl.ErfGrad", "fbl.GeluGrad"}) {
    Case c;
    auto dy = c.in("dy", DType::F32, {3, 7});
    auto saved = c.in("s", DType::F32, {3, 7}, -2, 2);
    c.run(c.b.op(op, {dy, saved}));
  }
  {
    Case c;
    auto dy = c.in("dy", DType::F32, {3, 7});
    auto x = c.in("x", DType::F32, {3, 7}, -2, 2);
    c.run(c.b.op("fbl.GeluGrad", {dy, x}, {{"approximate", std::string("tanh")}}));
  }
  // Four elements a work-item (kernels.elementwise_items): 3 x 7 x 13 = 273 elements, not a
  // multiple of 4 x 64, so the last work-group's later passes fall past the end.
  for (const char* op : {"fbl.TanhGrad", "fbl.GeluGrad"}) {
    Case c;
    c.profile.tuning.elementwiseItems = 4;
    auto dy = c.in("dy", DType::F32, {3, 7, 13});
    auto saved = c.in("s", DType::F32, {3, 7, 13}, -2, 2);
    c.run(c.b.op(op, {dy, saved}));
  }
}

TEST_CASE("reduction and scatter gradient kernels match the reference", "[runtime][kernels][training]") {
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 4, 5});
    c.run(c.b.op("fbl.ReduceSumTo", {x}, {{"shape", Ints{3, 1, 5}}}));
  }
  {
    Case c;
    auto dy = c.in("dy", DType::F32, {2, 3});
    c.run(c.b.op("fbl.SliceGrad", {dy}, {{"shape", Ints{4, 10}}, {"axes", Ints{0, 1}}, {"starts", Ints{1, 2}}, {"steps", Ints{1, 3}}}));
  }
  {
    Case c;
    auto dy = c.in("dy", DType::F32, {2, 3, 6});
    auto ids = c.in("ids", DType::I64, {2, 3}, -10, 10);  // repeats and negative indices
    c.run(c.b.op("fbl.GatherGrad", {dy, ids}, {{"axis", int64_t{0}}, {"shape", Ints{10, 6}}}));
  }
}

TEST_CASE("softmax, layer-norm and loss gradient kernels match the reference", "[runtime][kernels][training]") {
  for (int64_t axis : {-1, 1}) {
    Case c;
    auto dy = c.in("dy", DType::F32, {2, 5, 7});
    auto y = c.in("y", DType::F32, {2, 5, 7}, 0.0, 0.3);
    c.run(c.b.op("fbl.SoftmaxGrad", {dy, y}, {{"axis", axis}}));
  }
  {  // rows long enough for a work-group per row (row_tree.cl)
    Case c;
    auto dy = c.in("dy", DType::F32, {4, 611});
    auto y = c.in("y", DType::F32, {4, 611}, 0.0, 0.01);
    c.run(c.b.op("fbl.SoftmaxGrad", {dy, y}, {{"axis", int64_t{-1}}}));
  }
  {
    Case c;
    auto dy = c.in("dy", DType::F32, {3, 530});
    auto x = c.in("x", DType::F32, {3, 530}, -2, 2);
    auto s = c.in("s", DType::F32, {530});
    c.run(c.b.node("fbl.LayerNormGrad", {dy, x, s}, {{"axis", int64_t{-1}}, {"epsilon", 1e-5f}}, 3));
  }
  {
    Case c;
    auto dy = c.in("dy", DType::F32, {2, 3, 16});
    auto x = c.in("x", DType::F32, {2, 3, 16}, -2, 2);
    auto s = c.in("s", DType::F32, {16});
    c.run(c.b.node("fbl.LayerNormGrad", {dy, x, s}, {{"axis", int64_t{-1}}, {"epsilon", 1e-5f}}, 3));
  }
  {
    Case c;
    auto dl = c.in("dl", DType::F32, {}, 0.5, 2.0);
    auto x = c.in("x", DType::F32, {6, 11}, -3, 3);
    auto labels = c.in("labels", DType::I64, {6}, -1, 11);
    c.run(c.b.op("fbl.SoftmaxCrossEntropyLossGrad", {dl, x, labels},
                 {{"reduction", std::string("mean")}, {"ignore_index", int64_t{-1}}}));
  }
  {
    // More classes than a row's work-group has work-items; more rows than it too (the count).
    Case c;
    auto dl = c.in("dl", DType::F32, {}, 0.5, 2.0);
    auto x = c.in("x", DType::F32, {70, 300}, -4, 4);
    auto labels = c.in("labels", DType::I64, {70}, -1, 300);
    c.run(c.b.op("fbl.SoftmaxCrossEntropyLossGrad", {dl, x, labels},
                 {{"reduction", std::string("mean")}, {"ignore_index", int64_t{-1}}}));
  }
  {
    // Spatial dims, reduction sum.
    Case c;
    auto dl = c.in("dl", DType::F32, {}, 0.5, 2.0);
    auto x = c.in("x", DType::F32, {2, 7, 3}, -3, 3);
    auto labels = c.in("labels", DType::I64, {2, 3}, 0, 7);
    c.run(c.b.op("fbl.SoftmaxCrossEntropyLossGrad", {dl, x, labels}, {{"reduction", std::string("sum")}}));
  }
}

// The optimizer updates its parameter and state in place, and a plan may not write its inputs
// (runtime/plan_check.h): each updated operand is an input times one, computed on the device.
ir::ValueId updatable(Case& c, const std::string& name, double lo = -1.0, double hi = 1.0) {
  const ir::ValueId x = c.in(name, DType::F32, {4, 9}, lo, hi);
  const ir::ValueId one = c.in(name + "_one", DType::F32, {}, 1.0, 1.0);
  return c.b.op("Mul", {x, one});
}

TEST_CASE("optimizer kernels match the reference", "[runtime][kernels][training]") {
  {
    Case c;
    auto p = updatable(c, "p");
    auto g = c.in("g", DType::F32, {4, 9});
    auto m = updatable(c, "m");
    auto v = updatable(c, "v", 0.0, 0.1);
    auto step = c.in("step", DType::I64, {}, 3, 4);
    c.run(c.b.node("fbl.AdamW", {p, g, m, v, step},
                   {{"lr", 0.01f}, {"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-8f}, {"weight_decay", 0.1f}}, 3));
  }
  {
    // The training loop's form (compiler/autodiff/optimizer.cc): lr and grad_scale as inputs; the
    // attribute's lr must be ignored, the decay must use the input's.
    Case c;
    auto p = updatable(c, "p");
    auto g = c.in("g", DType::F32, {4, 9});
    auto m = updatable(c, "m");
    auto v = updatable(c, "v", 0.0, 0.1);
    auto step = c.in("step", DType::I64, {}, 3, 4);
    auto lr = c.in("lr", DType::F32, {}, 0.01, 0.2);
    auto scale = c.in("grad_scale", DType::F32, {}, 0.2, 1.0);
    c.run(c.b.node("fbl.AdamW", {p, g, m, v, step, lr, scale},
                   {{"lr", 5.0f}, {"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-8f}, {"weight_decay", 0.1f}}, 3));
  }
  {
    Case c;
    auto p = updatable(c, "p");
    auto g = c.in("g", DType::F32, {4, 9});
    auto buf = updatable(c, "buf");
    c.run(c.b.node("fbl.SGD", {p, g, buf}, {{"lr", 0.05f}, {"momentum", 0.9f}, {"weight_decay", 0.01f}}, 2));
  }
}

}  // namespace
}  // namespace fbl::testing
