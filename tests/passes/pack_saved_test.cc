// pack-saved (compiler/passes/pack_saved.h) on the tiny Llama's joint graph, on the reference
// executor: the forward pass and its loss are untouched to the bit, the backward pass reads each
// saved value exactly as its 16-bit rounding, and the gradients move by no more than that
// rounding explains. With every segment recomputed only the segments' inputs are kept.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "compiler/autodiff/recompute.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/passes/pack_saved.h"
#include "compiler/passes/verify.h"
#include "compiler/ref/executor.h"
#include "compiler/support/float16.h"
#include "tests/ops/graph_builder.h"
#include "tests/passes/test_graphs.h"

namespace fbl {
namespace {

using ir::ValueId;

const std::string kModel = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny";

std::map<ValueId, ir::Tensor> feeds(const ir::Graph& g) {
  std::map<ValueId, ir::Tensor> f;
  auto ids = onnx::readTensorProtoFile(kModel + "/test_data_set_0/input_0.pb");  // the model's one input
  REQUIRE(ids.ok());
  f.emplace(g.inputs[0], std::move(ids->tensor));
  return f;
}

// The loss, then every trainable's gradient, then `extra`.
std::vector<ir::Tensor> run(const autodiff::TrainingGraph& tg, const std::vector<ValueId>& extra = {}) {
  std::vector<ValueId> fetch{tg.loss};
  for (const auto& t : tg.trainables) fetch.push_back(t.grad);
  fetch.insert(fetch.end(), extra.begin(), extra.end());
  auto out = ref::Executor(tg.graph).run(feeds(tg.graph), fetch);
  INFO((out.ok() ? "" : out.error().message));
  REQUIRE(out.ok());
  return *out;
}

// Forward f32 activations (computed from the model's input) of more than one element that a
// backward node reads.
int64_t savedF32(const ir::Graph& g) {
  const auto consumers = g.consumers();
  std::vector<bool> fromInput(g.values.size(), false);
  for (ValueId v : g.inputs) fromInput[v] = true;
  for (const ir::Node& n : g.nodes)
    for (ValueId o : n.outputs)
      fromInput[o] = std::any_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return v != ir::kNoValue && fromInput[v]; });
  int64_t n = 0;
  for (ValueId v = 0; v < static_cast<ValueId>(g.values.size()); ++v) {
    const ir::Value& val = g.values[v];
    if (!fromInput[v] || val.producer == ir::kNoNode || g.nodes[val.producer].phase != ir::Phase::Forward ||
        val.dtype != ir::DType::F32 || ir::numElements(val.shape) <= 1 || val.shape.back() == 1)
      continue;
    n += std::any_of(consumers[v].begin(), consumers[v].end(),
                     [&](ir::NodeId c) { return g.nodes[c].phase == ir::Phase::Backward; });
  }
  return n;
}

double errorOfMaxAbs(const ir::Tensor& got, const ir::Tensor& want) {
  double scale = 0, err = 0;
  for (int64_t k = 0; k < want.numel(); ++k) {
    scale = std::max(scale, std::abs(want.at(k)));
    err = std::max(err, std::abs(got.at(k) - want.at(k)));
  }
  return scale > 0 ? err / scale : err;
}

TEST_CASE("pack-saved keeps what the backward pass reads in 16 bits and leaves the forward pass alone",
          "[passes][pack-saved]") {
  const autodiff::TrainingGraph plain = fbl::testing::jointGraph("llama-tiny");
  const std::vector<ir::Tensor> want = run(plain);
  const int64_t saved = savedF32(plain.graph);
  REQUIRE(saved > 10);
  for (ir::DType format : {ir::DType::F16, ir::DType::BF16}) {
    INFO("format " << ir::dtypeName(format));
    autodiff::TrainingGraph tg = plain;
    const std::vector<ValueId> keep{tg.loss};
    passes::PackSaved pass(keep);
    pass.format = format;
    auto changed = pass.run(tg.graph);
    REQUIRE(changed.ok());
    REQUIRE(*changed);
    CHECK(pass.packed() == saved);
    const Status verified = passes::verifyGraph(tg.graph);
    INFO((verified.ok() ? "" : verified.error().message));
    REQUIRE(verified.ok());
    CHECK(savedF32(tg.graph) == 0);

    // Each packing Cast follows its producer in the forward pass; each unpacking one is backward.
    std::vector<ValueId> originals, unpacked;
    for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(tg.graph.nodes.size()); ++id) {
      const ir::Node& n = tg.graph.nodes[id];
      if (n.op != "Cast") continue;
      const ir::DType to = tg.graph.values[n.outputs[0]].dtype;
      if (to == format) {
        CHECK(n.phase == ir::Phase::Forward);
        CHECK(tg.graph.values[n.inputs[0]].producer < id);
        originals.push_back(n.inputs[0]);
      } else if (tg.graph.values[n.inputs[0]].dtype == format) {
        CHECK(n.phase == ir::Phase::Backward);
        unpacked.push_back(n.outputs[0]);
      }
    }
    // Pair each unpacked value with its original: unpack(pack(original)).
    REQUIRE(unpacked.size() == originals.size());
    for (size_t k = 0; k < unpacked.size(); ++k) {
      const ValueId packed = tg.graph.nodes[tg.graph.values[unpacked[k]].producer].inputs[0];
      originals[k] = tg.graph.nodes[tg.graph.values[packed].producer].inputs[0];
    }
    REQUIRE(originals.size() == static_cast<size_t>(saved));
    REQUIRE(unpacked.size() == originals.size());

    std::vector<ValueId> extra = originals;
    extra.insert(extra.end(), unpacked.begin(), unpacked.end());
    const std::vector<ir::Tensor> got = run(tg, extra);
    const size_t grads = tg.trainables.size();
    CHECK(got[0].at(0) == want[0].at(0));  // the forward pass, to the bit
    double worst = 0;
    for (size_t i = 1; i <= grads; ++i) worst = std::max(worst, errorOfMaxAbs(got[i], want[i]));
    CHECK(worst > 0);  // the backward pass did read rounded values
    CHECK(worst < (format == ir::DType::F16 ? 2e-3 : 2e-2));
    // Every value the backward pass reads back is its original rounded to nearest even.
    for (size_t k = 0; k < originals.size(); ++k) {
      const ir::Tensor& v = got[1 + grads + k];
      const ir::Tensor& back = got[1 + grads + originals.size() + k];
      REQUIRE(back.numel() == v.numel());
      int64_t wrong = 0;
      for (int64_t e = 0; e < v.numel(); ++e) {
        const float f = static_cast<float>(v.at(e));
        const float r = format == ir::DType::F16 ? fromHalf(toHalf(f)) : fromBfloat16(toBfloat16(f));
        wrong += static_cast<float>(back.at(e)) != r;
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("pack-saved after recompute keeps only the segments' inputs, and fp32 changes nothing",
          "[passes][pack-saved]") {
  autodiff::TrainingGraph tg = fbl::testing::jointGraph("llama-tiny");
  const std::vector<ValueId> keep{tg.loss};
  {
    passes::PackSaved pass(keep);
    ir::Graph g = tg.graph;
    auto changed = pass.run(g);
    REQUIRE(changed.ok());
    CHECK_FALSE(*changed);
    CHECK(g.nodes.size() == tg.graph.nodes.size());
  }
  const int64_t all = savedF32(tg.graph);
  const autodiff::RecomputeSummary r = autodiff::recompute(tg.graph, -1);
  REQUIRE(r.segments > 1);
  const int64_t kept = savedF32(tg.graph);
  CHECK(kept < all);
  passes::PackSaved pass(keep);
  pass.format = ir::DType::F16;
  REQUIRE(pass.run(tg.graph).ok());
  CHECK(pass.packed() == kept);
  CHECK(savedF32(tg.graph) == 0);
  REQUIRE(passes::verifyGraph(tg.graph).ok());
}

// The joint graph of `forward` after pack-saved at `format`, keeping the loss, and how many
// values it packed.
struct Packed {
  autodiff::TrainingGraph tg;
  int64_t values = 0;
};
Packed trainAndPack(const ir::Graph& forward, ir::DType format) {
  auto built = autodiff::buildTrainingGraph(forward, {});
  INFO((built.ok() ? "" : built.error().message));
  REQUIRE(built.ok());
  Packed out{std::move(*built)};
  const std::vector<ValueId> keep{out.tg.loss};
  passes::PackSaved pass(keep);
  pass.format = format;
  REQUIRE(pass.run(out.tg.graph).ok());
  out.values = pass.packed();
  return out;
}

// A LayerNormalization's input is normalized again by its gradient: it stays f32, while the
// product before it (read by the weight gradient) is packed.
TEST_CASE("pack-saved leaves what a backward node normalizes again in f32", "[passes][pack-saved]") {
  testing::GraphBuilder b = testing::GraphBuilder::inferring();
  const ValueId x = b.input("x", ir::DType::F32, {4, 8});
  const ValueId h = b.op("MatMul", {x, b.randomParam("m.fc.lora_A.default.weight", {8, 8})});
  const ValueId n = b.op("LayerNormalization", {h, b.randomParam("m.ln.weight", {8}), b.randomParam("m.ln.bias", {8})},
                         {{"axis", int64_t{-1}}});
  const ValueId y = b.op("MatMul", {b.op("Tanh", {n}), b.randomParam("m.out.lora_B.default.weight", {8, 8})});
  b.weightedSumLoss(y);
  const Packed p = trainAndPack(b.g, ir::DType::BF16);
  bool lnGrad = false;
  for (const ir::Node& node : p.tg.graph.nodes) {
    if (node.op == "fbl.LayerNormGrad") {
      lnGrad = true;
      CHECK(node.inputs[1] == h);  // the f32 value itself
    }
    if (node.op == "Cast" && p.tg.graph.values[node.outputs[0]].dtype == ir::DType::BF16) CHECK(node.inputs[0] != h);
  }
  CHECK(lnGrad);
  CHECK(p.values >= 1);  // tanh(n), read by B's gradient and by Tanh's
}

// Max's gradient compares its two computed inputs: rounded, two close values would tie and both
// take the gradient. They stay f32; Relu's comparison with zero may read a rounded value.
TEST_CASE("pack-saved leaves what a backward node compares with another value in f32", "[passes][pack-saved]") {
  testing::GraphBuilder b = testing::GraphBuilder::inferring();
  const ValueId x = b.input("x", ir::DType::F32, {4, 8});
  const ValueId h1 = b.op("MatMul", {x, b.randomParam("m.a.lora_A.default.weight", {8, 8})});
  const ValueId h2 = b.op("MatMul", {x, b.randomParam("m.b.lora_A.default.weight", {8, 8})});
  const ValueId r = b.op("Relu", {b.op("Max", {h1, h2})});
  b.weightedSumLoss(b.op("MatMul", {r, b.randomParam("m.out.lora_B.default.weight", {8, 8})}));
  const Packed p = trainAndPack(b.g, ir::DType::F16);
  bool packedRelu = false;
  for (const ir::Node& node : p.tg.graph.nodes)
    if (node.op == "Cast" && p.tg.graph.values[node.outputs[0]].dtype == ir::DType::F16) {
      CHECK(node.inputs[0] != h1);
      CHECK(node.inputs[0] != h2);
      packedRelu |= node.inputs[0] == r;
    }
  CHECK(packedRelu);  // read by B's gradient and by Relu's comparison with zero
}

TEST_CASE("the precision option names fp32, fp16 or bf16", "[passes][pack-saved]") {
  for (const auto& [text, dtype] : std::map<std::string, ir::DType>{
           {"fp32", ir::DType::F32}, {"fp16", ir::DType::F16}, {"bf16", ir::DType::BF16}}) {
    auto parsed = passes::parsePrecision(text);
    REQUIRE(parsed.ok());
    CHECK(parsed.value() == dtype);
  }
  auto bad = passes::parsePrecision("half");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "--precision 'half' is not fp32, fp16 or bf16");
}

}  // namespace
}  // namespace fbl
