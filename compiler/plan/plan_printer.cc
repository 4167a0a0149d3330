#include "compiler/plan/plan_printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fbl::plan {

std::string printPlan(const planfile::Plan& p) {
  std::string s;
  s += fmt::format("plan {} (format {}, profile {})\n", p.model, planfile::kVersion, p.profile);
  s += fmt::format("arena {} bytes, alignment {}, blob {} bytes\n", p.arenaBytes, p.alignment, p.blob.size());
  s += fmt::format("inputs t{}  loss t{}  step t{}\n", fmt::join(p.inputs, " t"), p.loss, p.step);
  s += "\ntensors:\n";
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const planfile::Tensor& t = p.tensors[i];
    s += fmt::format("  t{} {} {} {}[{}] {} {} @{}+{}", i, planfile::roleName(t.role), t.name, t.dtype,
                     fmt::join(t.shape, ","), t.layout, t.storage, t.offset, t.bytes);
    if (!t.source.empty() && t.source != t.name) s += fmt::format(" from '{}'", t.source);
    if (t.constOffset >= 0) s += fmt::format(" blob@{}", t.constOffset);
    s += "\n";
  }
  s += "\ntrainables:\n";
  for (const planfile::Trainable& t : p.trainables)
    s += fmt::format("  t{} grad t{} adapter '{}'\n", t.param, t.grad, t.adapterKey);
  s += fmt::format("state: t{}\n", fmt::join(p.state, " t"));
  s += "commits:";
  for (const auto& c : p.commits) s += fmt::format(" t{}->t{}", c[0], c[1]);
  s += "\n\nlaunches:\n";
  for (const planfile::Launch& l : p.launches) {
    s += fmt::format("  {} {}(t{}) global [{}]", l.phase, p.kernelNames[l.kernel], fmt::join(l.args, ", t"),
                     fmt::join(l.global, ","));
    if (!l.local.empty()) s += fmt::format(" local [{}]", fmt::join(l.local, ","));
    s += fmt::format("  # {}\n", l.node);
  }
  s += fmt::format("\nadapter_config: {}\n", p.adapterConfig.dump());
  s += "\nprogram:\n" + p.program;
  return s;
}

}  // namespace fbl::plan
