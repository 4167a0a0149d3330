// verify: each invariant, broken on purpose, is reported with the node and value it concerns.
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/passes/verify.h"

using namespace fbl;

namespace {

ir::Graph good() {
  auto g = ir::parseGraph(R"(graph "t" opset 20
  input %x : f32[2,3]
  init %w : f32[3,4]
  %y : f32[2,4] = MatMul(%x, %w) @mm
  %z : f32[2,4] = Relu(%y) @relu
  output %z
)");
  REQUIRE(g.ok());
  return std::move(g).value();
}

std::string failure(const ir::Graph& g) {
  Status s = passes::verifyGraph(g);
  return s.ok() ? std::string() : s.error().message;
}

}  // namespace

TEST_CASE("verify: a well-formed graph passes", "[passes][verify]") {
  ir::Graph g = good();
  CHECK(passes::verifyGraph(g).ok());
  passes::Verify v;
  auto r = v.run(g);
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
}

TEST_CASE("verify: broken IR is caught", "[passes][verify]") {
  SECTION("topological order") {
    ir::Graph g = good();
    std::swap(g.nodes[0], g.nodes[1]);
    for (size_t i = 0; i < g.nodes.size(); ++i) g.values[g.nodes[i].outputs[0]].producer = static_cast<ir::NodeId>(i);
    CHECK(failure(g).find("before it is defined") != std::string::npos);
  }
  SECTION("undefined input id") {
    ir::Graph g = good();
    g.nodes[1].inputs[0] = 999;
    CHECK(failure(g).find("not a value") != std::string::npos);
  }
  SECTION("value defined twice") {
    ir::Graph g = good();
    g.nodes[1].outputs[0] = g.nodes[0].outputs[0];
    CHECK(failure(g).find("defined twice") != std::string::npos);
  }
  SECTION("unknown shape") {
    ir::Graph g = good();
    g.values[g.nodes[0].outputs[0]].shapeKnown = false;
    CHECK(failure(g).find("no static shape") != std::string::npos);
    passes::VerifyOptions lax;
    lax.requireShapes = false;
    CHECK(passes::verifyGraph(g, lax).ok());
  }
  SECTION("schema arity") {
    ir::Graph g = good();
    g.nodes[1].inputs.push_back(g.nodes[1].inputs[0]);
    CHECK(failure(g).find("relu") != std::string::npos);
  }
  SECTION("unknown op") {
    ir::Graph g = good();
    g.nodes[1].op = "Frobnicate";
    CHECK(failure(g).find("unknown op") != std::string::npos);
  }
  SECTION("graph output never defined") {
    ir::Graph g = good();
    g.nodes[1].dead = true;
    CHECK(failure(g).find("never defined") != std::string::npos);
  }
}
