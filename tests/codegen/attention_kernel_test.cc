// The flash-attention kernel pair (codegen/attention_emitters.cc, kernels_cl/flash_attention*.cl)
// on PoCL against the reference executor's fbl.Attention and fbl.AttentionGrad, element by
// element: o, lse, dq, dk, dv. Cases cover GQA (4 query heads on 2 key/value heads), causal,
// a sliding window shorter than the sequence, softcap, padding masks read through their
// broadcast, left-padded batches whose padded rows see no key, lengths that are not a multiple
// of the tile, queries and keys of different lengths (cross-attention), head_dim 16, 32, 64 and 256 (head dims staged in chunks), q read through
// a transposed view, an unwanted dk, head dims that are not powers of two; each with the CPU
// tiling and with the GPU tilings of phones and of the H200 (wider work-groups, tiles sized to
// local memory, GQA heads split over work-groups).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/operand_layout.h"
#include "compiler/ref/kernels.h"
#include "harness/cl_session.h"
#include "tests/ops/graph_builder.h"

namespace fbl::testing {
namespace {

using ir::DType;
using ir::Shape;

struct AttnCase {
  int64_t batch = 2, heads = 4, kvHeads = 2, qLen = 19, kvLen = 19, dim = 32, valueDim = 32;
  float scale = 0.2f, softcap = 0.0f;
  bool causal = true;
  int64_t window = 0;
  Shape mask;                 // empty: none
  bool padLastBatch = false;  // the mask hides every key of the last batch: its rows are fully padded
  // Left padding, HF's way: batch b's first leftPad[b] keys are hidden by finfo.min; with
  // maskCausal the mask [B, 1, Sq, Sk] hides the future too (causal stays off), so each padded
  // query row sees no key at all and attends uniformly to every key.
  std::vector<int64_t> leftPad;
  bool maskCausal = false;
  bool transposedQ = false;   // q stored as [B, S, H, D], read through the transposed view
  bool wantDk = true;
};

harness::ClSession& session() {
  static std::unique_ptr<fbl::harness::ClSession> s = [] {
    setenv("POCL_CACHE_DIR", FBL_SOURCE_DIR "/build-pocl-cache", 0);
    auto r = fbl::harness::ClSession::open();
    if (!r.ok()) FAIL(r.error().message);
    return std::move(*r);
  }();
  return *s;
}

ir::Tensor randomTensor(const Shape& s, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  ir::Tensor t(DType::F32, s);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Runs node `n`'s launches with `values` bound to its argument values (scratch allocated);
// returns the contents of `outs` afterwards.
std::map<ir::ValueId, std::vector<float>> runOnDevice(const ir::Graph& g, const ir::Node& n,
                                                      const codegen::NodeLayouts& layouts,
                                                      const std::map<ir::ValueId, ir::Tensor>& values,
                                                      const std::vector<ir::ValueId>& outs, const codegen::Target& t) {
  auto code = codegen::emitAttention(g, n, t, &layouts);
  INFO((code.ok() ? std::string() : code.error().message));
  REQUIRE(code.ok());
  auto& s = session();
  std::map<ir::ValueId, cl_mem> mem;
  for (const auto& [v, tensor] : values) {
    auto b = s.buffer(tensor.numel(), tensor.data<float>());
    REQUIRE(b.ok());
    mem[v] = *b;
  }
  for (ir::ValueId v : outs) {
    auto b = s.buffer(ir::numElements(g.values[v].shape));
    REQUIRE(b.ok());
    mem[v] = *b;
  }
  std::vector<cl_mem> scratch;
  for (const codegen::ScratchSpec& sp : code->scratch) {
    auto b = s.buffer(ir::numElements(sp.shape));
    REQUIRE(b.ok());
    scratch.push_back(*b);
  }
  for (const codegen::LaunchSpec& l : code->launches) {
    codegen::RTileKernel k;
    k.name = "k" + l.entry;
    k.source = l.source + "\n// entry " + k.name + "\n";  // ClSession caches by source
    for (size_t p; (p = k.source.find("{{NAME}}")) != std::string::npos;) k.source.replace(p, 8, "k");
    k.global.assign(l.global.begin(), l.global.end());
    k.local.assign(l.local.begin(), l.local.end());
    k.args.assign(l.args.size(), "buffer");
    std::vector<cl_mem> args;
    for (const codegen::ArgRef& a : l.args) args.push_back(a.scratch ? scratch.at(a.index) : mem.at(a.index));
    auto ran = s.run(k, args);
    INFO(l.entry << ": " << (ran.ok() ? std::string() : ran.error().message));
    REQUIRE(ran.ok());
  }
  std::map<ir::ValueId, std::vector<float>> got;
  for (ir::ValueId v : outs) {
    auto r = s.readBuffer(mem[v], ir::numElements(g.values[v].shape));
    REQUIRE(r.ok());
    got[v] = *r;
  }
  for (auto& [v, m] : mem) s.release(m);
  for (cl_mem m : scratch) s.release(m);
  return got;
}

double maxError(const std::vector<float>& got, const ir::Tensor& want, double* scale) {
  REQUIRE(static_cast<int64_t>(got.size()) == want.numel());
  double err = 0;
  *scale = 1.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    *scale = std::max(*scale, std::fabs(want.at(i)));
    err = std::max(err, std::fabs(got[i] - want.at(i)));
  }
  return err;
}

double gWorst = 0;  // the largest error relative to the reference's scale, over all cases

void check(std::vector<float> got, ir::Tensor want, const std::string& what) {
  if (what == "lse") {
    // A row whose every visible key a finfo.min mask hides has the row max finfo.min in both;
    // its log-sum, and every other row's lse, are compared like any value.
    for (int64_t i = 0; i < want.numel(); ++i)
      if (want.at(i) < -1e30) {
        CHECK(got[i] == want.at(i));
        got[i] = 0.0f;
        want.data<float>()[i] = 0.0f;
      }
  }
  double scale = 1;
  const double err = maxError(got, want, &scale);
  gWorst = std::max(gWorst, err / scale);
  INFO(what << ": max error " << err << " (scale " << scale << ")");
  CHECK(err <= 2e-5 * scale);
}

void runCase(const AttnCase& c, const codegen::Target& target, unsigned seed) {
  std::mt19937 rng(seed);
  GraphBuilder b;
  const Shape qs{c.batch, c.heads, c.qLen, c.dim}, ks{c.batch, c.kvHeads, c.kvLen, c.dim},
      vs{c.batch, c.kvHeads, c.kvLen, c.valueDim}, os{c.batch, c.heads, c.qLen, c.valueDim};
  std::map<ir::ValueId, ir::Tensor> val;
  auto input = [&](const std::string& name, const Shape& s) {
    const ir::ValueId v = b.input(name, DType::F32, s);
    val[v] = randomTensor(s, rng);
    return v;
  };
  const ir::ValueId q = input("q", qs), k = input("k", ks), v = input("v", vs);
  ir::ValueId mask = ir::kNoValue;
  if (!c.mask.empty()) {
    mask = input("mask", c.mask);
    ir::Tensor& m = val[mask];
    const float low = std::numeric_limits<float>::lowest();
    if (!c.leftPad.empty()) {
      // Zeros where visible; c.mask is [B, 1, 1, Sk] or [B, 1, Sq, Sk].
      const int64_t rows = c.mask[2], cols = c.mask[3];
      for (int64_t bb = 0; bb < c.batch; ++bb)
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            m.data<float>()[(bb * rows + i) * cols + j] = j < c.leftPad[bb] || (c.maskCausal && j > i) ? low : 0.0f;
    } else {
      // Random biases, a third of them hiding their key as HF's finfo.min does.
      for (int64_t i = 0; i < m.numel(); ++i)
        if (i % 3 == 1 || (c.padLastBatch && i >= m.numel() / c.batch * (c.batch - 1))) m.data<float>()[i] = low;
    }
  }
  std::map<std::string, ir::AttrValue> attrs{{"scale", c.scale}, {"causal", int64_t{c.causal}}, {"window", c.window}};
  if (c.softcap > 0) attrs["softcap"] = c.softcap;
  ir::Graph& g = b.g;
  auto addNode = [&](const std::string& op, std::vector<ir::ValueId> ins, std::vector<std::pair<std::string, Shape>> outs) {
    ir::Node n;
    n.op = op;
    n.name = op;
    n.inputs = std::move(ins);
    n.attrs = attrs;
    for (const auto& [name, s] : outs)
      n.outputs.push_back(name.empty() ? ir::kNoValue : g.newValue(name, DType::F32, s, true));
    return g.addNode(n);
  };
  std::vector<ir::ValueId> fin{q, k, v};
  if (mask != ir::kNoValue) fin.push_back(mask);
  const ir::NodeId fwd = addNode("fbl.Attention", fin, {{"o", os}, {"lse", {c.batch, c.heads, c.qLen, 2}}});
  const ir::ValueId o = g.nodes[fwd].outputs[0], lse = g.nodes[fwd].outputs[1];
  auto ref = [&](ir::NodeId id) {
    std::vector<const ir::Tensor*> in;
    for (ir::ValueId x : g.nodes[id].inputs) in.push_back(&val.at(x));
    auto r = ref::evalNode(g, g.nodes[id], in);
    INFO((r.ok() ? std::string() : r.error().message));
    REQUIRE(r.ok());
    return *r;
  };
  auto fwdRef = ref(fwd);
  val[o] = fwdRef[0];
  val[lse] = fwdRef[1];
  const ir::ValueId dO = input("dO", os);
  std::vector<ir::ValueId> bin{dO, q, k, v, o, lse};
  if (mask != ir::kNoValue) bin.push_back(mask);
  const ir::NodeId bwd = addNode("fbl.AttentionGrad", bin, {{"dq", qs}, {c.wantDk ? "dk" : "", ks}, {"dv", vs}});
  auto bwdRef = ref(bwd);

  // q stored as [B, S, H, D]: the kernels read the transposed view of that buffer.
  codegen::NodeLayouts fl, bl;
  fl.inputs.resize(g.nodes[fwd].inputs.size());
  bl.inputs.resize(g.nodes[bwd].inputs.size());
  std::map<ir::ValueId, ir::Tensor> devIn;
  for (ir::ValueId x : fin) devIn[x] = val[x];
  if (c.transposedQ) {
    const ir::ValueId stored = b.input("q_bshd", DType::F32, {c.batch, c.qLen, c.heads, c.dim});
    ir::Tensor t(DType::F32, g.values[stored].shape);
    const ir::Tensor& qt = val[q];
    for (int64_t bb = 0; bb < c.batch; ++bb)
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t i = 0; i < c.qLen; ++i)
          for (int64_t e = 0; e < c.dim; ++e)
            t.data<float>()[((bb * c.qLen + i) * c.heads + h) * c.dim + e] =
                qt.data<float>()[((bb * c.heads + h) * c.qLen + i) * c.dim + e];
    auto view = layout::Layout::rowMajor(g.values[stored].shape).transpose({0, 2, 1, 3});
    REQUIRE(view.ok());
    fl.inputs[0] = codegen::OperandLayout{stored, *view, false, {}};
    bl.inputs[1] = fl.inputs[0];
    devIn.erase(q);
    devIn[stored] = t;
  }
  auto got = runOnDevice(g, g.nodes[fwd], fl, devIn, {o, lse}, target);
  check(got[o], fwdRef[0], "o");
  check(got[lse], fwdRef[1], "lse");
  for (ir::ValueId x : {dO, o, lse}) devIn[x] = val[x];
  std::vector<ir::ValueId> gradOuts;
  for (ir::ValueId x : g.nodes[bwd].outputs)
    if (x != ir::kNoValue) gradOuts.push_back(x);
  got = runOnDevice(g, g.nodes[bwd], bl, devIn, gradOuts, target);
  const char* names[] = {"dq", "dk", "dv"};
  for (size_t i = 0; i < 3; ++i)
    if (g.nodes[bwd].outputs[i] != ir::kNoValue) check(got[g.nodes[bwd].outputs[i]], bwdRef[i], names[i]);
}

// PoCL's tiling, a phone's (GPU class, local memory unknown: 16 KB), the H200's (48 KB, 132
// compute units: GQA heads get work-groups of their own and their partials are summed) and one
// whose 4-row tiles split every streamed range these short sequences allow (2 or 4 ways: each
// kernel's partials and their combination).
void runBothTilings(const AttnCase& c, unsigned seed) {
  codegen::Target cpu, phone, h200, split;
  phone.tuning = h200.tuning = split.tuning = codegen::defaultTuning(profile::DeviceClass::kGpu);
  h200.tuning.attention.localBytes = 49152;
  h200.tuning.attention.dqMinWholeTile = 16;  // as profiles/nvidia-h200.json: dq chunks at head_dim 256
  h200.computeUnits = 132;
  split.tuning.attention.localBytes = 49152;
  split.tuning.attention.maxTile = 4;
  split.tuning.attention.minGroupsPerUnit = 64;
  split.computeUnits = 132;
  for (const codegen::Target* target : {&cpu, &phone, &h200, &split}) {
    const codegen::Target& t = *target;
    ops::AttentionDims d;
    d.batch = c.batch, d.heads = c.heads, d.kvHeads = c.kvHeads, d.qLen = c.qLen, d.kvLen = c.kvLen;
    d.headDim = c.dim, d.valueDim = c.valueDim;
    auto describe = [](const codegen::AttentionTiling& a) {
      return fmt::format("tile {}, work-items {}, sx {}, ex {}, chunks {}, splits {}{}", a.tile, a.workItems,
                         a.scoreCols, a.accumulatorDims, a.chunks, a.splits, a.splitGroups ? ", GQA heads split" : "");
    };
    INFO("tiling (work-items " << t.tuning.attention.workItems << ", local " << t.tuning.attention.localBytes
         << "): forward " << describe(codegen::attentionTiling(d, t))
         << "; backward " << describe(codegen::attentionGradTiling(d, t))
         << "; dq " << describe(codegen::attentionDqTiling(d, t)));
    if (target == &split) {  // splits wherever a block streams at least four tiles (every case's keys do)
      CHECK(codegen::attentionTiling(d, t).splits > 1);
      CHECK(codegen::attentionDqTiling(d, t).splits > 1);
      const codegen::AttentionTiling g = codegen::attentionGradTiling(d, t);
      const int64_t dkdvTiles = (g.splitGroups ? 1 : d.group()) * ((d.qLen + g.tile - 1) / g.tile);
      CHECK((g.splits > 1) == (dkdvTiles >= 4));
    }
    runCase(c, t, seed);
  }
}

TEST_CASE("flash attention kernels: GQA, causal, S not a multiple of the tile, head_dim 32", "[codegen][attention]") {
  runBothTilings(AttnCase{}, 1);
}

TEST_CASE("flash attention kernels: sliding window, softcap, head_dim 64", "[codegen][attention]") {
  AttnCase c;
  c.dim = c.valueDim = 64;
  c.qLen = c.kvLen = 37;
  c.window = 5;
  c.softcap = 0.7f;
  c.scale = 0.5f;
  runBothTilings(c, 2);
}

TEST_CASE("flash attention kernels: padding masks through their broadcast, no causal", "[codegen][attention]") {
  AttnCase c;
  c.causal = false;
  c.heads = c.kvHeads = 2;
  c.qLen = c.kvLen = 13;
  c.mask = {c.batch, 1, 1, c.kvLen};
  runBothTilings(c, 3);
  c.mask = {c.batch, 1, c.qLen, c.kvLen};
  c.causal = true;
  runBothTilings(c, 4);
}

TEST_CASE("flash attention kernels: a fully padded sequence keeps the unfused softmax's uniform rows",
          "[codegen][attention]") {
  AttnCase c;
  c.causal = false;
  c.qLen = c.kvLen = 17;
  c.mask = {c.batch, 1, 1, c.kvLen};
  c.padLastBatch = true;
  runBothTilings(c, 9);
}

TEST_CASE("flash attention kernels: left-padded batches, whose padded rows see no key", "[codegen][attention]") {
  SECTION("causal in the mask as HF writes it, GQA, pads of 0, 5 and 1 tokens") {
    AttnCase c;
    c.batch = 3;
    c.causal = false;
    c.qLen = c.kvLen = 21;
    c.mask = {c.batch, 1, c.qLen, c.kvLen};
    c.leftPad = {0, 5, 1};
    c.maskCausal = true;
    runBothTilings(c, 10);
  }
  SECTION("causal and sliding window by index, softcap, a padding mask over the keys") {
    AttnCase c;
    c.qLen = c.kvLen = 19;
    c.window = 6;
    c.softcap = 0.8f;
    c.mask = {c.batch, 1, 1, c.kvLen};
    c.leftPad = {3, 9};
    runBothTilings(c, 11);
  }
}

TEST_CASE("flash attention kernels: cross-attention, 11 queries on 23 keys, padding mask", "[codegen][attention]") {
  AttnCase c;
  c.causal = false;
  c.qLen = 11;
  c.kvLen = 23;
  c.mask = {c.batch, 1, 1, c.kvLen};
  runBothTilings(c, 6);
}

TEST_CASE("flash attention kernels: head_dim 80, value dim 48, 41 tokens (tiles and dims not powers of two)",
          "[codegen][attention]") {
  AttnCase c;
  c.dim = 80;
  c.valueDim = 48;
  c.qLen = c.kvLen = 41;
  c.heads = 6;
  c.kvHeads = 2;
  runBothTilings(c, 7);
}

TEST_CASE("flash attention kernels: head_dim 256 (Gemma), softcap, sliding window: head dims in chunks",
          "[codegen][attention]") {
  AttnCase c;
  c.dim = c.valueDim = 256;
  c.qLen = c.kvLen = 45;
  c.window = 20;
  c.softcap = 0.9f;
  c.scale = 0.0625f;
  runBothTilings(c, 8);
}

TEST_CASE("flash attention kernels: q through a transposed view, no dk wanted, head_dim 16", "[codegen][attention]") {
  AttnCase c;
  c.dim = c.valueDim = 16;
  c.qLen = c.kvLen = 17;
  c.transposedQ = true;
  c.wantDk = false;
  runBothTilings(c, 5);
  std::printf("flash attention kernels: worst error relative to the reference's max |x|: %.2e\n", gWorst);
}

}  // namespace
}  // namespace fbl::testing
