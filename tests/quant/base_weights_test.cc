// The frozen base stored narrower (compiler/quant/base_weights.h): which weights are chosen and
// along which axis their groups run, the bytes' layout, and what the bytes decode to, against
// values worked out by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "compiler/quant/base_weights.h"
#include "runtime/plan_file.h"
#include "tests/ops/graph_builder.h"

namespace fbl::testing {
namespace {

using layout::Encoding;

uint16_t halfAt(const std::vector<uint8_t>& bytes, int64_t offset) {
  uint16_t h;
  std::memcpy(&h, &bytes[offset], 2);
  return h;
}

std::vector<uint8_t> encoded(const std::vector<float>& values, const Encoding& e) {
  auto bytes = quant::encode("w", values, e);
  INFO((bytes.ok() ? std::string() : bytes.error().message));
  REQUIRE(bytes.ok());
  REQUIRE(static_cast<int64_t>(bytes->size()) == planfile::encodedBytes(e.bits, e.group, e.rows, e.cols));
  return *bytes;
}

}  // namespace

TEST_CASE("fp16 weights round to nearest even and read back exactly", "[quant]") {
  const Encoding e{16, 0, 1, 1, 8};
  // 1, the largest finite half, the smallest subnormal, a tie rounding down to even (1 + 2^-11),
  // a tie rounding up (1 + 3 * 2^-11), -2, 0 and a value below half of the smallest subnormal.
  const std::vector<float> v{1.0f, 65504.0f, std::ldexp(1.0f, -24), 1.0f + std::ldexp(1.0f, -11),
                             1.0f + 3 * std::ldexp(1.0f, -11), -2.0f, 0.0f, std::ldexp(1.0f, -26)};
  const std::vector<uint8_t> bytes = encoded(v, e);
  const std::vector<uint16_t> want{0x3c00, 0x7bff, 0x0001, 0x3c00, 0x3c02, 0xc000, 0x0000, 0x0000};
  for (size_t i = 0; i < want.size(); ++i) CHECK(halfAt(bytes, 2 * static_cast<int64_t>(i)) == want[i]);
  const std::vector<float> back = quant::decode(bytes, e);
  CHECK(back[0] == 1.0f);
  CHECK(back[1] == 65504.0f);
  CHECK(back[2] == std::ldexp(1.0f, -24));
  CHECK(back[4] == 1.0f + std::ldexp(1.0f, -9));
  CHECK(back[5] == -2.0f);
  // Beyond fp16's range: refused with the initializer's name, not stored as infinity.
  auto big = quant::encode("w.big", std::vector<float>{1.0f, 70000.0f}, Encoding{16, 0, 1, 1, 2});
  REQUIRE(!big.ok());
  CHECK(big.error().message.find("'w.big'") != std::string::npos);
}

TEST_CASE("int4 groups: the scale is the extreme over -8, elements pack two a byte, low nibble first", "[quant]") {
  // A 2 x 8 matrix in groups of 4 along its columns: four groups, four scales.
  const Encoding e{4, 4, 1, 2, 8};
  const std::vector<float> v{0.5f, -1.0f, 0.25f, 0.0f,   // extreme -1: scale 1/8, q = 4 -8 2 0
                             2.0f, 1.0f, -1.0f, 0.5f,    // extreme 2: scale -1/4, q = -8 -4 4 -2
                             0.0f, 0.0f, 0.0f, 0.0f,     // all zero: scale 0
                             0.1f, 0.2f, 0.3f, 0.4f};    // extreme 0.4: scale -0.05 (rounded to fp16)
  const std::vector<uint8_t> bytes = encoded(v, e);
  // Element 0 (q 4, nibble 12) low, element 1 (q -8, nibble 0) high.
  CHECK(bytes[0] == 0x0c);
  CHECK(bytes[1] == 0x8a);  // q 2 -> 10 low, q 0 -> 8 high
  const int64_t scales = planfile::encodedScalesOffset(4, 2, 8);
  CHECK(scales == 16);
  CHECK(halfAt(bytes, scales) == 0x3000);      // 0.125
  CHECK(halfAt(bytes, scales + 2) == 0xb400);  // -0.25
  CHECK(halfAt(bytes, scales + 4) == 0x0000);
  const std::vector<float> back = quant::decode(bytes, e);
  for (int i = 0; i < 8; ++i) CHECK(back[i] == v[i]);  // every value a multiple of its scale
  for (int i = 8; i < 12; ++i) CHECK(back[i] == 0.0f);
  CHECK(back[15] == Approx(0.4f).epsilon(1e-3));  // the extreme, up to the scale's rounding
  for (int i = 12; i < 16; ++i) CHECK(std::abs(back[i] - v[i]) <= 0.026f);  // half a step
}

TEST_CASE("int8 groups along rows share a scale per column of each group of rows", "[quant]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  const Encoding e{8, 32, 0, 64, 12};  // [K = 64, N = 12], groups of 32 rows
  std::vector<float> v(64 * 12);
  for (float& x : v) x = u(rng);
  v[5 * 12 + 3] = 0.5f;  // column 3's first group has a large element
  const std::vector<uint8_t> bytes = encoded(v, e);
  const std::vector<float> back = quant::decode(bytes, e);
  CHECK(back[5 * 12 + 3] == 0.5f);
  double worstOther = 0, worstBig = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 12; ++c) {
      const double err = std::abs(back[r * 12 + c] - v[r * 12 + c]);
      (c == 3 && r < 32 ? worstBig : worstOther) = std::max(c == 3 && r < 32 ? worstBig : worstOther, err);
    }
  // A step is the group's extreme over 128 (0.5 / 128 in the big group, at most 0.1 / 128
  // elsewhere, up to fp16's rounding of the scale): an element is within half a step, or one step
  // where it lies beyond 127.5 steps on the extreme's other side (clamped to 127). The big
  // element costs only its own group.
  CHECK(worstBig <= 0.5 / 128 * 1.01);
  CHECK(worstOther <= 0.1 / 128 * 1.01);
  CHECK(halfAt(bytes, planfile::encodedScalesOffset(8, 64, 12) + 2 * 3) != halfAt(bytes, planfile::encodedScalesOffset(8, 64, 12) + 2 * 15));
}

TEST_CASE("the base weights chosen: frozen matrices only products and embeddings read, grouped along the reduction",
          "[quant]") {
  GraphBuilder b = GraphBuilder::inferring();
  const ir::ValueId ids = b.input("ids", ir::DType::I64, {2, 4});
  const ir::ValueId table = b.randomParam("embed", {16, 8});           // Gather, then the tied head's W^T
  const ir::ValueId w = b.randomParam("proj", {8, 8});                 // x W: reduces its rows
  const ir::ValueId scaled = b.randomParam("scaled_by_mul", {8, 8});   // an elementwise reader
  const ir::ValueId lora = b.randomParam("lora_A", {8, 8});            // trainable
  const ir::ValueId odd = b.randomParam("odd", {8, 6});                // grouped along its 8 rows
  const ir::ValueId x = b.op("Gather", {table, ids});
  const ir::ValueId h = b.op("MatMul", {b.op("MatMul", {x, w}), lora});
  const ir::ValueId h2 = b.op("MatMul", {h, b.op("Mul", {scaled, b.scalar(2.0f)})});
  const ir::ValueId logits = b.op("MatMul", {h2, b.op("Transpose", {table}, {{"perm", std::vector<int64_t>{1, 0}}})});
  const ir::ValueId y = b.op("MatMul", {h2, odd});
  b.output(b.weightedSumLoss(b.op("Add", {b.op("ReduceSum", {logits}, {{"keepdims", int64_t(0)}}),
                                          b.op("ReduceSum", {y}, {{"keepdims", int64_t(0)}})})));
  std::map<std::string, std::string> skipped;
  const auto chosen = quant::chooseEncodings(b.g, {"lora_A"}, {4, 8}, &skipped);
  REQUIRE(chosen.count("embed") == 1);
  CHECK(chosen.at("embed") == Encoding{4, 8, 1, 16, 8});  // the head reduces the table's columns
  REQUIRE(chosen.count("proj") == 1);
  CHECK(chosen.at("proj").axis == 0);  // x W reduces W's rows
  CHECK(chosen.count("lora_A") == 0);
  CHECK(chosen.count("scaled_by_mul") == 0);
  CHECK(skipped.at("scaled_by_mul").find("Mul") != std::string::npos);
  REQUIRE(chosen.count("odd") == 1);  // reduced along its 8 rows, one group of 8
  CHECK(chosen.at("odd").axis == 0);
  // Groups of 16 do not divide 8 rows: left f32, and said why.
  skipped.clear();
  const auto wide = quant::chooseEncodings(b.g, {"lora_A"}, {8, 16}, &skipped);
  CHECK(wide.count("proj") == 0);
  CHECK(skipped.at("proj").find("not whole groups of 16") != std::string::npos);
  // fp16 needs no groups; fp32 chooses nothing.
  CHECK(quant::chooseEncodings(b.g, {"lora_A"}, {16, 16}).count("proj") == 1);
  CHECK(quant::chooseEncodings(b.g, {"lora_A"}, {32, 32}).empty());
  (void)x;
}

// peft saves an adapted embedding's base layer with the adapter, and the runtime exports it from
// the plan's tensor: it stays f32 (found by the corpus's llama_embed export with an fp16 base).
TEST_CASE("an adapted embedding's base layer is not encoded", "[quant]") {
  GraphBuilder b = GraphBuilder::inferring();
  const ir::ValueId ids = b.input("ids", ir::DType::I64, {2, 4});
  const ir::ValueId table = b.randomParam("m.base_model.model.model.embed_tokens.base_layer.weight", {16, 8});
  const ir::ValueId w = b.randomParam("m.base_model.model.model.layers.0.mlp.up_proj.weight", {8, 8});
  b.output(b.weightedSumLoss(b.op("MatMul", {b.op("Gather", {table, ids}), w})));
  std::map<std::string, std::string> skipped;
  const auto chosen = quant::chooseEncodings(b.g, {}, {4, 8}, &skipped);
  CHECK(chosen.count("m.base_model.model.model.layers.0.mlp.up_proj.weight") == 1);
  CHECK(chosen.count("m.base_model.model.model.embed_tokens.base_layer.weight") == 0);
  CHECK(skipped.at("m.base_model.model.model.embed_tokens.base_layer.weight") ==
        "peft saves it with the adapter (an adapted embedding's base layer)");
}

TEST_CASE("the base-weights option and its group are checked", "[quant]") {
  CHECK(quant::parseBaseWeights("int4", 32).ok());
  CHECK(quant::parseBaseWeights("fp16", 32)->bits == 16);
  CHECK(quant::parseBaseWeights("int3", 32).error().message == "--base-weights 'int3' is not fp32, fp16, int8 or int4");
  CHECK(!quant::parseBaseWeights("int4", 30).ok());
  CHECK(!quant::parseBaseWeights("int4", 0).ok());
}

}  // namespace fbl::testing
