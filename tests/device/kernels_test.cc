// Every generated OpenCL kernel against the reference executor on random data, on PoCL: each
// case is a one- or two-node graph compiled to a plan and run by the runtime.
#include "compiler/passes/decompose_ops.h"
#include "tests/device/device_test_util.h"

namespace fbl::testing {
namespace {

using ir::DType;
using ir::Tensor;

TEST_CASE("elementwise kernels broadcast like the reference", "[runtime][kernels]") {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 4});
    auto y = c.in("y", DType::F32, {3, 1}, 0.5, 2.0);
    c.run(c.b.op(op, {x, y}));
  }
  for (const char* op : {"Sqrt", "Reciprocal", "Neg", "Sigmoid", "Cos", "Sin", "Erf", "Exp", "Log", "Tanh", "Gelu"}) {
    Case c;
    auto x = c.in("x", DType::F32, {5, 7}, 0.1, 2.0);
    c.run(c.b.op(op, {x}));
  }
  // Piecewise-constant ops over both signs; Sign of integers too.
  for (const char* op : {"Sign", "Ceil", "Floor", "Round"}) {
    Case c;
    auto x = c.in("x", DType::F32, {5, 7}, -3.0, 3.0);
    c.run(c.b.op(op, {x}));
  }
  {
    Case c;
    auto x = c.in("x", DType::I64, {3, 5}, -3, 3);
    c.run(c.b.op("Sign", {x}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {4, 8}, 0.1, 2.0);
    c.run(c.b.op("Pow", {x, c.b.constant("two", Tensor::scalar<float>(2.0f))}));
  }
  {
    Case c;
    auto cond = c.in("c", DType::Bool, {4, 1});
    auto x = c.in("x", DType::F32, {4, 6});
    c.run(c.b.op("Where", {cond, x, c.b.constant("ninf", Tensor::scalar<float>(-1e9f))}));
  }
  {
    Case c;
    auto x = c.in("x", DType::I64, {3, 5}, -3, 3);
    auto y = c.in("y", DType::I64, {5}, -3, 3);
    auto eq = c.b.op("Equal", {x, y});
    auto le = c.b.op("LessOrEqual", {x, y});
    c.run(c.b.op("Cast", {c.b.op("And", {eq, c.b.op("Not", {le})})}, {{"to", int64_t{1}}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {3, 1});
    c.run(c.b.op("Expand", {x, c.b.ints<int64_t>("shape", {2, 3, 4})}));
  }
  // Four elements a work-item (kernels.elementwise_items) over 5 x 7 x 11 = 385 elements, not a
  // multiple of 4 x 64: broadcast float operands, a bool-valued comparison cast to int64, Gelu.
  {
    Case c;
    c.profile.tuning.elementwiseItems = 4;
    auto x = c.in("x", DType::F32, {5, 7, 11});
    auto y = c.in("y", DType::F32, {7, 1}, 0.5, 2.0);
    c.run(c.b.op("Gelu", {c.b.op("Div", {x, y})}));
  }
  {
    Case c;
    c.profile.tuning.elementwiseItems = 4;
    auto x = c.in("x", DType::I64, {5, 7, 11}, -3, 3);
    auto y = c.in("y", DType::I64, {11}, -3, 3);
    c.run(c.b.op("Cast", {c.b.op("Less", {x, y})}, {{"to", int64_t{7}}}));
  }
}

// f32 -> 16 bits -> f32 on the device is the reference's rounding to the bit (tolerance 0): ties
// both ways, fp16 subnormals and its largest finite value, values bf16 keeps that fp16 cannot, in
// elementwise.cl and in elementwise_items.cl.
TEST_CASE("16-bit float storage rounds to nearest even on the device as the reference does", "[runtime][kernels]") {
  const std::vector<float> edge = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256,
                                   std::ldexp(1.0f, -25), std::ldexp(3.0f, -25), std::ldexp(5.0f, -20), 65504.0f,
                                   65519.0f, -65519.0f, 1e-30f, 0.0f, -0.0f, 3.14159265f, -2.71828183f, 1e4f};
  for (const ir::DType format : {DType::F16, DType::BF16})
    for (const int64_t items : {int64_t{1}, int64_t{4}}) {
      INFO(ir::dtypeName(format) << ", " << items << " elements a work-item");
      Case c;
      c.profile.tuning.elementwiseItems = items;
      auto x = c.in("x", DType::F32, {5, 7, 3}, -4.0, 4.0);
      for (size_t k = 0; k < edge.size(); ++k) c.feeds.back().data<float>()[k * 3] = edge[k];
      auto packed = c.b.op("Cast", {x}, {{"to", int64_t(format)}});
      c.run(c.b.op("Cast", {packed}, {{"to", int64_t(DType::F32)}}), 0.0);
    }
}

TEST_CASE("movement kernels are strided copies", "[runtime][kernels]") {
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 4, 5});
    c.run(c.b.op("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {4, 10});
    c.run(c.b.op("Slice", {x, c.b.ints<int64_t>("s", {1, 2}), c.b.ints<int64_t>("e", {3, 100}),
                           c.b.ints<int64_t>("a", {0, -1}), c.b.ints<int64_t>("st", {1, 3})}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 4});
    auto y = c.in("y", DType::F32, {2, 3, 2});
    c.run(c.b.op("Concat", {x, y, x}, {{"axis", int64_t{-1}}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {3, 4});
    c.run(c.b.op("Pad", {x, c.b.ints<int64_t>("p", {1, 0, 0, 2}), c.b.constant("v", Tensor::scalar<float>(0.5f))}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 12});
    auto r = c.b.op("Reshape", {x, c.b.ints<int64_t>("s", {2, 3, 4})});
    c.run(c.b.op("Add", {r, r}));
  }
}

TEST_CASE("a MatMul scheduled as whole waves plus a split tail matches the reference", "[runtime][kernels]") {
  // Two compute units of one 64 x 64 group each: 5 column tiles are two whole waves and one
  // tile more, which the schedule runs as its own split product (codegen/matmul_tiling.h).
  plan::Profile p = testProfile();
  p.computeUnits = 2;
  p.matmul.computeUnits = 2;
  p.matmul.peakGflops = 100;
  p.matmul.bandwidthGbps = 100;
  p.matmul.candidates = {{codegen::matmulTiling(profile::DeviceClass::kCpu), 0.5, 1}};
  const codegen::MatmulSchedule sched =
      codegen::chooseMatmulSchedule(p.matmul, codegen::matmulTiling(profile::DeviceClass::kCpu), 60, 300, 480);
  REQUIRE(sched.mainCols == 256);
  REQUIRE(sched.tail.splitK > 1);
  {
    Case c;
    c.profile = p;
    auto a = c.in("a", DType::F32, {60, 480});
    auto w = c.in("w", DType::F32, {480, 300});
    c.run(c.b.op("MatMul", {a, w}));
  }
  {  // alpha and the bias run in the main launch's store and in the tail's split-K sum
    Case c;
    c.profile = p;
    auto a = c.in("a", DType::F32, {60, 480});
    auto w = c.in("w", DType::F32, {300, 480});
    auto bias = c.in("bias", DType::F32, {300});
    c.run(c.b.op("Gemm", {a, w, bias}, {{"transB", int64_t{1}}, {"alpha", 0.5f}}));
  }
}

TEST_CASE("matmul, reductions and normalizations match the reference", "[runtime][kernels]") {
  {
    Case c;
    auto a = c.in("a", DType::F32, {2, 3, 4, 5});
    auto w = c.in("w", DType::F32, {5, 6});
    c.run(c.b.op("MatMul", {a, w}));
  }
  {
    Case c;
    auto a = c.in("a", DType::F32, {2, 1, 4, 5});
    auto w = c.in("w", DType::F32, {3, 5, 6});
    c.run(c.b.op("MatMul", {a, w}));
  }
  {
    Case c;
    auto a = c.in("a", DType::F32, {4, 5});
    auto w = c.in("w", DType::F32, {6, 5});
    auto bias = c.in("bias", DType::F32, {6});
    c.run(c.b.op("Gemm", {a, w, bias}, {{"transB", int64_t{1}}, {"alpha", 0.5f}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 8});
    c.run(c.b.op("ReduceMean", {x, c.b.ints<int64_t>("ax", {-1})}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 8});
    c.run(c.b.op("ReduceSum", {x, c.b.ints<int64_t>("ax", {0, 2})}, {{"keepdims", int64_t{0}}}));
  }
  for (int64_t axis : {-1, 1}) {
    Case c;
    auto x = c.in("x", DType::F32, {2, 5, 7}, -4, 4);
    c.run(c.b.op("Softmax", {x}, {{"axis", axis}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 16});
    auto s = c.in("s", DType::F32, {16});
    auto bias = c.in("bias", DType::F32, {16});
    c.run(c.b.op("LayerNormalization", {x, s, bias}, {{"epsilon", 1e-5f}}));
  }
  {
    // Long rows: a work-group per output with a tree over its partials (reduce.cl, row_tree.cl),
    // contiguous and strided, row lengths that are not a multiple of the group size.
    Case c;
    auto x = c.in("x", DType::F32, {3, 517});
    c.run(c.b.op("ReduceSum", {x, c.b.ints<int64_t>("ax", {-1})}));
  }
  for (const char* op : {"ReduceMax", "ReduceMean"}) {
    Case c;
    auto x = c.in("x", DType::F32, {301, 5}, -3, 3);
    c.run(c.b.op(op, {x, c.b.ints<int64_t>("ax", {0})}));
  }
  for (int64_t axis : {-1, 0}) {
    Case c;
    auto x = c.in("x", DType::F32, {260, 3, 263}, -6, 6);
    c.run(c.b.op(axis == 0 ? "LogSoftmax" : "Softmax", {x}, {{"axis", axis}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {5, 700});
    auto s = c.in("s", DType::F32, {700});
    c.run(c.b.op("LayerNormalization", {x, s}, {{"epsilon", 1e-5f}}));
  }
  {
    // A work-group per row over two normalized axes (519, not a multiple of the group), with the
    // bias and the saved statistics the backward reads.
    Case c;
    auto x = c.in("x", DType::F32, {4, 3, 173}, -3, 3);
    auto s = c.in("s", DType::F32, {3, 173});
    auto bias = c.in("bias", DType::F32, {3, 173});
    c.run(c.b.node("LayerNormalization", {x, s, bias}, {{"axis", int64_t{1}}, {"epsilon", 1e-5f}}, 3));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 8, 8});
    auto w = c.in("w", DType::F32, {4, 3, 4, 4});
    auto bias = c.in("bias", DType::F32, {4});
    c.run(c.b.op("Conv", {x, w, bias}, {{"strides", std::vector<int64_t>{4, 4}}, {"kernel_shape", std::vector<int64_t>{4, 4}}}));
  }
}

TEST_CASE("ArgMax and ArgMin match the reference, ties and all, ReduceL2 runs decomposed", "[runtime][kernels]") {
  // Integers in [-3, 3] tie often: the first (or, select_last_index, the last) position wins.
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t axis : {0, -1})
      for (int64_t last : {0, 1}) {
        Case c;
        auto x = c.in("x", DType::I64, {5, 3, 9}, -3, 3);
        c.run(c.b.op(op, {x}, {{"axis", axis}, {"keepdims", axis == 0 ? int64_t{1} : int64_t{0}}, {"select_last_index", last}}));
      }
  {
    Case c;
    auto x = c.in("x", DType::F32, {4, 33}, -2, 2);
    c.run(c.b.op("ArgMax", {x}, {{"axis", int64_t{1}}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {6, 5, 7});
    auto y = c.b.op("ReduceL2", {x}, {{"axes", std::vector<int64_t>{1}}});
    for (ir::Node& n : c.b.g.nodes) REQUIRE(ops::inferNode(c.b.g, n).ok());
    REQUIRE(passes::DecomposeOps().run(c.b.g).ok());
    c.run(y);
  }
}

TEST_CASE("TopK matches the reference: rank order, ties by position, along any axis", "[runtime][kernels]") {
  for (int64_t largest : {1, 0})
    for (int64_t axis : {-1, 1}) {
      Case c;
      auto x = c.in("x", DType::I64, {3, 7, 5}, -3, 3);  // integers tie often
      c.run(c.b.node("TopK", {x, c.b.ints({3})}, {{"axis", axis}, {"largest", largest}}, 2));
    }
  Case c;
  auto x = c.in("x", DType::F32, {16, 8});  // a router: 16 tokens, 8 experts, the top 2
  c.run(c.b.node("TopK", {x, c.b.ints({2})}, {}, 2));
}

// The decompositions' ops on the device, against the reference kernels of the originals.
TEST_CASE("Instance/BatchNormalization and the pools run on the device as decompose-ops rewrites them",
          "[runtime][kernels]") {
  auto decomposed = [](Case& c, ir::ValueId y) {
    for (ir::Node& n : c.b.g.nodes) REQUIRE(ops::inferNode(c.b.g, n).ok());
    REQUIRE(passes::DecomposeOps().run(c.b.g).ok());
    c.run(y, 2e-5);
  };
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 4, 37}, -2, 3);
    decomposed(c, c.b.op("InstanceNormalization", {x, c.in("s", DType::F32, {4}), c.in("b", DType::F32, {4})}));
  }
  for (int64_t training : {1, 0}) {
    Case c;
    auto x = c.in("x", DType::F32, {3, 4, 5, 6}, -2, 3);
    decomposed(c, c.b.op("BatchNormalization", {x, c.in("s", DType::F32, {4}), c.in("b", DType::F32, {4}),
                                                 c.in("m", DType::F32, {4}), c.in("v", DType::F32, {4}, 0.5, 2)},
                         {{"training_mode", training}}));
  }
  for (const char* op : {"MaxPool", "AveragePool"}) {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 9, 10});
    decomposed(c, c.b.op(op, {x}, {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                   {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {2, 3, 9, 10});
    decomposed(c, c.b.op("GlobalAveragePool", {x}));
  }
}

TEST_CASE("a 1-D Conv runs on the device as decompose-ops rewrites it", "[runtime][kernels]") {
  Case c;
  auto x = c.in("x", DType::F32, {2, 4, 19});
  auto w = c.in("w", DType::F32, {6, 2, 5});
  auto bias = c.in("bias", DType::F32, {6});
  auto y = c.b.op("Conv", {x, w, bias},
                  {{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2}}, {"pads", std::vector<int64_t>{2, 2}}});
  for (ir::Node& n : c.b.g.nodes) REQUIRE(ops::inferNode(c.b.g, n).ok());
  REQUIRE(passes::DecomposeOps().run(c.b.g).ok());
  c.run(y);
}

TEST_CASE("an integer product has no kernel, and the plan says so", "[runtime][kernels]") {
  // The reference executor computes no integer MatMul either, so no kernel could be checked.
  Case c;
  auto a = c.in("a", DType::I32, {4, 5}, -3, 3);
  auto w = c.in("w", DType::I32, {5, 6}, -3, 3);
  CHECK_THAT(c.planError(c.b.op("MatMul", {a, w}), "int-matmul"),
             Catch::Contains("MatMul has an OpenCL kernel for float operands only"));
}

TEST_CASE("a LayerNormalization scale that only broadcasts is refused, not read out of bounds", "[runtime][kernels]") {
  // layernorm.cl reads scale[j] over the whole normalized extent (519 here, the scale has 173).
  Case c;
  auto x = c.in("x", DType::F32, {4, 3, 173});
  auto s = c.in("s", DType::F32, {173});
  CHECK_THAT(c.planError(c.b.op("LayerNormalization", {x, s}, {{"axis", int64_t{1}}}), "broadcast-scale"),
             Catch::Contains("'s' of shape [173] broadcasts to the normalized shape"));
}

TEST_CASE("Tile, Clip and Resize run on the device as decompose-ops rewrites them", "[runtime][kernels]") {
  // Gathers along inner axes with constant indices, broadcast weights, Expand over inserted axes.
  for (const char* mode : {"linear", "nearest"}) {
    Case c;
    auto x = c.in("x", DType::F32, {1, 2, 5, 7});
    auto sizes = c.b.ints<int64_t>("sizes", {1, 3, 9, 4});
    auto r = c.b.node("Resize", {x, ir::kNoValue, ir::kNoValue, sizes}, {{"mode", std::string(mode)}})[0];
    auto t = c.b.op("Tile", {r, c.b.ints<int64_t>("repeats", {2, 1, 1, 3})});
    auto y = c.b.op("Clip", {t, c.b.constant("lo", Tensor::scalar<float>(-0.3f)), c.b.constant("hi", Tensor::scalar<float>(0.5f))});
    REQUIRE(passes::DecomposeOps().run(c.b.g).ok());
    c.run(y);
  }
}

TEST_CASE("gather and loss kernels match the reference", "[runtime][kernels]") {
  {
    Case c;
    auto table = c.in("table", DType::F32, {10, 6});
    auto ids = c.in("ids", DType::I64, {2, 3}, -10, 10);
    c.run(c.b.op("Gather", {table, ids}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {3, 5});
    auto ids = c.in("ids", DType::I64, {3, 2}, 0, 5);
    c.run(c.b.op("GatherElements", {x, ids}, {{"axis", int64_t{1}}}));
  }
  {
    Case c;
    auto x = c.in("x", DType::F32, {6, 11}, -3, 3);
    auto labels = c.in("labels", DType::I64, {6}, -1, 11);  // some -1s: ignored
    c.run(c.b.op("SoftmaxCrossEntropyLoss", {x, labels}, {{"ignore_index", int64_t{-1}}}));
  }
  {
    // More classes than a row's work-group has work-items, not a multiple of it.
    Case c;
    auto x = c.in("x", DType::F32, {5, 300}, -4, 4);
    auto labels = c.in("labels", DType::I64, {5}, -1, 300);
    c.run(c.b.op("SoftmaxCrossEntropyLoss", {x, labels}, {{"ignore_index", int64_t{-1}}}));
  }
  {
    // Spatial dims (rows strided by INNER), reduction sum, and the log_prob output.
    Case c;
    auto x = c.in("x", DType::F32, {2, 7, 3}, -3, 3);
    auto labels = c.in("labels", DType::I64, {2, 3}, 0, 7);
    c.run(c.b.node("SoftmaxCrossEntropyLoss", {x, labels}, {{"reduction", std::string("sum")}}, 2));
  }
}

}  // namespace
}  // namespace fbl::testing
