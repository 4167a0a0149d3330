// Shape and dtype rules of the ONNX ops, one single-node graph per case.
#include <catch2/catch.hpp>

#include <limits>
#include <optional>
#include <cstdio>
#include <random>

#include "compiler/ops/broadcast.h"
#include "compiler/ops/op_schema.h"
#include "tests/ops/graph_builder.h"

using fbl::ir::DType;
using fbl::ir::Shape;
using fbl::ir::Tensor;
namespace ir = fbl::ir;
namespace ops = fbl::ops;

namespace {

// One input of a test node: a typed run-time value, a constant, or absent.
struct Arg {
  DType dtype = DType::Undefined;
  Shape shape;
  std::optional<Tensor> data;
  bool absent = false;
};
Arg val(DType t, Shape s) { return Arg{t, std::move(s), std::nullopt, false}; }
Arg f32(Shape s) { return val(DType::F32, std::move(s)); }
Arg i64s(std::vector<int64_t> v) {
  Tensor t = Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
  return Arg{t.dtype(), t.shape(), t, false};
}
template <typename T>
Arg scalar(T v) {
  Tensor t = Tensor::scalar<T>(v);
  return Arg{t.dtype(), t.shape(), t, false};
}
Arg absent() { return Arg{DType::Undefined, {}, std::nullopt, true}; }

using Attrs = std::map<std::string, ir::AttrValue>;

struct Outcome {
  bool ok = false;
  std::string error;
  std::vector<ops::TensorType> outs;
  const ops::TensorType& out(size_t i = 0) const { return outs.at(i); }
};

Outcome infer(const std::string& op, std::vector<Arg> args, Attrs attrs = {}, int outputs = 1,
              int64_t opset = 20) {
  fbl::testing::GraphBuilder b(opset);
  std::vector<ir::ValueId> ins;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = "in" + std::to_string(i);
    if (args[i].absent) ins.push_back(ir::kNoValue);
    else if (args[i].data) ins.push_back(b.constant(name, *args[i].data));
    else ins.push_back(b.input(name, args[i].dtype, args[i].shape));
  }
  auto outs = b.node(op, ins, std::move(attrs), outputs);
  Outcome r;
  fbl::Status s = ops::validateNode(b.g, b.g.nodes[0]);
  if (s.ok()) s = ops::inferNode(b.g, b.g.nodes[0]);
  r.ok = s.ok();
  if (!s.ok()) r.error = s.error().message;
  for (ir::ValueId o : outs) r.outs.push_back({b.g.values[o].dtype, b.g.values[o].shape});
  return r;
}

Shape inferShape(const std::string& op, std::vector<Arg> args, Attrs attrs = {}) {
  Outcome r = infer(op, std::move(args), std::move(attrs));
  INFO(r.error);
  REQUIRE(r.ok);
  return r.out().shape;
}

}  // namespace

TEST_CASE("broadcastShapes matches a per-dimension reference on random shapes", "[ops]") {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 500; ++iter) {
    Shape a(rng() % 5), b(rng() % 5);
    for (auto& d : a) d = 1 + rng() % 3;
    for (auto& d : b) d = 1 + rng() % 3;
    size_t rank = std::max(a.size(), b.size());
    Shape pa(rank - a.size(), 1), pb(rank - b.size(), 1);
    pa.insert(pa.end(), a.begin(), a.end());
    pb.insert(pb.end(), b.begin(), b.end());
    std::optional<Shape> want = Shape(rank);
    for (size_t i = 0; i < rank; ++i) {
      if (pa[i] != pb[i] && pa[i] != 1 && pb[i] != 1) want.reset();
      if (!want) break;
      (*want)[i] = std::max(pa[i], pb[i]);
    }
    CAPTURE(a, b);
    REQUIRE(ops::broadcastShapes(a, b) == want);
    if (!want) continue;
    // Reading `a` through broadcastStrides must match the reference index (coordinates
    // clamped to 0 on broadcast dimensions).
    auto st = ops::broadcastStrides(a, *want);
    auto dense = ir::stridesOf(pa);
    auto outStrides = ir::stridesOf(*want);
    for (int64_t i = 0; i < ir::numElements(*want); ++i) {
      int64_t viaStrides = 0, ref = 0;
      for (size_t d = 0; d < rank; ++d) {
        int64_t coord = (i / outStrides[d]) % (*want)[d];
        viaStrides += coord * st[d];
        ref += (pa[d] == 1 ? 0 : coord) * dense[d];
      }
      REQUIRE(viaStrides == ref);
    }
  }
  CHECK(ops::broadcastsTo({3, 1}, {2, 3, 4}));
  CHECK_FALSE(ops::broadcastsTo({2, 3, 4}, {3, 1}));
}

TEST_CASE("elementwise rules broadcast and type their results", "[ops]") {
  CHECK(inferShape("Add", {f32({2, 1, 4}), f32({3, 1})}) == Shape{2, 3, 4});
  CHECK(inferShape("Max", {f32({4}), f32({3, 1}), f32({})}) == Shape{3, 4});
  auto eq = infer("Equal", {val(DType::I64, {2, 1}), val(DType::I64, {5})});
  CHECK(eq.out().dtype == DType::Bool);
  CHECK(eq.out().shape == Shape{2, 5});
  auto w = infer("Where", {val(DType::Bool, {1, 1, 4, 4}), f32({}), f32({2, 1, 1, 4})});
  CHECK(w.out().dtype == DType::F32);
  CHECK(w.out().shape == Shape{2, 1, 4, 4});
  CHECK(infer("Pow", {f32({3}), scalar<int64_t>(2)}).out().dtype == DType::F32);
  CHECK(infer("Cast", {f32({3})}, {{"to", int64_t{7}}}).out().dtype == DType::I64);
  CHECK(infer("CastLike", {f32({3}), val(DType::I32, {})}).out().dtype == DType::I32);
  auto drop = infer("Dropout", {f32({2, 3}), scalar<float>(0.f), scalar<bool>(true)}, {}, 2);
  CHECK(drop.out(1).dtype == DType::Bool);
  CHECK(drop.out(1).shape == Shape{2, 3});
  CHECK(infer("Gelu", {f32({2})}, {{"approximate", std::string("tanh")}}).ok);

  auto bad = infer("Add", {f32({2, 3}), f32({4})});
  CHECK_THAT(bad.error, Catch::Contains("node 'Add_0' (Add)") && Catch::Contains("broadcast"));
  CHECK_THAT(infer("Mul", {f32({2}), val(DType::I64, {2})}).error,
             Catch::Contains("same dtype"));
  CHECK_THAT(infer("Not", {f32({2})}).error, Catch::Contains("must be bool"));
  CHECK_THAT(infer("Sqrt", {val(DType::I64, {2})}).error, Catch::Contains("float"));
  CHECK_FALSE(infer("Gelu", {f32({2})}, {{"approximate", std::string("erf")}}).ok);
  CHECK_FALSE(infer("Cast", {f32({2})}, {{"to", int64_t{8}}}).ok);  // string
}

TEST_CASE("Reshape resolves 0 and -1, honours allowzero, needs a constant target", "[ops]") {
  CHECK(inferShape("Reshape", {f32({2, 3, 4}), i64s({0, -1})}) == Shape{2, 12});
  CHECK(inferShape("Reshape", {f32({2, 3, 4}), i64s({-1})}) == Shape{24});
  CHECK(inferShape("Reshape", {f32({2, 3, 4}), i64s({0, 0, 2, -1})}) == Shape{2, 3, 2, 2});
  CHECK(inferShape("Reshape", {f32({2, 0, 4}), i64s({0, 4})}, {{"allowzero", int64_t{1}}}) ==
        Shape{0, 4});
  CHECK_THAT(infer("Reshape", {f32({2, 3, 4}), i64s({-1, -1})}).error,
             Catch::Contains("more than one -1"));
  CHECK_THAT(infer("Reshape", {f32({2, 3, 4}), i64s({5, -1})}).error,
             Catch::Contains("cannot reshape [2,3,4]"));
  CHECK_THAT(infer("Reshape", {f32({2, 3, 4}), val(DType::I64, {2})}).error,
             Catch::Contains("'in1' (the target shape) must be a compile-time constant"));
}

TEST_CASE("Transpose, Unsqueeze, Squeeze, Concat", "[ops]") {
  CHECK(inferShape("Transpose", {f32({2, 3, 4})}) == Shape{4, 3, 2});
  CHECK(inferShape("Transpose", {f32({2, 3, 4})}, {{"perm", std::vector<int64_t>{0, 2, 1}}}) ==
        Shape{2, 4, 3});
  CHECK_FALSE(infer("Transpose", {f32({2, 3})}, {{"perm", std::vector<int64_t>{0, 0}}}).ok);
  CHECK(inferShape("Unsqueeze", {f32({3, 4}), i64s({0, -1})}) == Shape{1, 3, 4, 1});
  CHECK(inferShape("Unsqueeze", {f32({}), i64s({0})}) == Shape{1});
  CHECK_FALSE(infer("Unsqueeze", {f32({3}), i64s({0, 0})}).ok);
  CHECK(inferShape("Squeeze", {f32({1, 3, 1})}) == Shape{3});
  CHECK(inferShape("Squeeze", {f32({1, 3, 1}), i64s({-1})}) == Shape{1, 3});
  CHECK_THAT(infer("Squeeze", {f32({1, 3}), i64s({1})}).error, Catch::Contains("size 3"));
  CHECK(inferShape("Concat", {f32({2, 3}), f32({2, 5})}, {{"axis", int64_t{-1}}}) ==
        Shape{2, 8});
  CHECK_FALSE(infer("Concat", {f32({2, 3}), f32({3, 3})}, {{"axis", int64_t{1}}}).ok);
  CHECK_FALSE(infer("Concat", {f32({2, 3})}).ok);  // axis is required
}

// Slice length by walking the indices one step at a time, the way the spec describes them.
static int64_t naiveSliceLength(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::max<int64_t>(0, std::min(start, dim));
    end = std::max<int64_t>(0, std::min(end, dim));
  } else {
    start = std::max<int64_t>(0, std::min(start, dim - 1));
    end = std::max<int64_t>(-1, std::min(end, dim - 1));
  }
  int64_t n = 0;
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step) n += i >= 0 && i < dim;
  return n;
}

TEST_CASE("Slice handles negative, clamped and stepped ranges like the spec", "[ops]") {
  std::mt19937 rng(11);
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> specials = {big, -big - 1, -1, 0};
  for (int iter = 0; iter < 2000; ++iter) {
    int64_t dim = rng() % 7;
    auto pick = [&] {
      return rng() % 5 == 0 ? specials[rng() % specials.size()]
                            : static_cast<int64_t>(rng() % 19) - 9;
    };
    int64_t start = pick(), end = pick(), step = static_cast<int64_t>(rng() % 7) - 3;
    if (step == 0) step = 1;
    CAPTURE(dim, start, end, step);
    Shape got = inferShape("Slice", {f32({3, dim}), i64s({start}), i64s({end}), i64s({-1}),
                                     i64s({step})});
    REQUIRE(got == Shape{3, naiveSliceLength(dim, start, end, step)});
  }
  CHECK(inferShape("Slice", {f32({4, 6}), i64s({1, 0}), i64s({3, big})}) == Shape{2, 6});
  CHECK_THAT(infer("Slice", {f32({4}), i64s({0}), i64s({2}), i64s({0}), i64s({0})}).error,
             Catch::Contains("step is 0"));
}

TEST_CASE("Split, Pad, Expand, Trilu, CumSum", "[ops]") {
  auto even = infer("Split", {f32({6, 2})}, {}, 3);
  REQUIRE(even.ok);
  CHECK(even.out(2).shape == Shape{2, 2});
  auto uneven = infer("Split", {f32({2, 7})}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}},
                      3);
  REQUIRE(uneven.ok);
  CHECK(uneven.out(0).shape == Shape{2, 3});
  CHECK(uneven.out(2).shape == Shape{2, 1});
  auto sized = infer("Split", {f32({5}), i64s({2, 3})}, {}, 2);
  CHECK(sized.out(1).shape == Shape{3});
  CHECK_FALSE(infer("Split", {f32({5}), i64s({2, 2})}, {}, 2).ok);

  CHECK(inferShape("Pad", {f32({2, 3}), i64s({0, 1, 0, 2})}) == Shape{2, 6});
  CHECK(inferShape("Pad", {f32({2, 3}), i64s({1, 1}), scalar<float>(0.f), i64s({-1})}) ==
        Shape{2, 5});
  CHECK_THAT(infer("Pad", {f32({2}), i64s({1, 1})}, {{"mode", std::string("reflect")}}).error,
             Catch::Contains("mode 'reflect' is not supported"));
  CHECK(inferShape("Expand", {f32({3, 1}), i64s({2, 1, 4})}) == Shape{2, 3, 4});
  CHECK_FALSE(infer("Expand", {f32({3}), i64s({2})}).ok);
  CHECK(inferShape("Trilu", {f32({4, 4}), scalar<int64_t>(1)}) == Shape{4, 4});
  CHECK(inferShape("CumSum", {val(DType::I64, {1, 8}), scalar<int64_t>(1)}) == Shape{1, 8});
  CHECK_FALSE(infer("CumSum", {f32({8}), scalar<int64_t>(1)}).ok);
}

TEST_CASE("Gather, GatherElements, GatherND", "[ops]") {
  CHECK(inferShape("Gather", {f32({5, 6, 7}), val(DType::I64, {2, 3})},
                   {{"axis", int64_t{1}}}) == Shape{5, 2, 3, 7});
  CHECK(inferShape("Gather", {f32({256, 64}), val(DType::I64, {1, 16})}) == Shape{1, 16, 64});
  CHECK(inferShape("Gather", {f32({5}), scalar<int64_t>(2)}) == Shape{});
  CHECK(inferShape("GatherElements", {f32({4, 3}), val(DType::I64, {4, 1})},
                   {{"axis", int64_t{1}}}) == Shape{4, 1});
  CHECK(inferShape("GatherND", {f32({2, 3, 4}), val(DType::I64, {2, 1})},
                   {{"batch_dims", int64_t{1}}}) == Shape{2, 4});
  CHECK(inferShape("GatherND", {f32({2, 3, 4}), val(DType::I64, {5, 2})}) == Shape{5, 4});
  CHECK_FALSE(infer("GatherND", {f32({2, 3}), val(DType::I64, {5, 3})}).ok);
}

TEST_CASE("Constant, ConstantOfShape, Shape, Range", "[ops]") {
  auto c = infer("Constant", {}, {{"value_ints", std::vector<int64_t>{1, 2, 3}}});
  CHECK(c.out().dtype == DType::I64);
  CHECK(c.out().shape == Shape{3});
  CHECK(infer("Constant", {}, {{"value_float", 1.f}}).out().shape == Shape{});
  CHECK(infer("Constant", {}, {{"value", Tensor(DType::Bool, {2, 2})}}).out().dtype ==
        DType::Bool);
  CHECK_FALSE(infer("Constant", {}, {{"value_int", int64_t{1}}, {"value_float", 1.f}}).ok);
  auto cos = infer("ConstantOfShape", {i64s({2, 3})}, {{"value", Tensor(DType::I64, {1})}});
  CHECK(cos.out().dtype == DType::I64);
  CHECK(cos.out().shape == Shape{2, 3});
  CHECK(infer("ConstantOfShape", {i64s({4})}).out().dtype == DType::F32);
  auto sh = infer("Shape", {f32({2, 3, 4, 5})}, {{"start", int64_t{1}}, {"end", int64_t{-1}}});
  CHECK(sh.out().dtype == DType::I64);
  CHECK(sh.out().shape == Shape{2});
  CHECK(inferShape("Range", {scalar<int64_t>(0), scalar<int64_t>(10), scalar<int64_t>(3)}) ==
        Shape{4});
  CHECK(inferShape("Range", {scalar<int64_t>(10), scalar<int64_t>(0), scalar<int64_t>(-3)}) ==
        Shape{4});
  CHECK(inferShape("Range", {scalar<int64_t>(5), scalar<int64_t>(0), scalar<int64_t>(1)}) ==
        Shape{0});
  CHECK(inferShape("Range", {scalar<float>(0), scalar<float>(1), scalar<float>(0.25f)}) ==
        Shape{4});
  CHECK_THAT(infer("Range", {val(DType::I64, {}), scalar<int64_t>(1), scalar<int64_t>(1)}).error,
             Catch::Contains("compile-time constant"));
}

TEST_CASE("MatMul covers batched, broadcast and 1-D operands", "[ops]") {
  CHECK(inferShape("MatMul", {f32({2, 3, 4}), f32({4, 5})}) == Shape{2, 3, 5});
  CHECK(inferShape("MatMul", {f32({2, 1, 3, 4}), f32({5, 4, 6})}) == Shape{2, 5, 3, 6});
  CHECK(inferShape("MatMul", {f32({4}), f32({4, 5})}) == Shape{5});
  CHECK(inferShape("MatMul", {f32({2, 3, 4}), f32({4})}) == Shape{2, 3});
  CHECK(inferShape("MatMul", {f32({4}), f32({4})}) == Shape{});
  CHECK(inferShape("MatMul", {f32({7, 4}), f32({3, 4, 2})}) == Shape{3, 7, 2});
  CHECK_THAT(infer("MatMul", {f32({2, 3}), f32({4, 5})}).error,
             Catch::Contains("inner dimensions of [2,3] and [4,5]"));
  CHECK_FALSE(infer("MatMul", {f32({2, 3, 4}), f32({3, 4, 5})}).ok);
}

TEST_CASE("Gemm honours transA/transB and a broadcast C", "[ops]") {
  Attrs tb = {{"transB", int64_t{1}}};
  CHECK(inferShape("Gemm", {f32({3, 4}), f32({5, 4}), f32({5})}, tb) == Shape{3, 5});
  CHECK(inferShape("Gemm", {f32({4, 3}), f32({4, 5})}, {{"transA", int64_t{1}}}) == Shape{3, 5});
  CHECK_FALSE(infer("Gemm", {f32({3, 4}), f32({5, 4}), f32({3})}, tb).ok);
  CHECK_FALSE(infer("Gemm", {f32({3, 4}), f32({5, 4})}).ok);
}

// Output positions of a sliding window, counted one by one.
static int64_t naiveConvLength(int64_t in, int64_t k, int64_t padB, int64_t padE, int64_t stride,
                               int64_t dil) {
  int64_t n = 0;
  for (int64_t p = 0; p + dil * (k - 1) < in + padB + padE; p += stride) ++n;
  return n;
}

TEST_CASE("Conv output sizes (2-D and 1-D) match a sliding-window count", "[ops]") {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 300; ++iter) {
    int64_t h = 1 + rng() % 12, w = 1 + rng() % 12, kh = 1 + rng() % 4, kw = 1 + rng() % 4;
    int64_t group = 1 + rng() % 2, sh = 1 + rng() % 3, sw = 1 + rng() % 3;
    int64_t dh = 1 + rng() % 2, dw = 1 + rng() % 2;
    std::vector<int64_t> pads = {int64_t(rng() % 3), int64_t(rng() % 3), int64_t(rng() % 3),
                                 int64_t(rng() % 3)};
    int64_t oh = naiveConvLength(h, kh, pads[0], pads[2], sh, dh);
    int64_t ow = naiveConvLength(w, kw, pads[1], pads[3], sw, dw);
    Attrs a = {{"pads", pads},
               {"strides", std::vector<int64_t>{sh, sw}},
               {"dilations", std::vector<int64_t>{dh, dw}},
               {"group", group}};
    auto r = infer("Conv", {f32({2, 2 * group, h, w}), f32({4 * group, 2, kh, kw}),
                            f32({4 * group})},
                   a);
    CAPTURE(h, w, kh, kw, pads, sh, sw, dh, dw);
    if (oh == 0 || ow == 0) {
      REQUIRE_FALSE(r.ok);
      continue;
    }
    INFO(r.error);
    REQUIRE(r.ok);
    REQUIRE(r.out().shape == Shape{2, 4 * group, oh, ow});
  }
  CHECK(inferShape("Conv", {f32({2, 3, 32, 32}), f32({64, 3, 8, 8})},
                   {{"strides", std::vector<int64_t>{8, 8}},
                    {"auto_pad", std::string("VALID")}}) == Shape{2, 64, 4, 4});
  // SAME: ceil(in / stride) outputs, whatever the kernel.
  CHECK(inferShape("Conv", {f32({1, 1, 5, 6}), f32({1, 1, 3, 3})},
                   {{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2}}}) == Shape{1, 1, 3, 3});
  CHECK(inferShape("Conv", {f32({1, 1, 4, 4}), f32({1, 1, 3, 3})}, {{"auto_pad", std::string("SAME_LOWER")}}) ==
        Shape{1, 1, 4, 4});
  CHECK_THAT(infer("Conv", {f32({1, 1, 4, 4}), f32({1, 1, 3, 3})},
                   {{"auto_pad", std::string("SAME")}})
                 .error,
             Catch::Contains("auto_pad 'SAME' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"));
  // 1-D (ops/conv_1d.h): [N, C, L] * [M, C / group, K]; mixed ranks are refused.
  CHECK(inferShape("Conv", {f32({1, 3, 4}), f32({1, 3, 3})}) == Shape{1, 1, 2});
  CHECK(inferShape("Conv", {f32({2, 4, 11}), f32({6, 2, 3})},
                   {{"group", int64_t{2}}, {"strides", std::vector<int64_t>{2}}, {"dilations", std::vector<int64_t>{2}},
                    {"pads", std::vector<int64_t>{3, 1}}}) == Shape{2, 6, 6});
  CHECK_FALSE(infer("Conv", {f32({1, 3, 4}), f32({1, 3, 3, 3})}).ok);
}

TEST_CASE("Reductions take axes as attribute or input", "[ops]") {
  Attrs axes1 = {{"axes", std::vector<int64_t>{1}}};
  CHECK(infer("ReduceMean", {f32({2, 3, 4})}, axes1, 1, 17).out().shape == Shape{2, 1, 4});
  CHECK(inferShape("ReduceMean", {f32({2, 3, 4}), i64s({-1})}, {{"keepdims", int64_t{0}}}) ==
        Shape{2, 3});
  CHECK(inferShape("ReduceSum", {f32({2, 3, 4})}) == Shape{1, 1, 1});
  CHECK(inferShape("ReduceMax", {f32({2, 3, 4})}, {{"keepdims", int64_t{0}}}) == Shape{});
  CHECK(inferShape("ReduceSum", {f32({2, 3}), i64s({})}, {{"noop_with_empty_axes", int64_t{1}}}) ==
        Shape{2, 3});
  CHECK_FALSE(infer("ReduceMean", {f32({2, 3}), i64s({1})}, axes1).ok);
  CHECK_FALSE(infer("ReduceMean", {f32({2, 3}), i64s({1, 1})}).ok);
}

TEST_CASE("Softmax, LayerNormalization and SoftmaxCrossEntropyLoss", "[ops]") {
  CHECK(inferShape("Softmax", {f32({2, 4})}) == Shape{2, 4});
  CHECK_THAT(infer("LogSoftmax", {f32({2, 4})}, {{"axis", int64_t{2}}}).error,
             Catch::Contains("axis 2 is out of range for rank 2"));

  auto ln = infer("LayerNormalization", {f32({2, 5, 8}), f32({8}), f32({8})},
                  {{"epsilon", 1e-5f}}, 3);
  REQUIRE(ln.ok);
  CHECK(ln.out(0).shape == Shape{2, 5, 8});
  CHECK(ln.out(1).shape == Shape{2, 5, 1});
  CHECK(ln.out(2).dtype == DType::F32);
  auto ln1 = infer("LayerNormalization", {f32({2, 5, 8}), f32({5, 8})}, {{"axis", int64_t{1}}}, 2);
  CHECK(ln1.out(1).shape == Shape{2, 1, 1});
  CHECK_FALSE(infer("LayerNormalization", {f32({2, 5, 8}), f32({5})}).ok);

  auto mean = infer("SoftmaxCrossEntropyLoss", {f32({4, 10}), val(DType::I64, {4})},
                    {{"ignore_index", int64_t{-100}}}, 2);
  REQUIRE(mean.ok);
  CHECK(mean.out(0).shape == Shape{});
  CHECK(mean.out(1).shape == Shape{4, 10});
  auto none = infer("SoftmaxCrossEntropyLoss",
                    {f32({2, 10, 3}), val(DType::I64, {2, 3}), f32({10})},
                    {{"reduction", std::string("none")}});
  REQUIRE(none.ok);
  CHECK(none.out().shape == Shape{2, 3});
  CHECK_THAT(infer("SoftmaxCrossEntropyLoss", {f32({4, 10}), val(DType::I64, {5})}).error,
             Catch::Contains("labels [5] must be [4]"));
  CHECK_FALSE(infer("SoftmaxCrossEntropyLoss", {f32({4, 10}), val(DType::I64, {4})},
                    {{"reduction", std::string("max")}})
                  .ok);
}

TEST_CASE("validateNode names the op, node and opset of what it refuses", "[ops]") {
  auto lstm = infer("LSTM", {f32({2})});
  CHECK_THAT(lstm.error, Catch::Contains("test.onnx: node 'LSTM_0' (LSTM): op LSTM is not "
                                         "supported at opset 20") &&
                             Catch::Contains("docs/ops.md"));
  auto arity = infer("Add", {f32({2})});
  CHECK_THAT(arity.error, Catch::Contains("has 1 inputs but Add takes 2 at opset 20"));
  auto attr = infer("Relu", {f32({2})}, {{"alpha", 1.f}}, 1, 17);
  CHECK_THAT(attr.error, Catch::Contains("attribute 'alpha' is not supported by Relu at opset 17"));
  auto missing = infer("Reshape", {f32({2}), absent()});
  CHECK_THAT(missing.error, Catch::Contains("required input 1 is missing"));
  CHECK_THAT(infer("Softmax", {f32({4})}, {}, 2).error,
             Catch::Contains("has 2 outputs but Softmax produces 1"));
}

TEST_CASE("Every op the corpus uses has a schema", "[ops]") {
  for (std::string_view op :
       {"Constant", "ConstantOfShape", "Shape", "Cast", "CastLike", "Identity", "Dropout",
        "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Concat", "Slice", "Gather",
        "GatherElements", "GatherND", "Expand", "Range", "CumSum", "Where", "Equal", "Not", "And",
        "Or", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Max", "Min", "Add", "Sub",
        "Mul", "Div", "Pow", "Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Erf", "Sigmoid",
        "Tanh", "Relu", "Cos", "Sin", "Gelu", "MatMul", "Gemm", "Conv", "ReduceMean",
        "ReduceSum", "ReduceMax", "Softmax", "LogSoftmax", "LayerNormalization", "Pad",
        "SoftmaxCrossEntropyLoss", "Trilu", "Split"}) {
    CAPTURE(op);
    CHECK(ops::findSchema(op) != nullptr);
  }
  auto all = ops::supportedOps();
  CHECK(std::is_sorted(all.begin(), all.end()));
}

TEST_CASE("docs/ops.md lists every supported op", "[ops]") {
  std::FILE* f = std::fopen(FBL_SOURCE_DIR "/docs/ops.md", "rb");
  REQUIRE(f != nullptr);
  std::string doc;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) doc.append(buf, n);
  std::fclose(f);
  for (std::string_view op : ops::supportedOps()) {
    if (op.substr(0, 4) == "fbl.") continue;  // fbl's own training ops live in docs/ir.md
    std::string op1 = "| " + std::string(op) + " |", op2 = "| " + std::string(op) + ",",
                op3 = ", " + std::string(op) + " |", op4 = ", " + std::string(op) + ",";
    CAPTURE(op);
    CHECK((doc.find(op1) != std::string::npos || doc.find(op2) != std::string::npos ||
           doc.find(op3) != std::string::npos || doc.find(op4) != std::string::npos));
  }
}

TEST_CASE("hostile sizes are errors, not overflows", "[ops]") {
  const int64_t big = std::numeric_limits<int64_t>::max(), small = -big - 1;
  CHECK(inferShape("Slice", {f32({5}), i64s({big}), i64s({small}), i64s({0}), i64s({small})}) ==
        Shape{1});
  CHECK(inferShape("Slice", {f32({5}), i64s({0}), i64s({big}), i64s({0}), i64s({big})}) ==
        Shape{1});
  CHECK_THAT(infer("Range", {scalar<int64_t>(small), scalar<int64_t>(big), scalar<int64_t>(1)})
                 .error,
             Catch::Contains("too many elements"));
  CHECK_THAT(infer("Range", {scalar<float>(0), scalar<float>(1e30f), scalar<float>(1)}).error,
             Catch::Contains("too many elements"));
  CHECK_FALSE(infer("Reshape", {f32({0}), i64s({big, big, 0})}, {{"allowzero", int64_t{1}}}).ok);
  CHECK_THAT(infer("Expand", {f32({1}), i64s({1 << 30, 1 << 30})}).error,
             Catch::Contains("out of range"));
  CHECK_FALSE(infer("Pad", {f32({2}), i64s({big, big})}).ok);
  CHECK_FALSE(infer("Conv", {f32({1, 1, 4, 4}), f32({1, 1, 2, 2})},
                    {{"pads", std::vector<int64_t>{big, 0, big, 0}}})
                  .ok);
  CHECK_FALSE(infer("ConstantOfShape", {i64s({-1})}).ok);
}
