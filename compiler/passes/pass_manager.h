// PassManager: runs passes in order over one graph, XLA-style. `fblc compile` runs its whole
// pipeline through one manager (driver/compile_command.h lists the passes).
//
//   1. Before the first pass and after every pass that ran, the verifier (verify.h) checks the
//      IR when PassOptions::verify is on (the default in debug builds; `--verify-passes` in
//      release builds). A failure names the pass after which the IR broke. Static shapes are
//      required only once a pass that infers them (PassSpec::infersShapes: fold-and-infer) ran.
//   2. With the verifier, a pass's own check (PassSpec::check: the layout passes check their
//      LayoutAssignment) runs after it.
//   3. A pass named in PassOptions::disabled is skipped (ablation); a required pass cannot be,
//      and the error says why it is required.
//   4. After a pass named in PassOptions::dumpAfter (or "all"), the IR is printed to the sink,
//      followed by the pass's own dump(graph) when it has one (the layout passes print their
//      LayoutAssignment, since they annotate rather than rewrite the IR).
//   5. Every pass's wall time and "changed" flag are returned, in order.
// Names in `disabled` and `dumpAfter` must name passes of the pipeline, so a typo is an error.
// A pass is any class with `static std::string_view name()` (kebab-case) and
// `Result<bool> run(ir::Graph&)`; it must outlive the manager.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/passes/verify.h"
#include "compiler/support/result.h"

namespace fbl::passes {

#ifdef NDEBUG
inline constexpr bool kVerifyByDefault = false;
#else
inline constexpr bool kVerifyByDefault = true;
#endif

// A step that runs after the passes and prints its own dumps (fblc compile: the plan builder's,
// plan::planSteps()). Like a pass it may be disabled, unless `requiredBecause` says why not.
struct PlanStep {
  std::string name;
  std::string requiredBecause;
};

struct PassOptions {
  bool verify = kVerifyByDefault;
  VerifyOptions verifyOptions;
  std::set<std::string> dumpAfter;  // pass names, or "all"
  // The steps after the passes: their names may stand in dumpAfter and disabled too, and an
  // unknown name lists them. The plan builder reads dumpAfter, disabled and sink for its steps.
  std::vector<PlanStep> planSteps;
  std::set<std::string> disabled;
  // Where dumps go; stdout when empty.
  std::function<void(std::string_view)> sink;
};

struct PassRun {
  std::string name;
  bool ran = false;      // false: disabled
  bool changed = false;
  double ms = 0;         // the pass alone, verifier excluded
  double verifyMs = 0;
};

// How the manager treats one pass.
struct PassSpec {
  // Non-empty: the pass cannot be disabled; the reason ends the --disable-pass error.
  std::string requiredBecause;
  // The pass gives every value a static shape; before it, the verifier does not require them.
  bool infersShapes = false;
  // Checked after the pass, with the verifier (the pass's own invariants).
  std::function<Status(const ir::Graph&)> check;
  // How --dump-after prints the IR after the pass; empty: ir::printGraph. The layout and
  // lowering passes print the layout decisions into it (layout_text.h).
  std::function<std::string(const ir::Graph&)> printIR;

  static PassSpec required(std::string because) {
    PassSpec s;
    s.requiredBecause = std::move(because);
    return s;
  }
  static PassSpec checked(std::function<Status(const ir::Graph&)> check) {
    PassSpec s;
    s.check = std::move(check);
    return s;
  }
};

template <typename P>
concept HasDump = requires(const P& p, const ir::Graph& g) {
  { p.dump(g) } -> std::convertible_to<std::string>;
};

class PassManager {
 public:
  explicit PassManager(PassOptions opts = {}) : opts_(std::move(opts)) {}

  template <typename P>
  void add(P& pass, PassSpec spec = {}) {
    Entry e{std::string(P::name()), [&pass](ir::Graph& g) { return pass.run(g); }, nullptr, std::move(spec)};
    if constexpr (HasDump<P>) e.dump = [&pass](const ir::Graph& g) { return pass.dump(g); };
    entries_.push_back(std::move(e));
  }

  std::vector<std::string> names() const;
  Result<std::vector<PassRun>> run(ir::Graph& g);

 private:
  struct Entry {
    std::string name;
    std::function<Result<bool>(ir::Graph&)> run;
    std::function<std::string(const ir::Graph&)> dump;
    PassSpec spec;
  };
  void emit(std::string_view text) const;

  PassOptions opts_;
  std::vector<Entry> entries_;
};

}  // namespace fbl::passes
