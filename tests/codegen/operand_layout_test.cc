// Layout-aware kernels (operand_layout.h) on PoCL against naive element-by-element references:
// random operand layouts (row-major, permuted, tile-major R-Tile buffers, and read-throughs built
// from random chains of Transpose/Reshape/Slice/Expand over those), random output layouts, for
// elementwise ops (broadcast, sign, Where, Cast, Expand, variadic Sum), batched MatMul (plain,
// transposed, broadcast batch, split-K) and the generic layout copy. Every expected value is read
// on the host through the layout's index map, the definition the kernels must agree with.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>

#include "compiler/codegen/operand_layout.h"
#include "compiler/strategy/cl_exec.h"
#include "tests/ops/graph_builder.h"

namespace fbl::codegen {
namespace {

using layout::Layout;
using layout::MovementOp;
using layout::TileSpec;
using ir::Shape;

std::unique_ptr<strategy::ClSession> openSession() {
  setenv("POCL_CACHE_DIR", FBL_SOURCE_DIR "/build-pocl-cache", 0);
  auto s = strategy::ClSession::open();
  if (!s.ok()) FAIL(s.error().message);
  return std::move(*s);
}

Layout must(Result<Layout> l) {
  if (!l.ok()) FAIL(l.error().message);
  return *l;
}

// A layout with no read-through: row-major, permuted, or an R-Tile stored tile-major.
Layout simpleLayout(const Shape& s, std::mt19937& rng) {
  if (s.empty()) return Layout::rowMajor(s);
  switch (rng() % 4) {
    case 0: return Layout::rowMajor(s);
    case 1: {
      std::vector<int64_t> perm(s.size());
      for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int64_t>(d);
      std::shuffle(perm.begin(), perm.end(), rng);
      return must(Layout::permuted(s, perm));
    }
    default: {
      const TileSpec specs[] = {TileSpec::rowStrips(4, 8), TileSpec::rowStrips(2, 4), TileSpec::rowStrips(8, 16),
                                TileSpec::blocks(4, 8, 2, 8, 1, 4)};
      TileSpec t = specs[rng() % 4];
      t.rowsAlongX = rng() % 2;
      return must(Layout::rtile(s, t, layout::Storage::Buffer));
    }
  }
}

// A layout for `s` read through a random movement chain: pick an op that produces `s`, make a
// source shape for it, lay the source out (recursively), apply the op.
Layout randomLayout(const Shape& s, std::mt19937& rng, int depth) {
  if (depth == 0 || s.empty() || rng() % 5 == 0) return simpleLayout(s, rng);
  const size_t r = s.size();
  switch (rng() % 4) {
    case 0: {  // Transpose
      std::vector<int64_t> perm(r);
      for (size_t d = 0; d < r; ++d) perm[d] = static_cast<int64_t>(d);
      std::shuffle(perm.begin(), perm.end(), rng);
      Shape src(r);
      for (size_t k = 0; k < r; ++k) src[perm[k]] = s[k];
      return must(randomLayout(src, rng, depth - 1).transpose(perm));
    }
    case 1: {  // Reshape: split a dim of even extent, or merge two neighbours
      Shape src = s;
      const size_t d = rng() % r;
      if (s[d] % 2 == 0 && s[d] > 2) {
        src[d] = 2;
        src.insert(src.begin() + static_cast<int64_t>(d) + 1, s[d] / 2);
      } else if (d + 1 < r) {
        src[d] = s[d] * s[d + 1];
        src.erase(src.begin() + static_cast<int64_t>(d) + 1);
      }
      return must(randomLayout(src, rng, depth - 1).reshape(s));
    }
    case 2: {  // Slice one axis of a larger source
      Shape src = s;
      const size_t d = rng() % r;
      const int64_t step = 1 + static_cast<int64_t>(rng() % 2), start = static_cast<int64_t>(rng() % 3);
      src[d] = start + (s[d] - 1) * step + 1 + static_cast<int64_t>(rng() % 2);
      const MovementOp op = MovementOp::slice({static_cast<int64_t>(d)}, {start}, {start + (s[d] - 1) * step + 1}, {step});
      return must(randomLayout(src, rng, depth - 1).apply(op));
    }
    default: {  // Expand a source with unit dims
      Shape src = s;
      for (int64_t& x : src)
        if (rng() % 3 == 0) x = 1;
      return must(randomLayout(src, rng, depth - 1).apply(MovementOp::expand(s)));
    }
  }
}

std::vector<int64_t> unflatten(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

// The operand index that output index `o` reads (numpy broadcast).
std::vector<int64_t> broadcastIndex(const std::vector<int64_t>& o, const Shape& in) {
  std::vector<int64_t> idx(in.size());
  const size_t lead = o.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) idx[d] = in[d] == 1 ? 0 : o[lead + d];
  return idx;
}

// Device memory of one kernel argument, as raw 32-bit words (bytes for bool).
struct Buffer {
  ir::DType dtype = ir::DType::F32;
  std::vector<float> words;  // storage; ints and bytes are reinterpreted
  double get(int64_t i) const {
    if (dtype == ir::DType::F32) return words[i];
    if (dtype == ir::DType::I32) {
      int32_t v;
      std::memcpy(&v, &words[0] + i, 4);
      return v;
    }
    return reinterpret_cast<const uint8_t*>(words.data())[i];
  }
  void set(int64_t i, double x) {
    if (dtype == ir::DType::F32) words[i] = static_cast<float>(x);
    else if (dtype == ir::DType::I32) { const int32_t v = static_cast<int32_t>(x); std::memcpy(&words[0] + i, &v, 4); }
    else reinterpret_cast<uint8_t*>(words.data())[i] = static_cast<uint8_t>(x);
  }
  static Buffer make(ir::DType t, int64_t elems) {
    Buffer b;
    b.dtype = t;
    b.words.assign(static_cast<size_t>(t == ir::DType::Bool ? (elems + 3) / 4 : elems), std::nanf(""));
    return b;
  }
};

// Runs every launch of `code`, arguments bound to `bufs` by value id (scratch allocated here);
// downloads every value buffer afterwards.
void runCode(strategy::ClSession& s, const NodeCode& code, std::map<ir::ValueId, Buffer>& bufs) {
  std::map<ir::ValueId, cl_mem> mems;
  for (auto& [v, b] : bufs) {
    auto m = s.buffer(b.words.size(), b.words.data());
    REQUIRE(m.ok());
    mems[v] = *m;
  }
  std::vector<cl_mem> scratch;
  for (const ScratchSpec& sc : code.scratch) {
    auto m = s.buffer(static_cast<size_t>(ir::numElements(sc.shape)));
    REQUIRE(m.ok());
    scratch.push_back(*m);
  }
  int k = 0;
  for (const LaunchSpec& l : code.launches) {
    RTileKernel kern;
    kern.name = "k" + std::to_string(k++) + l.entry;
    kern.source = l.source;
    for (size_t p; (p = kern.source.find("{{NAME}}")) != std::string::npos;) kern.source.replace(p, 8, "k" + std::to_string(k - 1));
    for (int64_t g : l.global) kern.global.push_back(static_cast<size_t>(g));
    for (int64_t g : l.local) kern.local.push_back(static_cast<size_t>(g));
    std::vector<cl_mem> args;
    for (const ArgRef& a : l.args) args.push_back(a.scratch ? scratch[a.index] : mems.at(a.index));
    kern.args.assign(args.size(), "arg");
    auto t = s.run(kern, args);
    INFO(kern.source);
    if (!t.ok()) FAIL(t.error().message);
  }
  for (auto& [v, b] : bufs) {
    auto r = s.readBuffer(mems[v], b.words.size());
    REQUIRE(r.ok());
    b.words = *r;
    s.release(mems[v]);
  }
  for (cl_mem m : scratch) s.release(m);
}

// A random source buffer behind an operand layout.
Buffer randomSource(const Layout& l, ir::DType t, std::mt19937& rng) {
  Buffer b = Buffer::make(t, l.bufferSize());
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (int64_t i = 0; i < l.bufferSize(); ++i) b.set(i, t == ir::DType::Bool ? rng() % 2 : u(rng));
  return b;
}

double readThrough(const Buffer& b, const Layout& l, const std::vector<int64_t>& idx,
                   const std::optional<layout::Expr>& sign) {
  const double v = b.get(l.locate(idx)[0]);
  return sign ? v * static_cast<double>(layout::eval(*sign, idx)) : v;
}

// +1 on the upper half of the last dim, -1 on the lower (RoPE's rotate_half); needs an even dim.
std::optional<layout::Expr> randomSign(const Shape& s, std::mt19937& rng) {
  if (s.empty() || s.back() % 2 != 0 || rng() % 3 != 0) return std::nullopt;
  const int d = static_cast<int>(s.size()) - 1;
  return layout::floorDiv(layout::Expr::var(d, s.back()), s.back() / 2) * 2 + (-1);
}

Shape randomShape(std::mt19937& rng, size_t minRank = 1) {
  const int64_t dims[] = {1, 2, 3, 4, 6, 8, 5, 16};
  Shape s(minRank + rng() % (5 - minRank));
  for (int64_t& x : s) x = dims[rng() % 8];
  return s;
}

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

void checkElementwise(strategy::ClSession& s, const EwCase& c, std::mt19937& rng) {
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
  auto code = emitNode(b.g, b.g.nodes.back(), Target{}, nl);
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

void checkMatmul(strategy::ClSession& s, const MmCase& c, std::mt19937& rng) {
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

void checkCopy(strategy::ClSession& s, std::mt19937& rng) {
  const Shape sh = randomShape(rng, 2);
  testing::GraphBuilder b;
  OperandLayout src;
  src.value = b.input("src", ir::DType::F32, {1});
  src.transposed = rng() % 4 == 0;
  src.layout = randomLayout(storedShape(sh, src.transposed), rng, 3);
  src.sign = randomSign(src.layout.shape(), rng);
  const Layout dst = rng() % 2 ? Layout::rowMajor(sh) : simpleLayout(sh, rng);
  std::map<ir::ValueId, Buffer> bufs{{src.value, randomSource(src.layout, ir::DType::F32, rng)}};
  const Buffer in = bufs[src.value];
  auto code = emitLayoutCopy(b.g, src, ir::DType::F32, dst, Target{});
  if (!code.ok()) FAIL(code.error().message);
  // The destination is scratch 0: give it a value id of its own.
  const ir::ValueId out = b.input("dst", ir::DType::F32, {1});
  bufs[out] = Buffer::make(ir::DType::F32, ir::numElements(code->scratch[0].shape));
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
  INFO("copy " << ir::shapeToString(sh) << " from " << src.layout.str() << (src.transposed ? " transposed" : "")
               << (src.sign ? " with sign" : "") << " to " << dst.str());
  INFO(code->launches[0].source);
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("elementwise kernels read and write through operand layouts", "[operand-layout]") {
  auto s = openSession();
  const EwCase cases[] = {{"Add", 2}, {"Mul", 2}, {"Exp", 1}, {"Where", 3}, {"Sum", 3}, {"Cast", 1}, {"Expand", 1}};
  // Each section is its own run of the test case: seed per section, not once per case.
  for (unsigned rep = 0; rep < 4; ++rep)
    for (unsigned k = 0; k < std::size(cases); ++k) {
      DYNAMIC_SECTION(cases[k].op << " #" << rep) {
        std::mt19937 rng(100 * rep + k);
        checkElementwise(*s, cases[k], rng);
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
  for (unsigned rep = 0; rep < 16; ++rep) {
    DYNAMIC_SECTION("copy #" << rep) {
      std::mt19937 rng(5000 + rep);
      checkCopy(*s, rng);
    }
  }
}

TEST_CASE("trivial layouts emit exactly the plain kernels", "[operand-layout]") {
  testing::GraphBuilder b;
  const ir::ValueId x = b.input("x", ir::DType::F32, {2, 3, 4}), w = b.input("w", ir::DType::F32, {3, 1});
  const ir::ValueId y = b.op("Add", {x, w});
  b.g.values[y].shape = {2, 3, 4};
  b.g.values[y].dtype = ir::DType::F32;
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

