// The lowering passes' dumps (compiler/plan/lowering_printer.h) on a small graph, diffed as text:
// a transpose folded into the MatMul that reads it, a Relu fused into that MatMul's store, and
// the weights' R-Tile; then the same passes on assignments stated in the layout text form
// (compiler/passes/layout_text.h): an explicit read lowered to one copy, and one LoRA branch's
// low-rank term and epilogue.
#include <catch2/catch.hpp>

#include <set>

#include "compiler/ir/parser.h"
#include "compiler/passes/layout_pipeline.h"
#include "compiler/passes/layout_text.h"
#include "compiler/plan/layout_lowering.h"
#include "compiler/profile/profile.h"

namespace fbl::plan {

namespace {

// The section `// ---- NAME ----` of a dump, up to the next section.
std::string section(const std::string& dump, const std::string& name) {
  const std::string head = "// ---- " + name + " ----\n";
  const size_t at = dump.find(head);
  if (at == std::string::npos) return "(no section " + name + ")";
  const size_t from = at + head.size();
  const size_t to = dump.find("// ---- ", from);
  return dump.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

// The dumps `after` the lowering passes print when they lower the assignment stated in `text`
// (passes/layout_text.h) on the pocl-cpu profile; the graph's initializers are host values.
std::string lowerStated(const std::string& text, const std::set<std::string>& after) {
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  auto lg = passes::parseLayoutGraph(text, *hw, "stated.ir");
  INFO((lg.ok() ? std::string() : lg.error().message));
  REQUIRE(lg.ok());
  const std::vector<ir::ValueId> mustExist;
  LoweringOptions options;
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(lg->graph.values.size()); ++v)
    if (lg->graph.values[v].kind == ir::ValueKind::Initializer) options.host.hostValues.push_back(v);
  LoweringPasses lowering(lg->assignment, mustExist, options);
  passes::PassOptions o;
  std::string dump;
  o.sink = [&](std::string_view s) { dump += s; };
  o.dumpAfter = after;
  passes::PassManager pm(o);
  lowering.addTo(pm);
  auto runs = pm.run(lg->graph);
  INFO((runs.ok() ? dump : runs.error().message));
  REQUIRE(runs.ok());
  return dump;
}

}  // namespace

TEST_CASE("the lowering passes' --dump-after prints what each pass decided", "[plan][lowering-dump]") {
  auto g = ir::parseGraph(R"(graph "t" opset 20
  input %x : f32[8,16]
  init %w : f32[8,32]
  %xt : f32[16,8] = Transpose(%x) {perm=[1,0]} @xt
  %y : f32[16,32] = MatMul(%xt, %w) @mm
  %z : f32[16,32] = Relu(%y) @relu
  output %z
)");
  REQUIRE(g.ok());
  auto hw = profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(hw.ok());
  passes::LayoutAssignment a;
  passes::LayoutPasses layout(a, *hw);
  const std::vector<ir::ValueId> mustExist;
  LoweringOptions options;
  options.host.hostValues = {g->findValue("w")};
  LoweringPasses lowering(a, mustExist, options);
  passes::PassOptions o;
  std::string dump;
  o.sink = [&](std::string_view s) { dump += s; };
  o.dumpAfter = {"lower-layouts", "fusion", "assign-storage"};
  passes::PassManager pm(o);
  layout.addTo(pm);
  lowering.addTo(pm);
  auto runs = pm.run(*g);
  INFO((runs.ok() ? dump : runs.error().message));
  REQUIRE(runs.ok());
  // xt[i0, i1] = x[i1, i0]: the MatMul reads x at i1 * 16 + i0 and the transpose runs nothing.
  CHECK(section(dump, "lower-layouts") ==
        "fblayout: 1 movement ops skipped, 1 reads through a map (0 transposed), 0 chains materialised\n"
        "xt (Transpose): skipped (its readers read through it)\n"
        "mm (MatMul): input 0 reads %x through [16,8] -> buffer[128]: i1 * 16 + i0\n");
  CHECK(section(dump, "fusion") ==
        "1 nodes fused: 1 MatMul epilogues, 0 kernels computing inlined producers, 0 low-rank terms\n"
        "mm (MatMul): epilogue relu (Relu)\n"
        "mm (MatMul): deferred to its epilogue's last node\n"
        "relu (Relu): emits mm (MatMul)'s kernel here\n");
  // The weight, written by the runtime, takes its R-Tile (one 8 x 32 tile: row-major offsets);
  // the input is neither produced nor a host value here, the output is read back, and y never
  // leaves the fused kernel.
  CHECK(section(dump, "assign-storage") ==
        "1 values stored in R-Tiles (2 kept row-major), 0 in images, 1 host values packed, 0 movement kernels\n"
        "%w: stored [8,32] -> buffer[256]: i0 * 32 + i1 (rtile 8x32 blocks 4x4->1x4 rows-along-x)\n"
        "%x: row-major, a constant of the plan, uploaded as it is\n"
        "%z: row-major, read back by the runtime\n"
        "%y: only inside a fused kernel\n");
}

TEST_CASE("the lowering passes lower an assignment stated as text", "[plan][lowering-dump]") {
  // The graph above with a Reshape for the Transpose, its read stated explicit.
  const std::string stated = R"(graph "t" opset 20
  input %x : f32[8,16]
  init %w : f32[8,32] <rtile 8x32 blocks 4x4:1x4 rows-along-x anchor written>
  const %shape : i64[2] = [16,8]
  %xt : f32[16,8] = Reshape(%x, %shape) @xt <FTI-D explicit "kept as a copy">
  %y : f32[16,32] = MatMul(%xt <explicit "kept as a copy" convert>, %w) @mm <FTD-D>
  %z : f32[16,32] = Relu(%y) @relu <FTD-C>
  output %z
)";
  const std::string dump = lowerStated(stated, {"lower-layouts", "assign-storage"});
  // The dumps print the IR with the assignment they lowered.
  CHECK(section(dump, "IR after lower-layouts") == stated);
  // The explicit read becomes one copy of x before the MatMul, in place of the Reshape.
  CHECK(section(dump, "lower-layouts") ==
        "fblayout: 1 movement ops skipped, 0 reads through a map (0 transposed), 1 chains materialised\n"
        "xt (Reshape): skipped (its readers read through it)\n"
        "mm (MatMul): materialises %xt first, one copy of %x through [16,8] -> buffer[128]: i0 * 8 + i1\n");
  CHECK(section(dump, "assign-storage").find("%w: stored [8,32] -> buffer[256]: i0 * 32 + i1 (rtile 8x32 blocks") !=
        std::string::npos);
}

TEST_CASE("one LoRA branch's low-rank term and epilogue, from a stated assignment", "[plan][lowering-dump]") {
  // y = x W + (x A) B * s, with the R-Tiles the layout pipeline gives it on this profile.
  const std::string dump = lowerStated(R"(graph "lora" opset 20
  input %x : f32[16,32] <rtile 16x32 blocks 4x4:1x4 cols-along-x anchor written>
  init %w : f32[32,32] <rtile 32x32 blocks 4x4:1x4 rows-along-x anchor written>
  init %a : f32[32,4]
  init %b : f32[4,32] <rtile 4x32 blocks 4x4:1x4 rows-along-x anchor written>
  const %s : f32[] = [0.5]
  %base : f32[16,32] <rtile 16x32 blocks 4x4:1x4 cols-along-x written> = MatMul(%x, %w) @base <FTD-D>
  %t : f32[16,4] = MatMul(%x, %a) @lora_a <FTD-D>
  %u : f32[16,32] = MatMul(%t, %b) @lora_b <FTD-D>
  %us : f32[16,32] = Mul(%u, %s) @scale <FTI-C>
  %y : f32[16,32] <rtile of %base written> = Add(%base, %us) @add <FTI-C>
  output %y
)", {"low-rank-terms", "fusion"});
  // The narrow product t B and its scale run inside the base product's kernel, and the Add that
  // sums them becomes that kernel's epilogue: one launch where there were four.
  CHECK(section(dump, "low-rank-terms") ==
        "2 nodes fused: 0 MatMul epilogues, 0 kernels computing inlined producers, 1 low-rank terms\n"
        "base (MatMul): adds the low-rank term lora_b (MatMul) * scale (Mul)\n");
  CHECK(section(dump, "fusion") ==
        "3 nodes fused: 1 MatMul epilogues, 0 kernels computing inlined producers, 1 low-rank terms\n"
        "base (MatMul): adds the low-rank term lora_b (MatMul) * scale (Mul)\n"
        "base (MatMul): epilogue add (Add)\n"
        "base (MatMul): deferred to its epilogue's last node\n"
        "add (Add): emits base (MatMul)'s kernel here\n");
}

}  // namespace fbl::plan
