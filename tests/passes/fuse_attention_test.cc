// fuse-attention against the graph it rewrites: attention blocks written the way the exporters
// write them (repeat_kv, scale, softcap, constant or input masks) are replaced by one
// fbl.Attention, and the reference executor gives the rewritten graph the loss and the
// gradients of the original (autodiff through fbl.AttentionGrad against autodiff through the
// unfused ops); central differences check fbl.AttentionGrad on its own.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <limits>

#include "compiler/autodiff/training_graph.h"
#include "compiler/passes/fuse_attention.h"
#include "compiler/ref/executor.h"
#include "tests/autodiff/tensor_diff.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using ir::ValueId;
using testing::GraphBuilder;

enum class Mask { kNone, kZeros, kCausal, kWindow, kInput, kSelectedByInput, kLeftPaddedCausalInput };

struct Case {
  int64_t batch = 2, heads = 4, kvHeads = 2, len = 7, dim = 8;
  float scale = 0.35f, softcap = 0.0f;
  Mask mask = Mask::kCausal;
  int64_t window = 3;
  bool scaleBeforeProduct = false;  // q * s and k^T * s instead of (q k^T) * s
};

struct Built {
  GraphBuilder t = GraphBuilder::inferring();
  ValueId maskInput = ir::kNoValue;
  ir::Tensor maskFeed;
};

// q, k, v are trainable ("p*"), so the gradient check reaches all three.
void build(const Case& c, Built& b) {
  GraphBuilder& t = b.t;
  const int64_t B = c.batch, H = c.heads, KV = c.kvHeads, S = c.len, D = c.dim;
  ValueId q = t.randomParam("pq", {B, H, S, D});
  ValueId k = t.randomParam("pk", {B, KV, S, D});
  ValueId v = t.randomParam("pv", {B, KV, S, D});
  auto repeatKv = [&](ValueId x) {
    if (KV == H) return x;
    ValueId u = t.op("Unsqueeze", {x, t.ints({2})});
    ValueId e = t.op("Expand", {u, t.ints({B, KV, H / KV, S, D})});
    return t.op("Reshape", {e, t.ints({B, H, S, D})});
  };
  ValueId kt = t.op("Transpose", {repeatKv(k)}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  ValueId s;
  if (c.scaleBeforeProduct) {
    const float root = std::sqrt(c.scale);
    s = t.op("MatMul", {t.op("Mul", {q, t.scalar(root)}), t.op("Mul", {kt, t.scalar(root)})});
  } else {
    s = t.op("Mul", {t.op("MatMul", {q, kt}), t.scalar(c.scale)});
  }
  if (c.softcap > 0)
    s = t.op("Mul", {t.op("Tanh", {t.op("Div", {s, t.scalar(c.softcap)})}), t.scalar(c.softcap)});
  const float low = std::numeric_limits<float>::lowest();
  if (c.mask == Mask::kInput) {
    b.maskInput = t.input("attention_mask", ir::DType::F32, {B, 1, 1, S});
    b.maskFeed = ir::Tensor(ir::DType::F32, {B, 1, 1, S});
    for (int64_t i = 0; i < B * S; ++i) b.maskFeed.data<float>()[i] = (i % S) >= S - 1 - i / S ? low : 0.0f;
    s = t.op("Add", {s, b.maskInput});
  } else if (c.mask == Mask::kLeftPaddedCausalInput) {
    // HF's eager mask for a left-padded batch: finfo.min on the future and on batch b's first b + 2
    // keys, so query rows 0..b+1 see no key; the loss weighs those rows too, as the last pad
    // position's logits are weighed by the first real token's label.
    b.maskInput = t.input("attention_mask", ir::DType::F32, {B, 1, S, S});
    b.maskFeed = ir::Tensor(ir::DType::F32, {B, 1, S, S});
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j)
          b.maskFeed.data<float>()[(bb * S + i) * S + j] = j > i || j < bb + 2 ? low : 0.0f;
    s = t.op("Add", {s, b.maskInput});
  } else if (c.mask == Mask::kSelectedByInput) {
    // The exporters' padding mask: Where(keep, 0, lowest), its fill values lifted to scalar
    // initializers (constants, not parameters).
    b.maskInput = t.input("keep", ir::DType::Bool, {B, 1, 1, S});
    b.maskFeed = ir::Tensor(ir::DType::Bool, {B, 1, 1, S});
    for (int64_t i = 0; i < B * S; ++i) b.maskFeed.set(i, (i % S) < S - 1 - i / S ? 1 : 0);
    ValueId mask = t.op("Where", {b.maskInput, t.init("val_zero", ir::Tensor::scalar<float>(0.0f)),
                                  t.init("val_lowest", ir::Tensor::scalar<float>(low))});
    s = t.op("Add", {s, mask});
  } else if (c.mask != Mask::kNone) {
    ir::Tensor m(ir::DType::F32, {1, 1, S, S});
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) {
        bool hidden = c.mask != Mask::kZeros && j > i;
        if (c.mask == Mask::kWindow) hidden = hidden || i - j >= c.window;
        m.data<float>()[i * S + j] = hidden ? low : 0.0f;
      }
    s = t.op("Add", {s, t.constant(m)});
  }
  ValueId p = t.op("Softmax", {s}, {{"axis", int64_t{-1}}});
  ValueId o = t.op("MatMul", {p, repeatKv(v)});
  t.weightedSumLoss(o);
}

std::map<ValueId, ir::Tensor> feeds(const Built& b) {
  if (b.maskInput == ir::kNoValue) return {};
  return {{b.maskInput, b.maskFeed}};
}

// Loss and d loss / d {q, k, v} through the reference executor.
std::vector<ir::Tensor> lossAndGrads(const ir::Graph& g, const std::map<ValueId, ir::Tensor>& in) {
  autodiff::TrainingOptions opts;
  opts.trainableGlobs = {"p*"};
  opts.optimizer.kind = autodiff::OptimizerKind::SGD;
  auto tg = autodiff::buildTrainingGraph(g, opts);
  INFO((tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  std::vector<ValueId> fetch{tg->loss};
  for (const auto& tp : tg->trainables) fetch.push_back(tp.grad);
  ref::Executor ex(tg->graph);
  auto r = ex.run(in, fetch);
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  return *r;
}

int countOp(const ir::Graph& g, std::string_view op) {
  int n = 0;
  for (const auto& node : g.nodes) n += !node.dead && node.op == op;
  return n;
}

const ir::Node& attentionNode(const ir::Graph& g) {
  for (const auto& n : g.nodes)
    if (!n.dead && n.op == "fbl.Attention") return n;
  FAIL("no fbl.Attention");
  return g.nodes[0];
}

// Fuses, then compares loss and gradients with the unfused graph's.
ir::Graph fuseAndCompare(const Case& c) {
  Built b;
  build(c, b);
  ir::Graph fused = b.t.g;
  passes::FuseAttention pass;
  auto changed = pass.run(fused);
  REQUIRE(changed.ok());
  INFO(pass.summary());
  CHECK(*changed);
  CHECK(countOp(fused, "fbl.Attention") == 1);
  CHECK(countOp(fused, "Softmax") == 0);
  CHECK(countOp(fused, "MatMul") == 0);
  const auto want = lossAndGrads(b.t.g, feeds(b));
  const auto got = lossAndGrads(fused, feeds(b));
  REQUIRE(want.size() == 4);
  REQUIRE(got.size() == 4);
  CHECK(std::fabs(got[0].at(0) - want[0].at(0)) <= 1e-5 * std::max(1.0, std::fabs(want[0].at(0))));
  double worst = 0;
  for (size_t i = 1; i < 4; ++i) {
    INFO("gradient " << i << ": max |fused - unfused| " << testing::maxAbsDiff(got[i], want[i]) << ", max |unfused| "
                     << testing::maxAbs(want[i]));
    CHECK(testing::maxAbsDiff(got[i], want[i]) <= 1e-5 * std::max(1.0, testing::maxAbs(want[i])));
    worst = std::max(worst, testing::maxAbsDiff(got[i], want[i]) / std::max(1e-30, testing::maxAbs(want[i])));
  }
  std::printf("fuse-attention: %s; loss %.7f vs %.7f unfused, worst gradient difference %.1e of max-abs\n",
              pass.summary().c_str(), got[0].at(0), want[0].at(0), worst);
  return fused;
}

TEST_CASE("fuse-attention: causal GQA attention becomes one fbl.Attention with the same loss and gradients",
          "[passes][attention]") {
  Case c;
  ir::Graph g = fuseAndCompare(c);
  const ir::Node& a = attentionNode(g);
  CHECK(a.attrInt("causal", 0) == 1);
  CHECK(a.attrInt("window", 0) == 0);
  CHECK(a.attrFloat("scale", 0) == Approx(c.scale));
  CHECK(g.values[a.inputs[1]].shape == ir::Shape{2, 2, 7, 8});  // k without repeat_kv
  CHECK(a.inputs.size() == 3);                                   // the mask is gone
  CHECK(countOp(g, "Expand") == 0);
}

TEST_CASE("fuse-attention: sliding window, softcap, scales on q and k, masks of every kind", "[passes][attention]") {
  SECTION("sliding window of 3 keys") {
    Case c;
    c.mask = Mask::kWindow;
    const ir::Graph fused = fuseAndCompare(c);
    const ir::Node& a = attentionNode(fused);
    CHECK(a.attrInt("window", 0) == 3);
    CHECK(a.attrInt("causal", 0) == 1);
  }
  SECTION("softcap before a causal mask (Gemma 2)") {
    Case c;
    c.softcap = 0.5f;
    c.scale = 0.9f;
    const ir::Graph fused = fuseAndCompare(c);
    const ir::Node& a = attentionNode(fused);
    CHECK(a.attrFloat("softcap", 0) == Approx(0.5f));
  }
  SECTION("q and k^T each scaled by sqrt(scale), no mask, one head per kv head") {
    Case c;
    c.scaleBeforeProduct = true;
    c.mask = Mask::kNone;
    c.kvHeads = 4;
    const ir::Graph fused = fuseAndCompare(c);
    const ir::Node& a = attentionNode(fused);
    CHECK(a.attrFloat("scale", 0) == Approx(c.scale));
  }
  SECTION("an all-zero constant mask is dropped") {
    Case c;
    c.mask = Mask::kZeros;
    const ir::Graph fused = fuseAndCompare(c);
    const ir::Node& a = attentionNode(fused);
    CHECK(a.inputs.size() == 3);
    CHECK(a.attrInt("causal", 0) == 0);
  }
  SECTION("a padding mask input stays an input, read through its broadcast") {
    Case c;
    c.mask = Mask::kInput;
    const ir::Graph fused = fuseAndCompare(c);
    const ir::Node& a = attentionNode(fused);
    CHECK(a.inputs.size() == 4);
  }
  SECTION("a left-padded causal mask input: padded rows see no key and attend uniformly") {
    Case c;
    c.mask = Mask::kLeftPaddedCausalInput;
    const ir::Graph fused = fuseAndCompare(c);
    const ir::Node& a = attentionNode(fused);
    CHECK(a.inputs.size() == 4);
    CHECK(a.attrInt("causal", 0) == 0);
  }
  SECTION("the same with a softcap (Gemma 2)") {
    Case c;
    c.mask = Mask::kLeftPaddedCausalInput;
    c.softcap = 0.5f;
    CHECK(attentionNode(fuseAndCompare(c)).attrFloat("softcap", 0) == Approx(0.5f));
  }
  SECTION("a mask selected by an input from scalar initializers stays an input") {
    Case c;
    c.mask = Mask::kSelectedByInput;
    const ir::Graph fused = fuseAndCompare(c);
    const ir::Node& a = attentionNode(fused);
    CHECK(a.inputs.size() == 4);
  }
}

TEST_CASE("fuse-attention leaves what it cannot express alone", "[passes][attention]") {
  // (q k^T + mask) * s scales the mask: not the op's form.
  GraphBuilder t = GraphBuilder::inferring();
  ValueId q = t.randomParam("pq", {1, 2, 4, 8}), k = t.randomParam("pk", {1, 2, 4, 8});
  ValueId v = t.randomParam("pv", {1, 2, 4, 8});
  ValueId s = t.op("MatMul", {q, t.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}})});
  s = t.op("Mul", {t.op("Add", {s, t.constant(t.randomTensor({1, 1, 4, 4}, -1, 1))}), t.scalar(0.5f)});
  ValueId o = t.op("MatMul", {t.op("Softmax", {s}, {{"axis", int64_t{-1}}}), v});
  t.weightedSumLoss(o);
  passes::FuseAttention pass;
  auto changed = pass.run(t.g);
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
  CHECK(pass.counts().softmaxes == 1);
}

TEST_CASE("fuse-attention leaves a mask computed from a float parameter alone", "[passes][attention]") {
  // The op has no gradient for its mask: a bias table (a parameter, not a scalar buffer) stays
  // in the unfused graph, whose autodiff can reach it.
  GraphBuilder t = GraphBuilder::inferring();
  ValueId q = t.randomParam("pq", {1, 2, 4, 8}), k = t.randomParam("pk", {1, 2, 4, 8});
  ValueId v = t.randomParam("pv", {1, 2, 4, 8});
  ValueId keep = t.input("keep", ir::DType::Bool, {1, 1, 4, 4});
  ValueId bias = t.op("Where", {keep, t.randomParam("bias_table", {1, 2, 4, 4}), t.scalar(-1e9f)});
  ValueId s = t.op("MatMul", {q, t.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}})});
  s = t.op("Add", {t.op("Mul", {s, t.scalar(0.5f)}), bias});
  t.weightedSumLoss(t.op("MatMul", {t.op("Softmax", {s}, {{"axis", int64_t{-1}}}), v}));
  passes::FuseAttention pass;
  auto changed = pass.run(t.g);
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
}

// Central differences of the fused graph's loss against fbl.AttentionGrad, with every feature on.
TEST_CASE("gradcheck: fbl.Attention (GQA, causal window, softcap, padding mask)", "[autodiff][gradcheck][attention]") {
  for (Mask mask : {Mask::kWindow, Mask::kInput}) {
    Case c;
    c.softcap = 0.8f;
    c.scale = 1.3f;
    c.mask = mask;
    Built b;
    build(c, b);
    ir::Graph fused = b.t.g;
    passes::FuseAttention pass;
    REQUIRE(pass.run(fused).ok());
    REQUIRE(countOp(fused, "fbl.Attention") == 1);
    const auto analytic = lossAndGrads(fused, feeds(b));
    ref::Executor fwd(fused);
    const double h = 1e-2;
    int index = 1;
    for (const char* name : {"pq", "pk", "pv"}) {
      const ValueId p = fused.findValue(name);
      const ir::Tensor base = *fused.values[p].data;
      const ir::Tensor& grad = analytic[index++];
      double worst = 0;
      for (int64_t e = 0; e < base.numel(); e += 7) {
        ir::Tensor plus = base, minus = base;
        plus.data<float>()[e] += static_cast<float>(h);
        minus.data<float>()[e] -= static_cast<float>(h);
        auto loss = [&](const ir::Tensor& x) {
          REQUIRE(fwd.setValue(p, x).ok());
          auto r = fwd.run(feeds(b));
          REQUIRE(r.ok());
          return r->at(0).at(0);
        };
        worst = std::max(worst, std::fabs((loss(plus) - loss(minus)) / (2 * h) - grad.at(e)));
      }
      REQUIRE(fwd.setValue(p, base).ok());
      INFO(name << ": worst |fd - analytic| " << worst << ", max |analytic| " << testing::maxAbs(grad));
      CHECK(worst <= 1e-2 * testing::maxAbs(grad) + 3e-4);
    }
  }
}

}  // namespace
}  // namespace fbl
