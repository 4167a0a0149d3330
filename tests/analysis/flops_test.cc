// Modeled FLOPs per node: each expected count comes from walking the naive loop nest of the op
// and counting its arithmetic, not from the formula under test.
#include <catch2/catch.hpp>

#include "compiler/analysis/flops.h"
#include "compiler/ir/parser.h"

using namespace fbl;

namespace {

ir::Graph parse(const char* text) {
  auto g = ir::parseGraph(text);
  INFO((g.ok() ? std::string() : g.error().message));
  REQUIRE(g.ok());
  return std::move(g).value();
}

int64_t flopsOf(const ir::Graph& g, const char* node) {
  for (const ir::Node& n : g.nodes)
    if (n.name == node) return analysis::nodeFlops(g, n);
  FAIL("no node " << node);
  return -1;
}

// C[b,m,n] += A[b,m,k] * B[k,n]: one multiply and one add per (b, m, n, k).
int64_t naiveMatMul(int64_t batch, int64_t m, int64_t n, int64_t k) {
  int64_t f = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p) f += 2;
  return f;
}

}  // namespace

TEST_CASE("modeled FLOPs follow the naive loop nests", "[analysis][flops]") {
  ir::Graph g = parse(R"(graph "t" opset 20
  input %x : f32[2,3,4]
  init %w : f32[4,5]
  init %a : f32[6,3]
  init %b : f32[6,7]
  init %c : f32[7]
  init %img : f32[1,2,6,6]
  init %k : f32[4,2,3,3]
  const %shape : i64[2] = [6,5]
  %y : f32[2,3,5] = MatMul(%x, %w) @mm
  %g : f32[3,7] = Gemm(%a, %b, %c) {transA=1} @gemm
  %cv : f32[1,4,4,4] = Conv(%img, %k) @conv
  %s : f32[2,3,5] = Add(%y, %y) @add
  %r : f32[6,5] = Reshape(%s, %shape) @reshape
  %t : f32[5,6] = Transpose(%r) {perm=[1,0]} @transpose
  %sm : f32[5,6] = Softmax(%t) {axis=-1} @softmax
  %rs : f32[5] = ReduceSum(%sm) @reduce
  output %rs
  output %g
  output %cv
)");
  CHECK(flopsOf(g, "mm") == naiveMatMul(2, 3, 5, 4));
  // transA: A is [K, M] = [6, 3]; plus one add of C per output element.
  CHECK(flopsOf(g, "gemm") == naiveMatMul(1, 3, 7, 6) + 3 * 7);
  int64_t conv = 0;  // out[n,co,y,x] += img[...] * k[co,ci,dy,dx]
  for (int co = 0; co < 4; ++co)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        for (int ci = 0; ci < 2; ++ci)
          for (int dy = 0; dy < 3; ++dy)
            for (int dx = 0; dx < 3; ++dx) conv += 2;
  CHECK(flopsOf(g, "conv") == conv);
  CHECK(flopsOf(g, "add") == 2 * 3 * 5);
  CHECK(flopsOf(g, "reshape") == 0);
  CHECK(flopsOf(g, "transpose") == 0);
  CHECK(flopsOf(g, "reduce") == 5 * 6);  // one add per input element
  CHECK(flopsOf(g, "softmax") > 5 * 6);  // several passes over each element
}
