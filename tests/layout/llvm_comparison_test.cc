// Evidence for docs/index-simplification.md's LLVM decision: the same index expressions, raw
// and simplified, compiled by clang-15 -O2 (InstCombine and friends) as unsigned C functions,
// with the variables' ranges given to LLVM through __builtin_assume. Counts udiv/urem and all
// instructions per function; the raw expressions also once without the ranges (what a device
// compiler sees in emitted code). Skipped (with a warning) where clang-15 is not installed.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include "compiler/layout/layout.h"
#include "compiler/layout/simplify.h"

using namespace fbl::layout;
using fbl::ir::Shape;

namespace {

struct Case {
  std::string name;
  Expr raw;
  std::vector<Expr> vars;
};

struct Cost {
  int divRem = 0, instructions = 0;
};

std::string cFunction(const std::string& fn, const Expr& e, const std::vector<Expr>& vars, bool ranges = true) {
  std::string s = "unsigned " + fn + "(";
  for (size_t k = 0; k < vars.size(); ++k) s += (k ? ", unsigned " : "unsigned ") + vars[k].name();
  s += ") {\n";
  for (const Expr& v : vars)
    if (ranges) s += "  __builtin_assume(" + v.name() + " < " + std::to_string(v.extent()) + "u);\n";
  auto body = toOpenCL(e);
  REQUIRE(body.ok());
  return s + "  return " + *body + ";\n}\n";
}

// Per function in the .ll text: udiv/urem and instruction lines (assumes excluded).
std::map<std::string, Cost> costs(const std::string& ll) {
  std::map<std::string, Cost> out;
  std::istringstream in(ll);
  std::string line, fn;
  while (std::getline(in, line)) {
    if (line.rfind("define ", 0) == 0) {
      size_t at = line.find('@'), paren = line.find('(', at);
      fn = line.substr(at + 1, paren - at - 1);
      continue;
    }
    if (line == "}") { fn.clear(); continue; }
    if (fn.empty() || line.size() < 3 || line[0] != ' ') continue;
    if (line.find("llvm.assume") != std::string::npos || line.find("icmp ult") != std::string::npos) continue;
    Cost& c = out[fn];
    c.instructions++;
    if (line.find(" udiv ") != std::string::npos || line.find(" urem ") != std::string::npos ||
        line.find(" sdiv ") != std::string::npos || line.find(" srem ") != std::string::npos)
      c.divRem++;
  }
  return out;
}

std::vector<Expr> varsOf(const Shape& s) { return IndexMap::vars(s); }

// Buffer offsets read through a movement chain from a row-major producer (raw composition).
Expr chainOffset(const Shape& producer, const std::vector<MovementOp>& ops) {
  auto view = chainMap(producer, ops);
  REQUIRE(view.ok());
  auto raw = compose(Layout::rowMajor(producer).map(), *view);
  REQUIRE(raw.ok());
  return raw->outputs()[0];
}

std::vector<Case> cases() {
  std::vector<Case> out;
  Expr i = Expr::var(0, 4096, "i0"), j = Expr::var(1, 64, "i1");
  out.push_back({"(i % 96) % 32", floorMod(floorMod(i, 96), 32), {i}});
  out.push_back({"(i/64)%8*64 + i%64", floorMod(floorDiv(i, 64), 8) * 64 + floorMod(i, 64), {i}});
  out.push_back({"(i*64 + j) / 64", floorDiv(i * 64 + j, 64), {i, j}});
  out.push_back({"(i*768 + j) % 768", floorMod(i * 768 + j, 768), {i, j}});
  // Attention chains: Llama-3.2-1B (powers of two), BERT-base (hidden 768), Qwen2-0.5B-like GQA
  // (14 heads over 2 kv heads: rep 7).
  struct Cfg { const char* name; int64_t S, H, K, D; };
  for (Cfg c : {Cfg{"llama-1b", 512, 32, 8, 64}, Cfg{"bert-base", 128, 12, 12, 64}, Cfg{"qwen-0.5b", 512, 14, 2, 64}}) {
    Shape q{1, c.S, c.H * c.D}, kv{1, c.S, c.K * c.D};
    std::vector<MovementOp> heads = {MovementOp::reshape({1, c.S, c.H, c.D}), MovementOp::permute({0, 2, 1, 3})};
    out.push_back({std::string(c.name) + " Q heads", chainOffset(q, heads), varsOf({1, c.H, c.S, c.D})});
    if (c.K != c.H) {
      std::vector<MovementOp> gqa = {MovementOp::reshape({1, c.S, c.K, c.D}), MovementOp::permute({0, 2, 1, 3}),
                                     MovementOp::unsqueeze({2}), MovementOp::expand({1, c.K, c.H / c.K, c.S, c.D}),
                                     MovementOp::reshape({1, c.H, c.S, c.D})};
      out.push_back({std::string(c.name) + " K GQA", chainOffset(kv, gqa), varsOf({1, c.H, c.S, c.D})});
    }
    std::vector<MovementOp> merge = {MovementOp::permute({0, 2, 1, 3}), MovementOp::reshape({1, c.S, c.H * c.D})};
    out.push_back({std::string(c.name) + " merge", chainOffset({1, c.H, c.S, c.D}, merge), varsOf({1, c.S, c.H * c.D})});
  }
  return out;
}

}  // namespace

TEST_CASE("LLVM -O2 vs the rule table on index expressions", "[layout]") {
  if (std::system("clang-15 --version > /dev/null 2>&1") != 0) {
    WARN("clang-15 not installed: LLVM comparison skipped");
    return;
  }
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("fbl-layout-llvm-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<Case> cs = cases();
  std::string src;
  std::vector<Expr> simplified;
  for (size_t k = 0; k < cs.size(); ++k) {
    simplified.push_back(simplify(cs[k].raw));
    src += cFunction("raw" + std::to_string(k), cs[k].raw, cs[k].vars);
    src += cFunction("ours" + std::to_string(k), simplified[k], cs[k].vars);
    src += cFunction("blind" + std::to_string(k), cs[k].raw, cs[k].vars, false);
  }
  std::ofstream(dir / "exprs.c") << src;
  // The same printer's output is valid OpenCL C for uint index variables (DEPS.md pitfall 7).
  std::string cl;
  for (size_t k = 0; k < cs.size(); ++k) {
    std::string fn = cFunction("cl" + std::to_string(k), simplified[k], cs[k].vars, false);
    for (size_t at; (at = fn.find("unsigned")) != std::string::npos;) fn.replace(at, 8, "uint");
    cl += fn;
  }
  std::ofstream(dir / "exprs.cl") << cl;
  std::string clCmd = "clang-15 -x cl -cl-std=CL1.2 -Xclang -finclude-default-header -fsyntax-only -Werror " +
                      (dir / "exprs.cl").string();
  CHECK(std::system(clCmd.c_str()) == 0);
  std::string cmd = "clang-15 -O2 -S -emit-llvm -x c " + (dir / "exprs.c").string() + " -o " + (dir / "exprs.ll").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::stringstream ll;
  ll << std::ifstream(dir / "exprs.ll").rdbuf();
  auto cost = costs(ll.str());
  fs::remove_all(dir);

  std::ostringstream table;
  table << "\n| expression | div/mod raw | LLVM on raw, no ranges | LLVM on raw + ranges | ours: div/mod | LLVM on ours |\n"
        << "|---|---|---|---|---|---|\n";
  for (size_t k = 0; k < cs.size(); ++k) {
    Cost r = cost["raw" + std::to_string(k)], o = cost["ours" + std::to_string(k)], b = cost["blind" + std::to_string(k)];
    table << "| " << cs[k].name << " | " << countDivMod(cs[k].raw) << " | " << b.divRem << ", " << b.instructions
          << " | " << r.divRem << ", " << r.instructions
          << " | " << countDivMod(simplified[k]) << " | " << o.divRem << ", " << o.instructions << " |\n";
    INFO(cs[k].name);
    // The rule table never leaves more for the device compiler than LLVM alone would.
    CHECK(o.divRem <= r.divRem);
    CHECK(o.instructions <= r.instructions);
  }
  WARN(table.str());
}
