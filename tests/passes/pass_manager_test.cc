// PassManager: verifier between passes, --dump-after, --disable-pass, timings.
#include <catch2/catch.hpp>

#include "compiler/ir/parser.h"
#include "compiler/passes/pass_manager.h"

using namespace fbl;

namespace {

ir::Graph small() {
  auto g = ir::parseGraph(R"(graph "t" opset 20
  input %x : f32[2,3]
  %y : f32[2,3] = Relu(%x) @relu
  %z : f32[2,3] = Neg(%y) @neg
  output %z
)");
  REQUIRE(g.ok());
  return std::move(g).value();
}

struct Rename {
  static constexpr std::string_view name() { return "rename-relu"; }
  Result<bool> run(ir::Graph& g) {
    ++runs;
    g.nodes[0].op = "Sigmoid";
    return true;
  }
  std::string dump(const ir::Graph&) const { return "renamed\n"; }
  int runs = 0;
};

// Breaks topological order on purpose.
struct Scramble {
  static constexpr std::string_view name() { return "scramble"; }
  Result<bool> run(ir::Graph& g) {
    std::swap(g.nodes[0], g.nodes[1]);
    return true;
  }
};

}  // namespace

TEST_CASE("pass manager: runs, dumps and disables passes", "[passes][pass-manager]") {
  ir::Graph g = small();
  Rename rename;
  passes::PassOptions o;
  std::string out;
  o.sink = [&](std::string_view s) { out += s; };
  o.dumpAfter = {"rename-relu"};
  o.verify = true;
  passes::PassManager pm(o);
  pm.add(rename);
  auto runs = pm.run(g);
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 1);
  CHECK((*runs)[0].ran);
  CHECK((*runs)[0].changed);
  CHECK(out.find("// ---- IR after rename-relu ----") != std::string::npos);
  CHECK(out.find("Sigmoid(%x)") != std::string::npos);
  CHECK(out.find("renamed") != std::string::npos);

  ir::Graph g2 = small();
  Rename off;
  passes::PassOptions o2;
  o2.disabled = {"rename-relu"};
  passes::PassManager pm2(o2);
  pm2.add(off);
  auto runs2 = pm2.run(g2);
  REQUIRE(runs2.ok());
  CHECK_FALSE((*runs2)[0].ran);
  CHECK(off.runs == 0);
  CHECK(g2.nodes[0].op == "Relu");
}

TEST_CASE("pass manager: the verifier names the pass that broke the IR", "[passes][pass-manager]") {
  ir::Graph g = small();
  Scramble s;
  passes::PassOptions o;
  o.verify = true;
  passes::PassManager pm(o);
  pm.add(s);
  auto r = pm.run(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("after pass scramble") != std::string::npos);
}

TEST_CASE("pass manager: unknown and required pass names are errors", "[passes][pass-manager]") {
  ir::Graph g = small();
  Rename rename;
  passes::PassOptions o;
  o.dumpAfter = {"renam-relu"};
  passes::PassManager pm(o);
  pm.add(rename);
  CHECK_FALSE(pm.run(g).ok());
  passes::PassOptions o2;
  o2.disabled = {"rename-relu"};
  passes::PassManager pm2(o2);
  pm2.add(rename, /*required=*/true);
  auto r = pm2.run(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("cannot run without it") != std::string::npos);
}
