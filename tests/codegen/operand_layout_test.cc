// Layout-aware kernels (operand_layout.h) on PoCL against naive element-by-element references:
// random operand layouts (row-major, permuted, tile-major R-Tile buffers, and read-throughs built
// from random chains of Transpose/Reshape/Slice/Expand over those), random output layouts, for
// elementwise ops (broadcast, sign, Where, Cast, Expand, variadic Sum), batched MatMul (plain,
// transposed, broadcast batch, split-K), Gather (its table in R-Tile buffers and images, wrapped
// ones, MNN images, TFLite textures) and the generic layout copy. Every expected value is read
// on the host through the layout's index map, the definition the kernels must agree with.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/operand_layout.h"
#include "harness/cl_session.h"
#include "tests/codegen/layout_kernel_harness.h"
#include "tests/ops/graph_builder.h"

namespace fbl::codegen {
namespace {

using namespace kernel_test;

using layout::Layout;
using layout::MovementOp;
using layout::TileSpec;
using ir::Shape;

struct EwCase {
  const char* op;
  int arity;
};

double ewRef(const std::string& op, const std::vector<double>& x) {
  if (op == "Add") return x[0] + x[1];
  if (op == "Mul") return x[0] * x[1];
  if (op == "Exp") return std::exp(x[0]);
  if (op == "Where") return x[0] != 0 ? x[1] : x[2];
  if (op == "Sum") return x[0] + x[1] + x[2];
  if (op == "Cast") return std::trunc(x[0]);
  return x[0];  // Expand
}

void checkElementwise(fbl::harness::ClSession& s, const EwCase& c, std::mt19937& rng, const Target& t) {
  const Shape out = randomShape(rng);
  testing::GraphBuilder b;
  std::vector<ir::ValueId> ins;
  std::vector<Shape> shapes;
  std::vector<ir::DType> types;
  NodeLayouts nl;
  std::map<ir::ValueId, Buffer> bufs;
  std::vector<std::optional<OperandLayout>> ols;
  for (int k = 0; k < c.arity; ++k) {
    Shape sh = out;
    for (int64_t& x : sh)
      if (rng() % 4 == 0) x = 1;
    if (rng() % 4 == 0) sh.erase(sh.begin(), sh.begin() + static_cast<int64_t>(rng() % (sh.size() + 1)));
    if (std::string(c.op) == "Expand" && rng() % 2) sh = Shape{out.back()};
    const ir::DType t = std::string(c.op) == "Where" && k == 0 ? ir::DType::Bool : ir::DType::F32;
    ins.push_back(b.input("x" + std::to_string(k), t, sh));
    shapes.push_back(sh);
    types.push_back(t);
    if (rng() % 4 == 0) {  // plain row-major, bound to itself
      bufs[ins.back()] = randomSource(Layout::rowMajor(sh), t, rng);
      nl.inputs.push_back(std::nullopt);
      continue;
    }
    // Read through a source value of its own.
    OperandLayout ol;
    ol.value = b.input("src" + std::to_string(k), t, {1});
    ol.layout = randomLayout(sh, rng, 3);
    if (t == ir::DType::F32) ol.sign = randomSign(sh, rng);
    bufs[ol.value] = randomSource(ol.layout, t, rng);
    nl.inputs.push_back(ol);
  }
  std::vector<ir::ValueId> nodeIns = ins;
  if (std::string(c.op) == "Expand") nodeIns.push_back(b.ints<int64_t>("shape", out));
  std::map<std::string, ir::AttrValue> attrs;
  if (std::string(c.op) == "Cast") attrs["to"] = int64_t{6};  // INT32
  const ir::ValueId y = b.op(c.op, nodeIns, attrs);
  const ir::DType yt = std::string(c.op) == "Cast" ? ir::DType::I32 : ir::DType::F32;
  b.g.values[y].shape = out;
  b.g.values[y].dtype = yt;
  const Layout outL = rng() % 3 == 0 ? Layout::rowMajor(out) : simpleLayout(out, rng);
  nl.outputs.push_back(outL);
  bufs[y] = Buffer::make(yt, outL.bufferSize());
  const std::map<ir::ValueId, Buffer> inputs = bufs;
  auto code = emitNode(b.g, b.g.nodes.back(), t, nl);
  if (!code.ok()) FAIL(code.error().message);
  runCode(s, *code, bufs);
  size_t bad = 0;
  for (int64_t i = 0; i < ir::numElements(out); ++i) {
    const std::vector<int64_t> o = unflatten(i, out);
    std::vector<double> x;
    for (int k = 0; k < c.arity; ++k) {
      const std::vector<int64_t> idx = broadcastIndex(o, shapes[k]);
      if (nl.inputs[k]) x.push_back(readThrough(inputs.at(nl.inputs[k]->value), nl.inputs[k]->layout, idx, nl.inputs[k]->sign));
      else x.push_back(readThrough(inputs.at(ins[k]), Layout::rowMajor(shapes[k]), idx, std::nullopt));
    }
    const double want = ewRef(c.op, x), got = bufs[y].get(outL.locate(o)[0]);
    if (!(std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want)))) ++bad;
  }
  INFO(c.op << " out " << ir::shapeToString(out) << " through " << outL.str());
  for (int k = 0; k < c.arity; ++k)
    INFO("operand " << k << " " << ir::shapeToString(shapes[k]) << (nl.inputs[k] ? " via " + nl.inputs[k]->layout.str() : " row-major")
                    << (nl.inputs[k] && nl.inputs[k]->sign ? " with sign" : ""));
  INFO((*code).launches[0].source);
  REQUIRE(bad == 0);
}

struct MmCase {
  Shape a, b;                // the node's operand shapes
  bool transA = false, transB = false;  // read through OperandLayout::transposed
  bool gemm = false;         // Gemm with transB = 1 (b is [N, K])
  int64_t computeUnits = 2;  // many: forces split-K when K is long
};

// Layout of an operand as stored: `shape`, or its last two dims swapped when read transposed.
Shape storedShape(Shape s, bool t) {
  if (t) std::swap(s[s.size() - 1], s[s.size() - 2]);
  return s;
}

void checkMatmul(fbl::harness::ClSession& s, const MmCase& c, std::mt19937& rng) {
  testing::GraphBuilder b;
  const ir::ValueId x = b.input("a", ir::DType::F32, c.a), w = b.input("b", ir::DType::F32, c.b);
  std::map<std::string, ir::AttrValue> attrs;
  if (c.gemm) attrs["transB"] = int64_t{1};
  const ir::ValueId y = b.op(c.gemm ? "Gemm" : "MatMul", {x, w}, attrs);
  // Output shape: broadcast batch, then [M, N].
  const Shape bn = c.gemm ? Shape{c.b[1], c.b[0]} : c.b;
  const int64_t M = c.a[c.a.size() - 2], K = c.a.back(), N = bn.back();
  Shape out;
  const size_t rank = std::max(c.a.size(), bn.size());
  for (size_t d = 0; d + 2 < rank; ++d) {
    auto at = [&](const Shape& sh) { return d + sh.size() >= rank ? sh[d + sh.size() - rank] : int64_t{1}; };
    out.push_back(std::max(at(c.a), at(bn)));
  }
  out.push_back(M);
  out.push_back(N);
  b.g.values[y].shape = out;
  b.g.values[y].dtype = ir::DType::F32;
  NodeLayouts nl;
  std::map<ir::ValueId, Buffer> bufs;
  const Shape* shapes[2] = {&c.a, &c.b};
  const bool trans[2] = {c.transA, c.transB};
  for (int k = 0; k < 2; ++k) {
    OperandLayout ol;
    ol.value = b.input("src" + std::to_string(k), ir::DType::F32, {1});
    ol.transposed = trans[k];
    ol.layout = randomLayout(storedShape(*shapes[k], trans[k]), rng, 2);
    bufs[ol.value] = randomSource(ol.layout, ir::DType::F32, rng);
    nl.inputs.push_back(ol);
  }
  const Layout outL = simpleLayout(out, rng);
  nl.outputs.push_back(outL);
  bufs[y] = Buffer::make(ir::DType::F32, outL.bufferSize());
  const std::map<ir::ValueId, Buffer> inputs = bufs;
  Target t;
  t.computeUnits = c.computeUnits;
  auto code = emitNode(b.g, b.g.nodes.back(), t, nl);
  if (!code.ok()) FAIL(code.error().message);
  runCode(s, *code, bufs);
  // Operand element (batch index over `out`'s batch, row, col) read through its layout.
  auto operand = [&](int k, const std::vector<int64_t>& o, int64_t r, int64_t col) {
    const OperandLayout& ol = *nl.inputs[k];
    const Shape& sh = *shapes[k];
    std::vector<int64_t> idx = broadcastIndex(std::vector<int64_t>(o.begin(), o.end() - 2),
                                              Shape(sh.begin(), sh.end() - 2));
    idx.push_back(ol.transposed ? col : r);
    idx.push_back(ol.transposed ? r : col);
    return inputs.at(ol.value).get(ol.layout.locate(idx)[0]);
  };
  size_t bad = 0;
  for (int64_t i = 0; i < ir::numElements(out); ++i) {
    const std::vector<int64_t> o = unflatten(i, out);
    const int64_t m = o[o.size() - 2], n = o.back();
    double want = 0, mag = 0;
    for (int64_t kk = 0; kk < K; ++kk) {
      const double p = operand(0, o, m, kk) * (c.gemm ? operand(1, o, n, kk) : operand(1, o, kk, n));
      want += p;
      mag += std::fabs(p);
    }
    const double got = bufs[y].get(outL.locate(o)[0]);
    if (!(std::fabs(got - want) <= 1e-5 * mag + 1e-6)) ++bad;
  }
  INFO(ir::shapeToString(c.a) << (c.transA ? "^T" : "") << " x " << ir::shapeToString(c.b) << (c.transB ? "^T" : "")
                              << (c.gemm ? " (Gemm transB)" : "") << ", " << code->launches.size() << " launches");
  INFO("lhs " << nl.inputs[0]->layout.str() << "\nrhs " << nl.inputs[1]->layout.str() << "\nout " << outL.str());
  REQUIRE(bad == 0);
}

void checkCopy(fbl::harness::ClSession& s, std::mt19937& rng, ir::DType dt, const Target& t) {
  const Shape sh = randomShape(rng, 2);
  testing::GraphBuilder b;
  OperandLayout src;
  src.value = b.input("src", dt, {1});
  src.transposed = rng() % 4 == 0;
  src.layout = randomLayout(storedShape(sh, src.transposed), rng, 3);
  src.sign = randomSign(src.layout.shape(), rng);
  const Layout dst = rng() % 2 ? Layout::rowMajor(sh) : simpleLayout(sh, rng);
  std::map<ir::ValueId, Buffer> bufs{{src.value, randomSource(src.layout, dt, rng)}};
  const Buffer in = bufs[src.value];
  auto code = emitLayoutCopy(b.g, src, dt, dst, t);
  if (!code.ok()) FAIL(code.error().message);
  // The destination is scratch 0: give it a value id of its own.
  const ir::ValueId out = b.input("dst", dt, {1});
  bufs[out] = Buffer::make(dt, ir::numElements(code->scratch[0].shape));
  NodeCode bound = *code;
  bound.scratch.clear();
  for (auto& l : bound.launches)
    for (auto& a : l.args)
      if (a.scratch) a = {false, out};
  runCode(s, bound, bufs);
  size_t bad = 0;
  for (int64_t i = 0; i < ir::numElements(sh); ++i) {
    const std::vector<int64_t> o = unflatten(i, sh);
    std::vector<int64_t> idx = src.transposed ? storedShape(o, true) : o;
    const double want = readThrough(in, src.layout, idx, src.sign), got = bufs[out].get(dst.locate(o)[0]);
    if (!(got == want)) ++bad;
  }
  INFO("copy of " << ir::dtypeName(dt) << " " << ir::shapeToString(sh) << " from " << src.layout.str() << (src.transposed ? " transposed" : "")
               << (src.sign ? " with sign" : "") << " to " << dst.str());
  INFO(code->launches[0].source);
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("elementwise kernels read and write through operand layouts", "[operand-layout]") {
  auto s = openSession();
  const EwCase cases[] = {{"Add", 2}, {"Mul", 2}, {"Exp", 1}, {"Where", 3}, {"Sum", 3}, {"Cast", 1}, {"Expand", 1}};
  // Each section is its own run of the test case: seed per section, not once per case. One
  // element a work-item, and four (elementwise_items.cl) on the same random cases.
  for (const int64_t items : {1, 4})
    for (unsigned rep = 0; rep < 4; ++rep)
      for (unsigned k = 0; k < std::size(cases); ++k) {
        DYNAMIC_SECTION(cases[k].op << " #" << rep << ", " << items << " a work-item") {
          std::mt19937 rng(100 * rep + k);
          Target t;
          t.tuning.elementwiseItems = items;
          checkElementwise(*s, cases[k], rng, t);
        }
      }
}

TEST_CASE("batched matmul reads operands through layouts", "[operand-layout]") {
  auto s = openSession();
  const MmCase cases[] = {
      {{1, 4, 16, 8}, {1, 4, 8, 16}},                 // attention scores
      {{1, 4, 16, 8}, {1, 4, 8, 16}, false, true},    // ... with K read transposed (reuse)
      {{1, 16, 64}, {64, 24}},                        // x W: batch folds into M
      {{2, 1, 5, 7}, {3, 7, 9}, true, false},         // broadcast batch, transposed lhs
      {{6, 5}, {3, 5}, false, false, true},           // Gemm transB
      {{3, 2, 9}, {9, 6}, false, true},               // folded batch, transposed rhs
      {{8, 1100}, {1100, 12}, false, false, false, 16},  // split-K
      {{2, 8, 1100}, {2, 1100, 12}, false, false, false, 16}};  // split-K per batch matrix
  for (unsigned k = 0; k < std::size(cases); ++k)
    for (unsigned rep = 0; rep < 2; ++rep) {
      const MmCase& c = cases[k];
      DYNAMIC_SECTION(ir::shapeToString(c.a) << " x " << ir::shapeToString(c.b) << " #" << rep) {
        std::mt19937 rng(1000 + 10 * k + rep);
        checkMatmul(*s, c, rng);
      }
    }
}

TEST_CASE("layout copies move every element through both layouts", "[operand-layout]") {
  auto s = openSession();
  // Floats (with RoPE's sign where the shape allows) and int32, one element a work-item and four.
  for (const int64_t items : {1, 4})
    for (const ir::DType dt : {ir::DType::F32, ir::DType::I32})
      for (unsigned rep = 0; rep < 16; ++rep) {
        DYNAMIC_SECTION("copy #" << rep << " " << ir::dtypeName(dt) << ", " << items << " a work-item") {
          std::mt19937 rng(5000 + rep);
          Target t;
          t.tuning.elementwiseItems = items;
          checkCopy(*s, rng, dt, t);
        }
      }
}

TEST_CASE("trivial layouts emit exactly the plain kernels", "[operand-layout]") {
  testing::GraphBuilder b;
  const ir::ValueId x = b.input("x", ir::DType::F32, {2, 3, 4}), w = b.input("w", ir::DType::F32, {3, 1});
  kernel_test::typedOp(b, "Add", {x, w}, {2, 3, 4});
  NodeLayouts none;
  none.inputs = {std::nullopt, std::nullopt};
  none.outputs = {std::nullopt};
  CHECK(none.trivial());
  auto a = emitNode(b.g, b.g.nodes.back(), Target{}), c = emitNode(b.g, b.g.nodes.back(), Target{}, none);
  REQUIRE((a.ok() && c.ok()));
  CHECK(a->launches[0].source == c->launches[0].source);
  // Explicit row-major layouts keep the strided fast path too.
  NodeLayouts rm;
  rm.inputs = {OperandLayout{x, Layout::rowMajor({2, 3, 4}), false, std::nullopt}, std::nullopt};
  rm.outputs = {Layout::rowMajor({2, 3, 4})};
  auto d = emitNode(b.g, b.g.nodes.back(), Target{}, rm);
  REQUIRE(d.ok());
  CHECK(d->launches[0].source == a->launches[0].source);
  CHECK(supportsOperandLayouts(b.g, b.g.nodes.back()));
}

}  // namespace fbl::codegen


namespace fbl::codegen {

TEST_CASE("a MatMul operand read through a transposing map takes the template's transposed path", "[operand-layout]") {
  // x [4, 8] @ W^T, W [12, 8] stored row-major, its Transpose folded into the read: each texel of
  // W^T's rows would be 4 elements 8 apart; read as W, transposed, they are contiguous.
  testing::GraphBuilder b;
  const ir::ValueId x = b.input("x", ir::DType::F32, {4, 8}), wt = b.input("wt", ir::DType::F32, {8, 12});
  const ir::ValueId w = b.input("w", ir::DType::F32, {12, 8});
  kernel_test::typedOp(b, "MatMul", {x, wt}, {4, 12});
  auto view = layout::Layout::rowMajor({12, 8}).transpose({1, 0});
  REQUIRE(view.ok());
  NodeLayouts nl;
  nl.inputs = {std::nullopt, OperandLayout{w, *view, false, std::nullopt}};
  nl.outputs = {std::nullopt};
  auto code = emitNode(b.g, b.g.nodes.back(), Target{}, nl);
  REQUIRE(code.ok());
  const std::string& src = code->launches[0].source;
  CHECK(src.find("#define R_T 1") != std::string::npos);
  CHECK(src.find("#define L_T 0") != std::string::npos);
  CHECK_FALSE(texelsContiguous(*view));
}

}  // namespace fbl::codegen

namespace fbl::codegen {

TEST_CASE("Gather reads its table through buffer and image layouts", "[operand-layout]") {
  // A tied embedding [V, D] stored as an R-Tile buffer, an R-Tile image (wrapped past a small
  // extent), MNN's plain image and TFLite's texture; ids [2, 3] with negative ones wrapping.
  const int64_t V = 40, D = 24;
  auto session = openSession();
  std::mt19937 rng(11);
  std::vector<Layout> layouts = {
      must(Layout::rtile({V, D}, TileSpec::rowStrips(8, 8), layout::Storage::Buffer)),
      must(Layout::rtile({V, D}, TileSpec::blocks(8, 8, 4, 4, 1, 4), layout::Storage::Image2D)),
      must(must(Layout::rtile({V, D}, TileSpec::rowStrips(8, 8), layout::Storage::Image2D)).fitImage(24, 16, 2, 8)),
      Layout::image({V, D}), Layout::texture({V, D})};
  std::vector<float> table(V * D);
  for (float& x : table) x = std::uniform_real_distribution<float>(-2, 2)(rng);
  const std::vector<int64_t> ids = {0, 39, -1, 7, 21, -40};
  for (const Layout& l : layouts) {
    INFO(l.str());
    testing::GraphBuilder b;
    const ir::ValueId data = b.input("data", ir::DType::F32, {V, D}), idx = b.input("idx", ir::DType::I64, {2, 3});
    kernel_test::typedOp(b, "Gather", {data, idx}, {2, 3, D});
    NodeLayouts nl;
    nl.inputs = {OperandLayout{data, l, false, std::nullopt}, std::nullopt};
    nl.outputs = {std::nullopt};
    REQUIRE(supportsOperandLayouts(b.g, b.g.nodes.back()));
    CHECK(readsImageTexels(b.g, b.g.nodes.back(), 0, l));
    auto code = emitNode(b.g, b.g.nodes.back(), Target{}, nl);
    if (!code.ok()) FAIL(code.error().message);
    REQUIRE(code->launches.size() == 1);
    auto dm = session->allocate(l.storage() == layout::Storage::Image2D ? l : Layout::rowMajor({l.bufferSize()}));
    REQUIRE(dm.ok());
    if (l.storage() == layout::Storage::Image2D) {
      REQUIRE(session->upload(*dm, l, table).ok());
    } else {
      std::vector<float> stored(static_cast<size_t>(l.bufferSize()), 0.0f);
      for (int64_t r = 0; r < V; ++r)
        for (int64_t c = 0; c < D; ++c) stored[l.locate(std::vector<int64_t>{r, c})[0]] = table[r * D + c];
      auto m = session->buffer(stored.size(), stored.data());
      REQUIRE(m.ok());
      session->release(*dm);
      dm = m;
    }
    auto im = session->buffer(ids.size() * 2, reinterpret_cast<const float*>(ids.data()));
    auto om = session->buffer(2 * 3 * D);
    REQUIRE((im.ok() && om.ok()));
    const LaunchSpec& ls = code->launches[0];
    RTileKernel k;
    k.name = "gather_test";
    k.source = ls.source;
    for (size_t p; (p = k.source.find("{{NAME}}")) != std::string::npos;) k.source.replace(p, 8, k.name);
    for (int64_t g : ls.global) k.global.push_back(static_cast<size_t>(g));
    for (int64_t g : ls.local) k.local.push_back(static_cast<size_t>(g));
    k.args = {"data", "idx", "out"};
    auto run = session->run(k, {*dm, *im, *om});
    INFO(k.source);
    if (!run.ok()) FAIL(run.error().message);
    auto out = session->readBuffer(*om, 2 * 3 * D);
    REQUIRE(out.ok());
    for (size_t t = 0; t < ids.size(); ++t) {
      const int64_t row = ids[t] < 0 ? ids[t] + V : ids[t];
      for (int64_t c = 0; c < D; ++c) REQUIRE((*out)[t * D + c] == table[row * D + c]);
    }
    for (cl_mem m : {*dm, *im, *om}) session->release(m);
  }
}

}  // namespace fbl::codegen

namespace fbl::codegen {

TEST_CASE("Gemm's alpha and bias run in the tiled product's store", "[operand-layout]") {
  // out = alpha * op(A) op(B) + beta * C, C of shape [N], [1, N], [M, 1], [M, N] or a scalar,
  // against a host loop.
  const int64_t M = 9, K = 7, N = 10;
  auto session = openSession();
  std::mt19937 rng(5);
  const Shape biases[] = {{N}, {1, N}, {M, 1}, {M, N}, {}};
  for (const Shape& cs : biases)
    for (const int64_t transB : {0, 1}) {
      INFO("bias " << ir::shapeToString(cs) << " transB " << transB);
      testing::GraphBuilder b;
      const ir::ValueId a = b.input("a", ir::DType::F32, {M, K});
      const ir::ValueId w = b.input("w", ir::DType::F32, transB ? Shape{N, K} : Shape{K, N});
      const ir::ValueId c = b.input("c", ir::DType::F32, cs);
      const ir::ValueId y = b.op("Gemm", {a, w, c}, {{"alpha", ir::AttrValue(0.5f)}, {"beta", ir::AttrValue(2.0f)},
                                                    {"transB", ir::AttrValue(transB)}});
      b.g.values[y].shape = {M, N};
      b.g.values[y].dtype = ir::DType::F32;
      REQUIRE(usesTiledMatmul(b.g, b.g.nodes.back()));
      auto code = emitNode(b.g, b.g.nodes.back(), Target{});
      if (!code.ok()) FAIL(code.error().message);
      std::map<ir::ValueId, Buffer> bufs;
      for (ir::ValueId v : {a, w, c}) {
        Buffer x = Buffer::make(ir::DType::F32, std::max<int64_t>(1, ir::numElements(b.g.values[v].shape)));
        for (float& f : x.words) f = std::uniform_real_distribution<float>(-1, 1)(rng);
        bufs[v] = x;
      }
      bufs[y] = Buffer::make(ir::DType::F32, M * N);
      runCode(*session, *code, bufs);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += bufs[a].words[i * K + k] * bufs[w].words[transB ? j * K + k : k * N + j];
          const int64_t ci = cs.empty() ? 0 : cs.size() == 1 ? j : (cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j);
          const double want = 0.5 * acc + 2.0 * bufs[c].words[ci];
          REQUIRE(std::fabs(bufs[y].words[i * N + j] - want) <= 1e-5 * std::max(1.0, std::fabs(want)));
        }
    }
}

}  // namespace fbl::codegen
