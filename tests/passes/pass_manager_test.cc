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
  pm2.add(rename, passes::PassSpec::required("the test needs it"));
  auto r = pm2.run(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "--disable-pass rename-relu: the pipeline cannot run without it (the test needs it)");
}

namespace {

// Gives %y its shape, as fold-and-infer gives every value one.
struct InferY {
  static constexpr std::string_view name() { return "infer-y"; }
  Result<bool> run(ir::Graph& g) {
    ir::Value& y = g.values[g.findValue("y")];
    y.shape = {2, 3};
    y.shapeKnown = true;
    return true;
  }
};

}  // namespace

TEST_CASE("pass manager: static shapes are required only after the pass that infers them", "[passes][pass-manager]") {
  ir::Graph g = small();
  g.values[g.findValue("y")].shape = {};
  g.values[g.findValue("y")].shapeKnown = false;
  passes::PassOptions o;
  o.verify = true;
  InferY infer;
  passes::PassManager without(o);
  without.add(infer);
  auto r = without.run(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.rfind("before the first pass: ", 0) == 0);

  passes::PassSpec spec;
  spec.infersShapes = true;
  passes::PassManager with(o);
  with.add(infer, spec);
  auto ok = with.run(g);
  INFO((ok.ok() ? "" : ok.error().message));
  CHECK(ok.ok());
}

TEST_CASE("pass manager: a pass's own check runs after it with the verifier", "[passes][pass-manager]") {
  ir::Graph g = small();
  Rename rename;
  int checks = 0;
  passes::PassOptions o;
  o.verify = true;
  passes::PassManager pm(o);
  pm.add(rename, passes::PassSpec::checked([&](const ir::Graph& h) -> Status {
    ++checks;
    if (h.nodes[0].op == "Sigmoid") return makeError("relu renamed");
    return Status::success();
  }));
  auto r = pm.run(g);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "after pass rename-relu: relu renamed");
  CHECK(checks == 1);

  ir::Graph g2 = small();
  passes::PassOptions off;
  off.verify = false;
  passes::PassManager quiet(off);  // verifier off: no check
  Rename again;
  quiet.add(again, passes::PassSpec::checked([&](const ir::Graph&) -> Status { return makeError("unexpected"); }));
  CHECK(quiet.run(g2).ok());
}
