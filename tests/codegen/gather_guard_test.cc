// The layout gather's guard (emitGather, gather_layout.cl): with its table in a row-major
// buffer, an R-Tile buffer, an R-Tile image or MNN's image, an index outside [-V, V) gathers 0
// and reads nothing (an unguarded buffer read far outside faults; an image read outside its
// extent is undefined), every other index its row, as a host loop says.
#include <catch2/catch.hpp>

#include <random>

#include "compiler/codegen/emit_util.h"
#include "compiler/codegen/operand_layout.h"
#include "harness/cl_session.h"
#include "tests/codegen/layout_kernel_harness.h"
#include "tests/ops/graph_builder.h"

namespace fbl::codegen {
namespace {

using layout::Layout;
using layout::TileSpec;

TEST_CASE("the layout gather writes 0 for an index outside its table", "[operand-layout][inputs]") {
  const int64_t V = 16, D = 8;
  auto session = kernel_test::openSession();
  std::mt19937 rng(13);
  const std::vector<Layout> layouts = {
      Layout::rowMajor({V, D}), kernel_test::must(Layout::rtile({V, D}, TileSpec::rowStrips(8, 8), layout::Storage::Buffer)),
      kernel_test::must(Layout::rtile({V, D}, TileSpec::blocks(8, 8, 4, 4, 1, 4), layout::Storage::Image2D)),
      Layout::image({V, D})};
  std::vector<float> table(V * D);
  for (float& x : table) x = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);  // never 0
  const std::vector<int64_t> ids = {0, 15, -16, 16, -17, int64_t{1} << 40, -(int64_t{1} << 40), 7};
  for (const Layout& l : layouts) {
    INFO(l.str());
    testing::GraphBuilder b;
    const ir::ValueId data = b.input("data", ir::DType::F32, {V, D}), idx = b.input("idx", ir::DType::I64, {2, 4});
    kernel_test::typedOp(b, "Gather", {data, idx}, {2, 4, D});
    NodeLayouts nl;
    nl.inputs = {OperandLayout{data, l, false, std::nullopt}, std::nullopt};
    nl.outputs = {std::nullopt};
    auto code = emitNode(b.g, b.g.nodes.back(), Target{}, nl);
    if (!code.ok()) FAIL(code.error().message);
    REQUIRE(code->launches.size() == 1);
    const bool image = l.storage() == layout::Storage::Image2D;
    auto dm = session->allocate(image ? l : Layout::rowMajor({l.bufferSize()}));
    REQUIRE(dm.ok());
    if (image) {
      REQUIRE(session->upload(*dm, l, table).ok());
    } else {
      std::vector<float> stored(static_cast<size_t>(l.bufferSize()), 0.0f);
      for (int64_t r = 0; r < V; ++r)
        for (int64_t c = 0; c < D; ++c) stored[l.locate(std::vector<int64_t>{r, c})[0]] = table[r * D + c];
      session->release(*dm);
      dm = session->buffer(stored.size(), stored.data());
      REQUIRE(dm.ok());
    }
    auto im = session->buffer(ids.size() * 2, reinterpret_cast<const float*>(ids.data()));
    std::vector<float> poison(2 * 4 * D, -1.0f);  // every element must be overwritten
    auto om = session->buffer(poison.size(), poison.data());
    REQUIRE((im.ok() && om.ok()));
    const LaunchSpec& ls = code->launches[0];
    RTileKernel k;
    k.name = "gather_guard";
    k.source = ls.source;
    for (size_t p; (p = k.source.find("{{NAME}}")) != std::string::npos;) k.source.replace(p, 8, k.name);
    for (int64_t g : ls.global) k.global.push_back(static_cast<size_t>(g));
    for (int64_t g : ls.local) k.local.push_back(static_cast<size_t>(g));
    k.args = {"data", "idx", "out"};
    INFO(k.source);
    auto run = session->run(k, {*dm, *im, *om});
    if (!run.ok()) FAIL(run.error().message);
    auto out = session->readBuffer(*om, poison.size());
    REQUIRE(out.ok());
    for (size_t t = 0; t < ids.size(); ++t) {
      const int64_t row = ids[t] < 0 ? ids[t] + V : ids[t];
      for (int64_t c = 0; c < D; ++c) {
        INFO("id " << ids[t] << " column " << c);
        CHECK((*out)[t * D + c] == (row >= 0 && row < V ? table[row * D + c] : 0.0f));
      }
    }
    for (cl_mem m : {*dm, *im, *om}) session->release(m);
  }
}

}  // namespace
}  // namespace fbl::codegen
