// The MatMul cost model (compiler/codegen/matmul_tiling.h): the profile's candidates parse with
// errors that name the field, and the choices it makes on the H200 profile are the ones the
// sweep measured fastest for each kind of product (docs/kernels.md, "Choosing a tiling").
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compiler/codegen/matmul_tiling.h"
#include "compiler/plan/profile.h"
#include "compiler/profile/profile.h"

namespace fbl::codegen {
namespace {

MatmulCostModel h200() {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/nvidia-h200.json");
  REQUIRE(hw.ok());
  auto p = plan::plannerProfile(*hw, "nvidia-h200.json");
  REQUIRE(p.ok());
  REQUIRE_FALSE(p->matmul.candidates.empty());
  return p->matmul;
}

// pocl-cpu.json with round top-level facts and `tilings` as its matmul block.
nlohmann::json profileWith(nlohmann::json tilings) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(FBL_SOURCE_DIR "/profiles/pocl-cpu.json"));
  j["compute_units"] = 10;
  j["peak_gflops"] = 1000.0;
  j["bandwidth_gbps"] = 100.0;
  j["matmul"] = {{"provenance", "measured: test"}, {"tilings", std::move(tilings)}};
  return j;
}

// The cost model of profile `j`, read as fblc reads a profile file.
Result<MatmulCostModel> parseMatmulCostModel(const nlohmann::json& j) {
  FBL_ASSIGN(const profile::HardwareProfile hw, profile::profileFromJson(j, "p.json"));
  return matmulCostModel(hw);
}

std::string parseError(const nlohmann::json& j) {
  auto m = parseMatmulCostModel(j);
  return m.ok() ? std::string() : m.error().message;
}

TEST_CASE("matmul cost model: the profile block parses and bad entries name their field", "[codegen][matmul-tiling]") {
  auto ok = parseMatmulCostModel(profileWith({{{"tile", "64x64x16/4x4"}, {"pipeline", 3}, {"efficiency", 0.5}}}));
  REQUIRE(ok.ok());
  REQUIRE(ok->candidates.size() == 1);
  CHECK(ok->candidates[0].tiling.tm == 64);
  CHECK(ok->candidates[0].tiling.pipeline == 3);
  CHECK(parseError(profileWith({{{"tile", "64x64/4x4"}, {"efficiency", 0.5}}})).find("matmul.tilings[0]") != std::string::npos);
  CHECK(parseError(profileWith({{{"tile", "64x64x16/4x6"}, {"efficiency", 0.5}}})).find("rules") != std::string::npos);
  CHECK(parseError(profileWith({{{"tile", "64x64x16/4x4"}, {"efficiency", 1.5}}})).find("efficiency") != std::string::npos);
  CHECK(parseError(profileWith({{{"tile", "64x64x16/4x4"}, {"pipeline", 4}, {"efficiency", 0.5}}})).find("pipeline") !=
        std::string::npos);
  nlohmann::json noProv = profileWith({{{"tile", "64x64x16/4x4"}, {"efficiency", 0.5}}});
  noProv["matmul"].erase("provenance");
  CHECK(parseError(noProv).find("matmul.provenance") != std::string::npos);
  nlohmann::json noPeak = profileWith({{{"tile", "64x64x16/4x4"}, {"efficiency", 0.5}}});
  noPeak.erase("peak_gflops");
  CHECK(parseError(noPeak).find("peak_gflops") != std::string::npos);
}

TEST_CASE("matmul cost model: H200 choices follow the product's shape", "[codegen][matmul-tiling]") {
  const MatmulCostModel m = h200();
  // Figure 16's forward has 256 output tiles of 128 x 128 for 132 SMs: big tiles, no split.
  const MatmulTiling fwd = chooseMatmulTiling(m, DeviceClass::kGpu, 512, 8192, 2048);
  CHECK(fwd.tm * fwd.tn >= 128 * 128);
  CHECK(fwd.splitK == 1);
  // Its dA has 64 such tiles over K = 8192: K is split until the device is full.
  const MatmulTiling dA = chooseMatmulTiling(m, DeviceClass::kGpu, 512, 2048, 8192);
  CHECK(dA.splitK > 1);
  CHECK((512 / dA.tm) * (2048 / dA.tn) * dA.splitK >= m.computeUnits);
  // LoRA's rank-8 sides: a narrow tile on the narrow side, split along the long K.
  const MatmulTiling xa = chooseMatmulTiling(m, DeviceClass::kGpu, 512, 8, 2048);
  CHECK(xa.tn <= 16);
  CHECK(xa.splitK > 1);
  const MatmulTiling dAlora = chooseMatmulTiling(m, DeviceClass::kGpu, 8, 2048, 512);
  CHECK(dAlora.tm <= 16);
  // The estimate pays for padding: every split of the big tile costs more there than the pick.
  MatmulEstimate picked;
  chooseMatmulTiling(m, DeviceClass::kGpu, 512, 8, 2048, 1, &picked);
  for (int64_t split = 1; split <= 32; split *= 2)
    CHECK(estimateMatmul(m, m.candidates[0], 512, 8, 2048, 1, split).us > picked.us);
  // And narrow tiles lose on wide products: their panels are re-read once per output column tile.
  const MatmulCandidate* narrow = nullptr;
  for (const MatmulCandidate& c : m.candidates)
    if (c.tiling.tn <= 8) narrow = &c;
  REQUIRE(narrow);
  CHECK(estimateMatmul(m, *narrow, 512, 8192, 2048, 1, 1).us > 2 * estimateMatmul(m, m.candidates[0], 512, 8192, 2048, 1, 1).us);
}

TEST_CASE("matmul cost model: waves, split-K and local memory", "[codegen][matmul-tiling]") {
  MatmulCostModel m = parseMatmulCostModel(profileWith({{{"tile", "64x64x16/4x4"}, {"efficiency", 0.5}}})).value();
  const MatmulCandidate& c = m.candidates[0];
  // 10 units, one group each: 10 tiles are one wave, 11 are two.
  CHECK(estimateMatmul(m, c, 64, 640, 256, 1, 1).waves == 1);
  CHECK(estimateMatmul(m, c, 64, 704, 256, 1, 1).waves == 2);
  // A split that would leave a slice empty is never chosen; K = 48 in steps of 16 splits at most 3 ways.
  CHECK_FALSE(splitFits(48, 4, c.tiling));
  CHECK(splitFits(48, 2, c.tiling));
  for (int64_t k : {16, 48, 100, 4096}) {
    const MatmulTiling t = chooseMatmulTiling(m, DeviceClass::kGpu, 64, 64, k);
    CHECK(splitFits(k, t.splitK, t));
  }
  // A candidate whose local tiles exceed the device's local memory is skipped.
  m.candidates.push_back({parseTile("128x128x16/8x8", 3).value(), 1.0, 1});
  m.localMemoryBytes = matmulLocalBytes(m.candidates[1].tiling) - 1;
  CHECK(chooseMatmulTiling(m, DeviceClass::kGpu, 4096, 4096, 4096).tm == 64);
  m.localMemoryBytes = 0;
  CHECK(chooseMatmulTiling(m, DeviceClass::kGpu, 4096, 4096, 4096).tm == 128);
}

TEST_CASE("matmul cost model: every split count, and a tail launch for a partial last wave", "[codegen][matmul-tiling]") {
  MatmulCostModel m = parseMatmulCostModel(profileWith({{{"tile", "64x64x16/4x4"}, {"efficiency", 0.5}}})).value();
  const MatmulCandidate& c = m.candidates[0];
  // Every split count is weighed, not only powers of two: the pick is no worse than any of them.
  for (int64_t k : {256, 1008, 4096}) {
    MatmulEstimate picked;
    const MatmulTiling t = chooseMatmulTiling(m, DeviceClass::kGpu, 64, 192, k, 1, &picked);
    CHECK(splitFits(k, t.splitK, t));
    for (int64_t split = 1; split <= m.maxSplit; ++split)
      if (splitFits(k, split, c.tiling)) CHECK(estimateMatmul(m, c, 64, 192, k, 1, split).us >= picked.us);
  }
  // 10 units, one group each: 11 column tiles of 64 are one whole wave and one tile more. The
  // schedule runs the wave's 640 columns unsplit and the last 64 as their own (split) product,
  // cheaper than two full-length waves.
  const MatmulSchedule tail = chooseMatmulSchedule(m, matmulTiling(DeviceClass::kGpu), 64, 704, 4096);
  CHECK(tail.mainCols == 640);
  CHECK(tail.main.splitK == 1);
  CHECK(tail.tail.splitK > 1);
  MatmulEstimate single;
  chooseMatmulTiling(m, DeviceClass::kGpu, 64, 704, 4096, 1, &single);
  CHECK(tail.estimate.us < single.us);
  // Whole waves, or a model without candidates: one launch over every column.
  CHECK(chooseMatmulSchedule(m, matmulTiling(DeviceClass::kGpu), 64, 640, 4096).mainCols == 640);
  MatmulCostModel none = m;
  none.candidates.clear();
  const MatmulSchedule fallback = chooseMatmulSchedule(none, matmulTiling(DeviceClass::kGpu), 64, 704, 4096);
  CHECK(fallback.mainCols == 704);
  CHECK(fallback.main.tm == matmulTiling(DeviceClass::kGpu).tm);
  // On the H200: Gemma2's 512 x 9216 products (288 tiles of 128 x 128, 264 resident) get a tail;
  // Figure 16's forward (256 tiles) does not.
  const MatmulCostModel h = h200();
  const MatmulSchedule gate = chooseMatmulSchedule(h, matmulTiling(DeviceClass::kGpu), 512, 9216, 2304);
  CHECK(gate.mainCols < 9216);
  CHECK(gate.mainCols % gate.main.tn == 0);
  CHECK(chooseMatmulSchedule(h, matmulTiling(DeviceClass::kGpu), 512, 8192, 2048).mainCols == 8192);
}

TEST_CASE("matmul cost model: no candidates keeps the device class's tiling", "[codegen][matmul-tiling]") {
  MatmulCostModel m;
  m.computeUnits = 132;
  const MatmulTiling t = chooseMatmulTiling(m, DeviceClass::kGpu, 512, 2048, 8192);
  const MatmulTiling legacy = matmulTiling(DeviceClass::kGpu);
  CHECK(t.tm == legacy.tm);
  CHECK(t.pipeline == legacy.pipeline);
  CHECK(t.splitK == chooseSplitK(512, 2048, 8192, legacy, 132));
}

TEST_CASE("matmul tile specs: TMxTNxTK/RMxRN with an optional :PIPE", "[codegen][matmul-tiling]") {
  auto plain = parseTileSpec("128x64x16/8x8", 2);
  REQUIRE(plain.ok());
  CHECK(tileString(*plain) == "128x64x16/8x8");
  CHECK(plain->pipeline == 2);
  auto piped = parseTileSpec("128x64x16/8x8:3", 2);
  REQUIRE(piped.ok());
  CHECK(piped->pipeline == 3);
  for (const char* bad : {"128x64x16/8x8:", "128x64x16/8x8:x", "128x64x16/8x8:12", "128x64/8x8:1"}) {
    INFO(bad);
    auto t = parseTileSpec(bad, 2);
    REQUIRE_FALSE(t.ok());
    const std::string text(bad);
    CHECK(t.error().message.find(text.substr(0, text.find(':'))) != std::string::npos);  // names the tile
  }
}

TEST_CASE("narrow products: the profile switch and the tile rule", "[codegen][matmul-tiling]") {
  nlohmann::json j = profileWith(nlohmann::json::array());
  j["matmul"]["narrow"] = {{"max_side", 16}, {"work_items", 256}};
  CHECK(parseError(j).find("matmul.narrow.provenance") != std::string::npos);
  j["matmul"]["narrow"]["provenance"] = "measured: test";
  auto m = parseMatmulCostModel(j);
  REQUIRE(m.ok());
  CHECK(isNarrowProduct(*m, 512, 16));
  CHECK(isNarrowProduct(*m, 8, 2304));
  CHECK_FALSE(isNarrowProduct(*m, 512, 17));
  CHECK_FALSE(isNarrowProduct(MatmulCostModel{}, 512, 8));  // absent: never
  CHECK(h200().narrow.maxSide == 16);
  j["matmul"]["narrow"]["work_items"] = 96;
  CHECK(parseError(j).find("matmul.narrow") != std::string::npos);
  j["matmul"]["narrow"] = {{"max_side", -1}, {"provenance", "measured: test"}};
  CHECK(parseError(j).find("matmul.narrow") != std::string::npos);

  auto opts = [](int64_t workItems, int64_t fill = 0) {
    NarrowOptions o;
    o.maxSide = 16;
    o.workItems = workItems;
    o.fillWorkItems = fill;
    return o;
  };
  // x * lora_A on Gemma2 (K = 2304 = 576 texels): 64 slices of 9 texels, 2 x 2 blocks of 4 x 4.
  NarrowTiling a = chooseNarrowTiling(512, 8, 2304, opts(256));
  CHECK((a.ks == 64 && a.tn == 8 && a.tm == 8 && a.workItems() == 256));
  // x^T * dt (K = 512 tokens): 16 slices of 8 texels; the rest is row blocks.
  NarrowTiling b = chooseNarrowTiling(2304, 8, 512, opts(256));
  CHECK((b.ks == 16 && b.tn == 8 && b.tm == 32));
  // t^T * dy (M = 8): output texels first, which leaves one row block (two groups cover M).
  NarrowTiling c = chooseNarrowTiling(8, 2304, 512, opts(256));
  CHECK((c.ks == 16 && c.tn == 64 && c.tm == 4));
  // Short K: one slice; a group never covers more blocks than the product has.
  NarrowTiling d = chooseNarrowTiling(6, 5, 20, opts(256));
  CHECK((d.ks == 1 && d.tn == 8 && d.tm == 8 && d.workItems() == 4));

  // A fill target: x * lora_A on Llama (512 x 8 outputs, 256 blocks; K = 2048 = 512 texels)
  // takes 256 slices of 2 texels for 65,536 work-items, where slices of 8 texels give 16,384.
  CHECK(chooseNarrowTiling(512, 8, 2048, opts(256)).ks == 64);
  NarrowTiling e = chooseNarrowTiling(512, 8, 2048, opts(256, 65536));
  CHECK((e.ks == 256 && e.tm == 4 && e.tn == 4));
  // ... never slices shorter than a texel, nor more than a group holds.
  CHECK(chooseNarrowTiling(512, 8, 2048, opts(1024, int64_t{1} << 30)).ks == 512);
  CHECK(chooseNarrowTiling(512, 8, 2048, opts(128, int64_t{1} << 30)).ks == 128);
  // A product that fills the target with long slices keeps them; batches count as blocks.
  CHECK(chooseNarrowTiling(4096, 8, 2048, opts(256, 65536)).ks == 64);
  CHECK(chooseNarrowTiling(512, 8, 2048, opts(256, 65536), 4).ks == 64);
  // dy * B (B stored along K) with the texel walk from 16 wide: at rank 16 neighbours are output
  // texels and the group spans N first (4 texels x 64 slices, alone and three a launch); rank 8
  // and the other orientations keep their orders.
  NarrowOptions walk = opts(256, 65536);
  walk.texelWalkMinSide = 16;
  CHECK(chooseNarrowOrder(512, 16, false, false, walk) == NarrowOrder::kTexels);
  CHECK(chooseNarrowOrder(512, 8, false, false, walk) == NarrowOrder::kSlices);
  CHECK(chooseNarrowOrder(512, 16, false, false, opts(256, 65536)) == NarrowOrder::kSlices);
  CHECK(chooseNarrowOrder(512, 16, false, true, walk) == NarrowOrder::kSlices);
  CHECK(chooseNarrowOrder(2304, 16, true, false, walk) == NarrowOrder::kRowBlocks);
  CHECK(chooseNarrowOrder(16, 2304, false, false, walk) == NarrowOrder::kTexels);
  CHECK(chooseNarrowOrder(16, 2304, false, true, walk) == NarrowOrder::kSlices);
  NarrowTiling g = chooseNarrowTiling(512, 16, 2048, walk, 1, NarrowOrder::kTexels);
  CHECK((g.tn == 16 && g.ks == 64 && g.tm == 4));
  CHECK(chooseNarrowTiling(512, 16, 2048, walk, 3, NarrowOrder::kTexels).ks == 64);
  NarrowTiling g8 = chooseNarrowTiling(512, 8, 2048, walk, 1, NarrowOrder::kTexels);
  CHECK((g8.tn == 8 && g8.ks == 128 && g8.tm == 4));
  // A narrow M walked by texels of its wide side is tiled slices first, as before...
  NarrowTiling h = chooseNarrowTiling(8, 2304, 512, opts(256), 1, NarrowOrder::kTexels);
  CHECK((h.ks == c.ks && h.tn == c.tn && h.tm == c.tm));
  // ... and its row blocks share a group from rows_in_group_min_side: dt^T x at rank 16 (K = 512
  // tokens) holds all 4 row blocks, 32 slices for 65,536 work-items, and the 2 output texels
  // left; rank 8 below the threshold is output texels first.
  NarrowOptions rowsIn = opts(256, 65536);
  rowsIn.rowsInGroupMinSide = 16;
  NarrowTiling rows = chooseNarrowTiling(16, 2048, 512, rowsIn, 1, NarrowOrder::kTexels);
  CHECK((rows.tm == 16 && rows.tn == 8 && rows.ks == 32));
  NarrowTiling notRows = chooseNarrowTiling(16, 2048, 512, opts(256, 65536), 1, NarrowOrder::kTexels);
  CHECK((notRows.tm == 4 && notRows.tn == 32 && notRows.ks == 32));
  NarrowTiling rows8 = chooseNarrowTiling(8, 2048, 512, rowsIn, 1, NarrowOrder::kTexels);
  CHECK((rows8.tm == 4 && rows8.tn == 16 && rows8.ks == 64));
  // A narrow N is not a narrow M: x A at rank 16 keeps its tile.
  CHECK(chooseNarrowTiling(512, 16, 2048, rowsIn).tm == chooseNarrowTiling(512, 16, 2048, opts(256, 65536)).tm);
  // Local memory: the tree (16 KB at 256 work-items), plus for a staged operand 4 x 256 rows of
  // one texel and a texel of padding every 4 rows (20 KB).
  CHECK(narrowLocalBytes(e, false) == 256 * 64);
  CHECK(narrowLocalBytes(e, true) == 256 * 64 + (4 * 256 + 256) * 16);

  // The profile: fill_work_items, and work_items within the tree's local memory.
  nlohmann::json p = profileWith(nlohmann::json::array());
  p["matmul"]["local_memory_bytes"] = 49152;
  p["matmul"]["narrow"] = {{"max_side", 16}, {"work_items", 256}, {"fill_work_items", 65536},
                           {"provenance", "measured: test"}};
  auto q = parseMatmulCostModel(p);
  REQUIRE(q.ok());
  CHECK(q->narrow.fillWorkItems == 65536);
  CHECK_FALSE(q->narrow.stageNarrowOperand);
  p["matmul"]["narrow"]["stage_narrow_operand"] = true;
  CHECK(parseMatmulCostModel(p)->narrow.stageNarrowOperand);
  p["matmul"]["narrow"].erase("stage_narrow_operand");
  // texel_walk_min_side: 0 (never) unless the profile says; an integer >= 0.
  CHECK(parseMatmulCostModel(p)->narrow.texelWalkMinSide == 0);
  p["matmul"]["narrow"]["texel_walk_min_side"] = 16;
  CHECK(parseMatmulCostModel(p)->narrow.texelWalkMinSide == 16);
  for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json(2.5), nlohmann::json("16")}) {
    p["matmul"]["narrow"]["texel_walk_min_side"] = bad;
    CHECK(parseError(p).find("texel_walk_min_side") != std::string::npos);
  }
  p["matmul"]["narrow"].erase("texel_walk_min_side");
  // rows_in_group_min_side: the same rules.
  CHECK(parseMatmulCostModel(p)->narrow.rowsInGroupMinSide == 0);
  p["matmul"]["narrow"]["rows_in_group_min_side"] = 8;
  CHECK(parseMatmulCostModel(p)->narrow.rowsInGroupMinSide == 8);
  for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json(2.5), nlohmann::json("8")}) {
    p["matmul"]["narrow"]["rows_in_group_min_side"] = bad;
    CHECK(parseError(p).find("rows_in_group_min_side") != std::string::npos);
  }
  p["matmul"]["narrow"].erase("rows_in_group_min_side");
  // k_contiguous_weights: off unless the profile says; a boolean.
  CHECK_FALSE(parseMatmulCostModel(p)->narrow.kContiguousWeights);
  p["matmul"]["narrow"]["k_contiguous_weights"] = true;
  CHECK(parseMatmulCostModel(p)->narrow.kContiguousWeights);
  for (const nlohmann::json& bad : {nlohmann::json(1), nlohmann::json("true")}) {
    p["matmul"]["narrow"]["k_contiguous_weights"] = bad;
    CHECK(parseError(p).find("k_contiguous_weights") != std::string::npos);
  }
  p["matmul"]["narrow"].erase("k_contiguous_weights");
  // batch_products: 1 (a launch each) unless the profile says more; never below 1.
  CHECK(parseMatmulCostModel(p)->narrow.batchProducts == 1);
  p["matmul"]["narrow"]["batch_products"] = 8;
  CHECK(parseMatmulCostModel(p)->narrow.batchProducts == 8);
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(2.5), nlohmann::json("8")}) {
    p["matmul"]["narrow"]["batch_products"] = bad;
    CHECK(parseError(p).find("batch_products") != std::string::npos);
  }
  p["matmul"]["narrow"].erase("batch_products");
  p["matmul"]["narrow"]["work_items"] = 1024;  // 64 KB of tree, 48 KB of local memory
  CHECK(parseError(p).find("local memory") != std::string::npos);
  p["matmul"]["narrow"]["work_items"] = 256;
  p["matmul"]["narrow"]["fill_work_items"] = -1;
  CHECK(parseError(p).find("fill_work_items") != std::string::npos);
}

TEST_CASE("narrow products: K in chunks from chunk_min_k", "[codegen][matmul-tiling]") {
  NarrowOptions o;
  o.maxSide = 16;
  o.workItems = 256;
  o.fillWorkItems = 65536;
  // Off unless the profile says: down's x A^T at the MLP's width (512 x 8192 x 8) is one group
  // a 4 x 4 block, 256 slices over all of K.
  NarrowTiling off = chooseNarrowTiling(512, 8, 8192, o);
  CHECK((off.chunks == 1 && off.tm == 4 && off.tn == 4 && off.ks == 256));
  o.chunkMinK = 4096;
  // On: tiles of 32 rows by all 8 columns (8 x 2 blocks, 16 slices); 16 tiles, so 16 chunks of
  // 512 (8 rounds of 64) for the 256 groups the fill target asks for.
  NarrowTiling r8 = chooseNarrowTiling(512, 8, 8192, o);
  CHECK((r8.tm == 32 && r8.tn == 8 && r8.ks == 16 && r8.chunks == 16 && r8.chunkK == 512));
  // Rank 16: 8 x 4 blocks, 8 slices; chunks of 16 rounds of 32.
  NarrowTiling r16 = chooseNarrowTiling(512, 16, 8192, o);
  CHECK((r16.tm == 32 && r16.tn == 16 && r16.ks == 8 && r16.chunks == 16 && r16.chunkK == 512));
  // Chunks are whole rounds and cover K: K = 8200 (129 rounds) takes 15 chunks of 9 rounds.
  NarrowTiling odd = chooseNarrowTiling(512, 8, 8200, o);
  CHECK((odd.chunks == 15 && odd.chunkK == 9 * 64));
  CHECK((odd.chunks - 1) * odd.chunkK < 8200);
  CHECK(odd.chunks * odd.chunkK >= 8200);
  // Batches count as tiles: four matrices need a quarter of the chunks.
  CHECK(chooseNarrowTiling(512, 8, 8192, o, 4).chunks == 4);
  // Where M is shorter than chunk_rows, the tile covers M (in a power of two of row blocks).
  o.chunkRows = 64;
  NarrowTiling small = chooseNarrowTiling(24, 8, 8192, o);
  CHECK((small.tm == 32 && small.workItems() == 256 && small.chunks > 1));
  o.chunkRows = 32;
  // K below chunk_min_k, a narrow M, L transposed (row-block neighbours), or a product that
  // already fills the target: one group walks all of K.
  CHECK(chooseNarrowTiling(512, 8, 2048, o).chunks == 1);
  CHECK(chooseNarrowTiling(8, 512, 8192, o, 1, NarrowOrder::kTexels).chunks == 1);
  CHECK(chooseNarrowTiling(8192, 8, 8192, o, 1, NarrowOrder::kRowBlocks).chunks == 1);
  CHECK(chooseNarrowTiling(65536, 8, 8192, o).chunks == 1);

  // The profile: chunk_min_k an integer >= 0 (0: never), chunk_rows >= 4.
  nlohmann::json p = profileWith(nlohmann::json::array());
  p["matmul"]["narrow"] = {{"max_side", 16}, {"work_items", 256}, {"provenance", "measured: test"}};
  CHECK(parseMatmulCostModel(p)->narrow.chunkMinK == 0);
  CHECK(parseMatmulCostModel(p)->narrow.chunkRows == 32);
  p["matmul"]["narrow"]["chunk_min_k"] = 4096;
  p["matmul"]["narrow"]["chunk_rows"] = 16;
  CHECK(parseMatmulCostModel(p)->narrow.chunkMinK == 4096);
  CHECK(parseMatmulCostModel(p)->narrow.chunkRows == 16);
  for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json(2.5), nlohmann::json("4096")}) {
    p["matmul"]["narrow"]["chunk_min_k"] = bad;
    CHECK(parseError(p).find("chunk_min_k") != std::string::npos);
  }
  p["matmul"]["narrow"]["chunk_min_k"] = 4096;
  p["matmul"]["narrow"]["chunk_rows"] = 2;
  CHECK(parseError(p).find("chunk_rows") != std::string::npos);
}

TEST_CASE("narrow products: the narrow side whole in a work-item from wide_run", "[codegen][matmul-tiling]") {
  NarrowOptions o;
  o.maxSide = 16;
  o.workItems = 256;
  o.fillWorkItems = 65536;
  // Off unless the profile says: down's x^T dt at the MLP's width (8192 x 512 x 8, neighbours are
  // row blocks) is 32 x 8 tiles of 4 x 4 blocks, a block a work-item.
  NarrowTiling off = chooseNarrowTiling(8192, 8, 512, o, 1, NarrowOrder::kRowBlocks);
  CHECK((off.bm == 1 && off.bn == 1 && off.tm == 32 && off.tn == 8 && off.ks == 16));
  o.wideRun = 32;
  // On: a work-item owns both blocks of the rank side; a group 32 texels of M by 8 slices; 64
  // tiles, so K in 4 chunks of 4 rounds of 32 for the 256 groups the fill target asks for.
  NarrowTiling r8 = chooseNarrowTiling(8192, 8, 512, o, 1, NarrowOrder::kRowBlocks);
  CHECK((r8.bm == 1 && r8.bn == 2 && r8.tm == 128 && r8.tn == 8 && r8.ks == 8 && r8.workItems() == 256));
  CHECK((r8.chunks == 4 && r8.chunkK == 128));
  // Rank 16: four blocks a work-item.
  NarrowTiling r16 = chooseNarrowTiling(8192, 16, 512, o, 1, NarrowOrder::kRowBlocks);
  CHECK((r16.bn == 4 && r16.tm == 128 && r16.tn == 16 && r16.ks == 8 && r16.chunks == 4));
  // A narrow M walked by output texels (gate's t^T dy): row blocks in the work-item.
  NarrowTiling tdy = chooseNarrowTiling(8, 8192, 512, o, 1, NarrowOrder::kTexels);
  CHECK((tdy.bm == 2 && tdy.bn == 1 && tdy.tm == 8 && tdy.tn == 128 && tdy.ks == 8 && tdy.chunks == 4));
  // A launch of four products fills the device by itself: one group walks all of K.
  CHECK(chooseNarrowTiling(8192, 8, 512, o, 4, NarrowOrder::kRowBlocks).chunks == 1);
  // No more slices than K has texels; the run no longer than the wide side.
  NarrowTiling shortK = chooseNarrowTiling(8192, 8, 16, o, 1, NarrowOrder::kRowBlocks);
  CHECK((shortK.ks == 4 && shortK.tm == 128 && shortK.chunks == 1));
  CHECK(chooseNarrowTiling(40, 8, 512, o, 1, NarrowOrder::kRowBlocks).tm == 64);
  // Not where neighbouring work-items are K slices (x A^T) or the narrow side's texels (a texel
  // walk), nor past 16 wide.
  CHECK(chooseNarrowTiling(512, 8, 8192, o).bn == 1);
  CHECK(chooseNarrowTiling(512, 8, 8192, o, 1, NarrowOrder::kTexels).bn == 1);
  CHECK(chooseNarrowTiling(8192, 20, 512, o, 1, NarrowOrder::kRowBlocks).bn == 1);

  // The profile: wide_run an integer >= 0 (0: never).
  nlohmann::json p = profileWith(nlohmann::json::array());
  p["matmul"]["narrow"] = {{"max_side", 16}, {"work_items", 256}, {"provenance", "measured: test"}};
  CHECK(parseMatmulCostModel(p)->narrow.wideRun == 0);
  p["matmul"]["narrow"]["wide_run"] = 32;
  CHECK(parseMatmulCostModel(p)->narrow.wideRun == 32);
  for (const nlohmann::json& bad :
       {nlohmann::json(-1), nlohmann::json(2.5), nlohmann::json("32"), nlohmann::json(512), nlohmann::json(INT64_MAX)}) {
    p["matmul"]["narrow"]["wide_run"] = bad;
    CHECK(parseError(p).find("wide_run") != std::string::npos);  // 512, INT64_MAX: wider than a group of 256
  }
  // A run not a power of two is rounded up to one.
  o.wideRun = 20;
  CHECK(chooseNarrowTiling(8192, 8, 512, o, 1, NarrowOrder::kRowBlocks).tm == 128);
}

}  // namespace
}  // namespace fbl::codegen
