// PassManager: the algorithm is in pass_manager.h (steps 1-5).
#include "compiler/passes/pass_manager.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "compiler/ir/printer.h"

namespace fbl::passes {

namespace {

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<std::string> PassManager::names() const {
  std::vector<std::string> n;
  for (const Entry& e : entries_) n.push_back(e.name);
  return n;
}

void PassManager::emit(std::string_view text) const {
  if (opts_.sink) opts_.sink(text);
  else std::fwrite(text.data(), 1, text.size(), stdout);
}

Result<std::vector<PassRun>> PassManager::run(ir::Graph& g) {
  auto known = [&](const std::string& n) {
    for (const Entry& e : entries_)
      if (e.name == n) return true;
    return false;
  };
  std::string all, steps;
  for (const Entry& e : entries_) all += (all.empty() ? "" : ", ") + e.name;
  for (const PlanStep& st : opts_.planSteps) steps += (steps.empty() ? "" : ", ") + st.name;
  auto step = [&](const std::string& n) -> const PlanStep* {
    for (const PlanStep& st : opts_.planSteps)
      if (st.name == n) return &st;
    return nullptr;
  };
  // "no such pass (passes: ...)", naming the steps as well where there are any.
  auto unknown = [&](const char* flag, const std::string& n) {
    if (steps.empty()) return makeError("{} {}: no such pass (passes: {})", flag, n, all);
    return makeError("{} {}: no such pass or plan step (passes: {}; plan steps: {})", flag, n, all, steps);
  };
  for (const std::string& n : opts_.disabled) {
    if (const PlanStep* st = step(n)) {
      if (!st->requiredBecause.empty())
        return makeError("--disable-pass {}: the plan cannot be built without it ({})", n, st->requiredBecause);
      continue;
    }
    if (!known(n)) return unknown("--disable-pass", n);
    for (const Entry& e : entries_)
      if (e.name == n && !e.spec.requiredBecause.empty())
        return makeError("--disable-pass {}: the pipeline cannot run without it ({})", n, e.spec.requiredBecause);
  }
  for (const std::string& n : opts_.dumpAfter)
    if (n != "all" && !known(n) && !step(n)) return unknown("--dump-after", n);

  std::vector<PassRun> runs;
  VerifyOptions vo = opts_.verifyOptions;
  for (const Entry& e : entries_)
    if (e.spec.infersShapes) vo.requireShapes = false;  // until that pass ran
  if (opts_.verify) {
    if (Status s = verifyGraph(g, vo); !s.ok()) return makeError("before the first pass: {}", s.error().message);
  }
  for (const Entry& e : entries_) {
    PassRun r;
    r.name = e.name;
    if (opts_.disabled.count(e.name)) {
      runs.push_back(r);
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto changed = e.run(g);
    r.ms = msSince(t0);
    if (!changed.ok()) return makeError("{}: {}", e.name, changed.error().message);
    r.ran = true;
    r.changed = *changed;
    if (e.spec.infersShapes) vo.requireShapes = opts_.verifyOptions.requireShapes;
    if (opts_.verify) {
      auto t1 = std::chrono::steady_clock::now();
      if (Status s = verifyGraph(g, vo); !s.ok()) return makeError("after pass {}: {}", e.name, s.error().message);
      if (e.spec.check)
        if (Status s = e.spec.check(g); !s.ok()) return makeError("after pass {}: {}", e.name, s.error().message);
      r.verifyMs = msSince(t1);
    }
    if (opts_.dumpAfter.count(e.name) || opts_.dumpAfter.count("all")) {
      std::string text =
          fmt::format("// ---- IR after {} ----\n{}", e.name, e.spec.printIR ? e.spec.printIR(g) : ir::printGraph(g));
      if (e.dump) text += fmt::format("// ---- {} ----\n{}", e.name, e.dump(g));
      emit(text);
    }
    runs.push_back(r);
  }
  return runs;
}

}  // namespace fbl::passes
