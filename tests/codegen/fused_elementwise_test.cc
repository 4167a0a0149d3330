// Fused elementwise code (fused_elementwise.h) on PoCL against naive element-by-element
// references: MatMul epilogues (chains of steps on the product, operands broadcast and read
// through random layouts, scalar constants inlined, split-K sums, folded and per-matrix batches,
// tile-major outputs), elementwise groups (random trees of producers computed in registers,
// leaves through random layouts with RoPE-style signs) and reductions computing their input.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "compiler/codegen/fused_elementwise.h"
#include "tests/codegen/layout_kernel_harness.h"
#include "tests/ops/graph_builder.h"

namespace fbl::codegen {
namespace {

using namespace kernel_test;

double refOp(const std::string& op, const std::vector<double>& x) {
  if (op == "Add") return x[0] + x[1];
  if (op == "Sub") return x[0] - x[1];
  if (op == "Mul") return x[0] * x[1];
  if (op == "Div") return x[0] / x[1];
  if (op == "Sigmoid") return 1.0 / (1.0 + std::exp(-x[0]));
  if (op == "Neg") return -x[0];
  FAIL("no reference for " << op);
  return 0;
}

// An operand of a fused op: a scalar constant (inlined), or a value read through a random layout
// (its own shape, broadcast against `out`).
struct Leaf {
  ir::ValueId value = ir::kNoValue;  // the node's input
  std::optional<OperandLayout> via;  // how the kernel reads it (nullopt: row-major `value`)
  double constant = 0;
  bool isConstant = false;
  Shape shape;
};

Leaf makeLeaf(testing::GraphBuilder& b, const Shape& out, std::mt19937& rng, std::map<ir::ValueId, Buffer>& bufs,
              const std::string& name) {
  Leaf l;
  if (rng() % 4 == 0) {
    l.isConstant = true;
    l.constant = 0.25 + static_cast<double>(rng() % 7) / 4.0;
    l.shape = {1};
    l.value = b.constant(name, ir::Tensor::fromVector<float>({1}, {static_cast<float>(l.constant)}));
    return l;
  }
  l.shape = out;
  for (int64_t& x : l.shape)
    if (rng() % 4 == 0) x = 1;  // broadcast dims (a bias, a per-row statistic)
  l.value = b.input(name, ir::DType::F32, l.shape);
  if (rng() % 3 == 0) {
    bufs[l.value] = randomSource(Layout::rowMajor(l.shape), ir::DType::F32, rng);
    return l;
  }
  OperandLayout ol;
  ol.value = b.input(name + "_src", ir::DType::F32, {1});
  ol.layout = randomLayout(l.shape, rng, 2);
  ol.sign = randomSign(l.shape, rng);
  bufs[ol.value] = randomSource(ol.layout, ir::DType::F32, rng);
  l.via = ol;
  return l;
}

double readLeaf(const Leaf& l, const std::map<ir::ValueId, Buffer>& in, const std::vector<int64_t>& o) {
  if (l.isConstant) return l.constant;
  const std::vector<int64_t> idx = broadcastIndex(o, l.shape);
  if (l.via) return readThrough(in.at(l.via->value), l.via->layout, idx, l.via->sign);
  return readThrough(in.at(l.value), Layout::rowMajor(l.shape), idx, std::nullopt);
}

struct EpilogueCase {
  Shape a, b;
  int64_t computeUnits = 2;  // many: split-K, whose sum kernel runs the epilogue
};

void checkEpilogue(fbl::harness::ClSession& s, const EpilogueCase& c, std::mt19937& rng) {
  testing::GraphBuilder b;
  std::map<ir::ValueId, Buffer> bufs;
  const ir::ValueId x = b.input("a", ir::DType::F32, c.a), w = b.input("b", ir::DType::F32, c.b);
  bufs[x] = randomSource(Layout::rowMajor(c.a), ir::DType::F32, rng);
  bufs[w] = randomSource(Layout::rowMajor(c.b), ir::DType::F32, rng);
  Shape out(c.a.begin(), c.a.end() - 1);
  out.push_back(c.b.back());
  const ir::NodeId mm = static_cast<ir::NodeId>(b.g.nodes.size());
  ir::ValueId cur = typedOp(b, "MatMul", {x, w}, out);
  NodeLayouts nl;
  nl.inputs = {std::nullopt, std::nullopt};
  const char* ops[] = {"Mul", "Add", "Sub", "Div", "Sigmoid", "Neg"};
  struct Step { std::string op; int chained; Leaf leaf; };
  std::vector<Step> steps;
  const int count = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < count; ++k) {
    Step st{ops[rng() % 6], 0, {}};
    const bool unary = st.op == "Sigmoid" || st.op == "Neg";
    std::vector<ir::ValueId> ins{cur};
    if (!unary) {
      st.leaf = makeLeaf(b, out, rng, bufs, "e" + std::to_string(k));
      if (st.op == "Div") {  // keep divisors away from 0: |d| in [1, 3]
        for (auto& [v, buf] : bufs)
          if (v == st.leaf.value || (st.leaf.via && v == st.leaf.via->value))
            for (float& f : buf.words) f = std::copysign(1.0f + std::fabs(f), f);
      }
      st.chained = st.op == "Div" ? 0 : static_cast<int>(rng() % 2);  // never divide by the product
      ins = st.chained == 0 ? std::vector<ir::ValueId>{cur, st.leaf.value} : std::vector<ir::ValueId>{st.leaf.value, cur};
    }
    const ir::NodeId node = static_cast<ir::NodeId>(b.g.nodes.size());
    cur = typedOp(b, st.op, ins, out);
    FusedOp f{node, st.chained, std::vector<std::optional<OperandLayout>>(ins.size())};
    if (!unary) f.inputs[1 - st.chained] = st.leaf.via;
    nl.epilogue.push_back(f);
    steps.push_back(st);
  }
  nl.epilogueOutput = cur;
  const Layout outL = rng() % 2 ? Layout::rowMajor(out) : simpleLayout(out, rng);
  nl.outputs = {outL};
  bufs[cur] = Buffer::make(ir::DType::F32, outL.bufferSize());
  const std::map<ir::ValueId, Buffer> inputs = bufs;
  Target t;
  t.computeUnits = c.computeUnits;
  auto code = emitNode(b.g, b.g.nodes[mm], t, nl);
  if (!code.ok()) FAIL(code.error().message);
  runCode(s, *code, bufs);
  const int64_t K = c.a.back();
  size_t bad = 0;
  for (int64_t i = 0; i < ir::numElements(out); ++i) {
    const std::vector<int64_t> o = unflatten(i, out);
    std::vector<int64_t> ai = o, bi(c.b.size());
    double v = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      ai.back() = k;
      bi = broadcastIndex(o, c.b);
      bi[bi.size() - 2] = k;
      bi.back() = o.back();
      const double p = inputs.at(x).get(Layout::rowMajor(c.a).locate(ai)[0]) *
                       inputs.at(w).get(Layout::rowMajor(c.b).locate(bi)[0]);
      v += p;
      mag += std::fabs(p);
    }
    for (const Step& st : steps) {
      if (st.op == "Sigmoid" || st.op == "Neg") {
        v = refOp(st.op, {v});
        continue;
      }
      const double e = readLeaf(st.leaf, inputs, o);
      v = st.chained == 0 ? refOp(st.op, {v, e}) : refOp(st.op, {e, v});
      mag = std::max(mag, 1.0) * 4;
    }
    const double got = bufs[cur].get(outL.locate(o)[0]);
    if (!(std::fabs(got - v) <= 1e-5 * mag + 1e-5)) ++bad;
  }
  std::string chain;
  for (const Step& st : steps) chain += " " + st.op + (st.chained ? "(e, y)" : "(y, e)");
  INFO(ir::shapeToString(c.a) << " x " << ir::shapeToString(c.b) << " then" << chain << ", out " << outL.str() << ", "
                              << code->launches.size() << " launches");
  INFO(code->launches.back().source);
  REQUIRE(bad == 0);
}

// A random tree of float elementwise nodes, all of shape `out`; every non-leaf but the root is
// inlined into the root's kernel.
void checkGroup(fbl::harness::ClSession& s, std::mt19937& rng, int64_t items) {
  const Shape out = randomShape(rng, 2);
  testing::GraphBuilder b;
  std::map<ir::ValueId, Buffer> bufs;
  std::map<ir::ValueId, Leaf> leaves;
  NodeLayouts nl;
  std::vector<ir::NodeId> members;
  struct Made { ir::ValueId value; std::function<double(const std::map<ir::ValueId, Buffer>&, const std::vector<int64_t>&)> ref; };
  int leafCount = 0;
  std::function<Made(int)> make = [&](int depth) -> Made {
    if (depth == 0 || rng() % 4 == 0) {
      Leaf l = makeLeaf(b, out, rng, bufs, "l" + std::to_string(leafCount++));
      leaves[l.value] = l;
      return {l.value, [l](const std::map<ir::ValueId, Buffer>& in, const std::vector<int64_t>& o) {
                return readLeaf(l, in, o);
              }};
    }
    const char* ops[] = {"Mul", "Add", "Sub", "Sigmoid", "Neg"};
    const std::string op = ops[rng() % 5];
    std::vector<Made> kids{make(depth - 1)};
    if (op != "Sigmoid" && op != "Neg") kids.push_back(make(depth - 1));
    std::vector<ir::ValueId> ins;
    for (const Made& k : kids) ins.push_back(k.value);
    members.push_back(static_cast<ir::NodeId>(b.g.nodes.size()));
    const ir::ValueId y = typedOp(b, op, ins, out);
    return {y, [op, kids](const std::map<ir::ValueId, Buffer>& in, const std::vector<int64_t>& o) {
              std::vector<double> x;
              for (const Made& k : kids) x.push_back(k.ref(in, o));
              return refOp(op, x);
            }};
  };
  Made root = make(3);
  while (members.empty()) root = make(3);  // a lone leaf: nothing to fuse, draw again
  const ir::NodeId rootNode = members.back();
  members.pop_back();
  auto layoutsOf = [&](ir::NodeId id) {
    std::vector<std::optional<OperandLayout>> v;
    for (ir::ValueId in : b.g.nodes[id].inputs) v.push_back(leaves.count(in) ? leaves[in].via : std::nullopt);
    return v;
  };
  std::sort(members.begin(), members.end());
  for (ir::NodeId m : members) nl.inlined.push_back({m, -1, layoutsOf(m)});
  nl.inputs = layoutsOf(rootNode);
  const Layout outL = rng() % 2 ? Layout::rowMajor(out) : simpleLayout(out, rng);
  nl.outputs = {outL};
  bufs[root.value] = Buffer::make(ir::DType::F32, outL.bufferSize());
  const std::map<ir::ValueId, Buffer> inputs = bufs;
  Target t;
  t.tuning.elementwiseItems = items;
  auto code = emitNode(b.g, b.g.nodes[rootNode], t, nl);
  if (!code.ok()) FAIL(code.error().message);
  REQUIRE(code->launches.size() == 1);
  runCode(s, *code, bufs);
  size_t bad = 0;
  for (int64_t i = 0; i < ir::numElements(out); ++i) {
    const std::vector<int64_t> o = unflatten(i, out);
    const double want = root.ref(inputs, o), got = bufs[root.value].get(outL.locate(o)[0]);
    if (!(std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want)))) ++bad;
  }
  INFO(members.size() + 1 << " ops over " << leafCount << " leaves, out " << ir::shapeToString(out) << " through "
                          << outL.str());
  INFO(code->launches[0].source);
  REQUIRE(bad == 0);
}

// A reduction (ReduceSum / ReduceMean over random axes, or fbl.ReduceSumTo) whose input is
// computed per element by fused producers: Op2(Op1(l0, l1), l2).
void checkReduceGroup(fbl::harness::ClSession& s, std::mt19937& rng, const std::string& op) {
  const Shape in = randomShape(rng, 2);
  testing::GraphBuilder b;
  std::map<ir::ValueId, Buffer> bufs;
  Leaf l0 = makeLeaf(b, in, rng, bufs, "l0"), l1 = makeLeaf(b, in, rng, bufs, "l1"), l2 = makeLeaf(b, in, rng, bufs, "l2");
  const char* ops1[] = {"Mul", "Add", "Sub"};
  const std::string op1 = ops1[rng() % 3], op2 = rng() % 2 ? "Mul" : "Sigmoid";
  const ir::NodeId n1 = static_cast<ir::NodeId>(b.g.nodes.size());
  const ir::ValueId p = typedOp(b, op1, {l0.value, l1.value}, in);
  const ir::NodeId n2 = static_cast<ir::NodeId>(b.g.nodes.size());
  const ir::ValueId q = op2 == "Mul" ? typedOp(b, op2, {p, l2.value}, in) : typedOp(b, op2, {p}, in);
  std::vector<bool> reduced(in.size());
  Shape out;
  std::vector<int64_t> axes;
  const size_t always = rng() % in.size();  // empty axes would mean "all" to ReduceSum
  for (size_t d = 0; d < in.size(); ++d) {
    reduced[d] = d == always || rng() % 2 == 0;
    if (reduced[d]) axes.push_back(static_cast<int64_t>(d));
    out.push_back(reduced[d] ? 1 : in[d]);  // keepdims; ReduceSumTo's target keeps unit dims too
  }
  const ir::NodeId rn = static_cast<ir::NodeId>(b.g.nodes.size());
  const ir::ValueId y = op == "fbl.ReduceSumTo" ? typedOp(b, op, {q, b.ints<int64_t>("shape", out)}, out)
                                                : typedOp(b, op, {q, b.ints<int64_t>("axes", axes)}, out);
  NodeLayouts nl;
  nl.inputs = std::vector<std::optional<OperandLayout>>(b.g.nodes[rn].inputs.size());
  nl.outputs = {std::nullopt};
  auto layoutsOf = [&](ir::NodeId id) {
    std::vector<std::optional<OperandLayout>> v;
    for (ir::ValueId x : b.g.nodes[id].inputs)
      v.push_back(x == l0.value ? l0.via : x == l1.value ? l1.via : x == l2.value ? l2.via : std::nullopt);
    return v;
  };
  nl.inlined = {{n1, -1, layoutsOf(n1)}, {n2, -1, layoutsOf(n2)}};
  bufs[y] = Buffer::make(ir::DType::F32, ir::numElements(out));
  const std::map<ir::ValueId, Buffer> inputs = bufs;
  auto code = emitNode(b.g, b.g.nodes[rn], Target{}, nl);
  if (!code.ok()) FAIL(code.error().message);
  runCode(s, *code, bufs);
  std::vector<double> want(static_cast<size_t>(ir::numElements(out)), 0.0);
  int64_t count = 1;
  for (size_t d = 0; d < in.size(); ++d) count *= reduced[d] ? in[d] : 1;
  for (int64_t i = 0; i < ir::numElements(in); ++i) {
    const std::vector<int64_t> o = unflatten(i, in);
    const double pv = refOp(op1, {readLeaf(l0, inputs, o), readLeaf(l1, inputs, o)});
    const double qv = op2 == "Mul" ? refOp("Mul", {pv, readLeaf(l2, inputs, o)}) : refOp("Sigmoid", {pv});
    std::vector<int64_t> oi = o;
    for (size_t d = 0; d < in.size(); ++d)
      if (reduced[d]) oi[d] = 0;
    want[static_cast<size_t>(Layout::rowMajor(out).locate(oi)[0])] += qv;
  }
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = op == "ReduceMean" ? want[i] / static_cast<double>(count) : want[i];
    if (!(std::fabs(bufs[y].get(static_cast<int64_t>(i)) - w) <= 1e-4 * (1 + std::fabs(w)))) ++bad;
  }
  INFO(op << " of " << op2 << "(" << op1 << "(...)) over " << ir::shapeToString(in) << " -> " << ir::shapeToString(out));
  INFO(code->launches[0].source);
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("reductions compute their fused producers per reduced element", "[fusion]") {
  auto s = openSession();
  const char* ops[] = {"ReduceSum", "ReduceMean", "fbl.ReduceSumTo"};
  for (unsigned k = 0; k < 3; ++k)
    for (unsigned rep = 0; rep < 4; ++rep) {
      DYNAMIC_SECTION(ops[k] << " #" << rep) {
        std::mt19937 rng(9000 + 10 * k + rep);
        checkReduceGroup(*s, rng, ops[k]);
      }
    }
}

TEST_CASE("MatMul epilogues apply fused steps before the store", "[fusion]") {
  auto s = openSession();
  const EpilogueCase cases[] = {
      {{12, 20}, {20, 28}},                 // one matrix, ragged tiles
      {{2, 16, 24}, {24, 36}},              // the batch folds into M
      {{2, 3, 8, 16}, {2, 3, 16, 8}},       // per-matrix batch (attention scores)
      {{8, 1100}, {1100, 12}, 16},          // split-K: the epilogue runs in the sum
      {{2, 8, 1100}, {2, 1100, 12}, 16}};   // split-K per batch matrix
  for (unsigned k = 0; k < std::size(cases); ++k)
    for (unsigned rep = 0; rep < 3; ++rep) {
      DYNAMIC_SECTION(ir::shapeToString(cases[k].a) << " x " << ir::shapeToString(cases[k].b) << " #" << rep) {
        std::mt19937 rng(7000 + 10 * k + rep);
        checkEpilogue(*s, cases[k], rng);
      }
    }
}

TEST_CASE("elementwise groups compute their fused producers in registers", "[fusion]") {
  auto s = openSession();
  // One element a work-item, and four (elementwise_items.cl): the same random groups.
  for (const int64_t items : {1, 4})
    for (unsigned rep = 0; rep < 12; ++rep) {
      DYNAMIC_SECTION("group #" << rep << ", " << items << " a work-item") {
        std::mt19937 rng(8000 + rep);
        checkGroup(*s, rng, items);
      }
    }
}

TEST_CASE("fused code refuses what it cannot compute", "[fusion]") {
  testing::GraphBuilder b;
  const ir::ValueId x = b.input("x", ir::DType::F32, {4, 4}), w = b.input("w", ir::DType::F32, {4, 4});
  const ir::ValueId y = typedOp(b, "MatMul", {x, w}, {4, 4});
  const ir::ValueId z = typedOp(b, "Add", {y, x}, {4, 4});
  NodeLayouts nl;
  nl.inputs = {std::nullopt, std::nullopt};
  nl.epilogue.push_back({1, -1, {std::nullopt, std::nullopt}});  // no chained slot
  nl.epilogueOutput = z;
  auto code = emitNode(b.g, b.g.nodes[0], Target{}, nl);
  REQUIRE_FALSE(code.ok());
  CHECK_THAT(code.error().message, Catch::Contains("chained slot"));
  // An epilogue on an op that is not a tiled MatMul.
  NodeLayouts on;
  on.inputs = {std::nullopt, std::nullopt};
  on.epilogue = nl.epilogue;
  auto bad = emitNode(b.g, b.g.nodes[1], Target{}, on);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("only the tiled MatMul"));
}

}  // namespace fbl::codegen
