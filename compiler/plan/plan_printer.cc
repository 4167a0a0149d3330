#include "compiler/plan/plan_printer.h"


#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/plan_check.h"

namespace fbl::plan {

namespace {

// A launch's kernel; before merge-kernels has named them (a --dump-after of an earlier step), none.
std::string kernelName(const planfile::Plan& p, const planfile::Launch& l) {
  return l.kernel >= 0 && static_cast<size_t>(l.kernel) < p.kernelNames.size() ? p.kernelNames[l.kernel]
                                                                               : std::string("(kernel not yet named)");
}

}  // namespace

std::string printPlan(const planfile::Plan& p) {
  std::string s;
  s += fmt::format("plan {} (format {}, profile {})\n", p.model, planfile::kVersion, p.profile);
  s += fmt::format("arena {} bytes in {} pool(s) of at most {}, alignment {}, blob {} bytes\n", p.arenaBytes, p.poolCount(),
                   p.poolBytes, p.alignment, p.blob.size());
  s += fmt::format("inputs t{}  loss t{}  step t{}\n", fmt::join(p.inputs, " t"), p.loss, p.step);
  if (p.loop.enabled()) {
    const planfile::TrainingLoop& l = p.loop;
    s += fmt::format("training_loop grad_accum {} clip_grad_norm {} schedule '{}' lr {} warmup {} total {}  lr t{}  keep t{}",
                     l.gradAccum, l.clipGradNorm, l.schedule, l.lr, l.warmupSteps, l.totalSteps, l.lrTensor, l.accumKeep);
    if (!l.accumulators.empty()) s += fmt::format("  accumulators t{}", fmt::join(l.accumulators, " t"));
    s += "\n";
  }
  for (const planfile::InputCheck& c : p.inputChecks) {
    s += fmt::format("  check t{} {} [{}, {})", c.input, c.kind, c.lo, c.hi);
    if (c.hasIgnore) s += fmt::format(" or {}", c.ignoreIndex);
    if (!c.table.empty()) s += fmt::format(" table '{}'", c.table);
    s += fmt::format("  # {}\n", c.node);
  }
  s += "\ntensors:\n";
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const planfile::Tensor& t = p.tensors[i];
    s += fmt::format("  t{} {} {} {}[{}] {} {} @{}+{}", i, planfile::roleName(t.role), t.name, t.dtype,
                     fmt::join(t.shape, ","), t.layout, t.storage, t.offset, t.bytes);
    if (!t.source.empty() && t.source != t.name) s += fmt::format(" from '{}'", t.source);
    if (t.constOffset >= 0) s += fmt::format(" blob@{}", t.constOffset);
    if (t.image()) s += fmt::format(" image {}x{} #{}", t.imageWidth, t.imageHeight, t.imageSlot);
    if (t.pack >= 0) s += fmt::format(" pack x{} unpack x{}", t.pack, t.unpack);
    if (!t.encoding.empty()) s += fmt::format(" encoded {} group {} axis {}", t.encoding, t.groupSize, t.groupAxis);
    s += "\n";
  }
  if (!p.imageSlots.empty()) {
    s += "images:";
    for (const auto& slot : p.imageSlots) s += fmt::format(" {}x{}", slot[0], slot[1]);
    s += fmt::format(" ({} bytes)\n", p.imageBytes());
  }
  s += "\ntrainables:\n";
  for (const planfile::Trainable& t : p.trainables)
    s += fmt::format("  t{} grad t{} adapter '{}'\n", t.param, t.grad, t.adapterKey);
  s += fmt::format("state: t{}\n", fmt::join(p.state, " t"));
  if (!p.updatedBuffers.empty()) s += fmt::format("updated buffers: t{}\n", fmt::join(p.updatedBuffers, " t"));
  if (!p.outputs.empty()) s += fmt::format("outputs: t{}\n", fmt::join(p.outputs, " t"));
  s += "commits:";
  for (const auto& c : p.commits) s += fmt::format(" t{}->t{}", c[0], c[1]);
  s += "\n\nlaunches:\n";
  for (const planfile::Launch& l : p.launches) {
    s += fmt::format("  {} {}(t{}) global [{}]", l.phase, kernelName(p, l), fmt::join(l.args, ", t"),
                     fmt::join(l.global, ","));
    if (!l.local.empty()) s += fmt::format(" local [{}]", fmt::join(l.local, ","));
    s += fmt::format("  # {}\n", l.node);
  }
  if (!p.transfers.empty())
    s += fmt::format("\ntransfers (through t{}, the chunk's first row in t{}):\n", p.staging, p.transferFirstRow);
  for (size_t i = 0; i < p.transfers.size(); ++i) {
    const planfile::Launch& l = p.transfers[i];
    const planfile::Tensor& t = p.tensors[l.args[l.phase == "pack" ? 1 : 0]];
    s += fmt::format("  x{} {} {}(t{}) global [{}] local [{}] rows {} of {}  # {}\n", i, l.phase, kernelName(p, l),
                     fmt::join(l.args, ", t"), fmt::join(l.global, ","), fmt::join(l.local, ","), t.transferRows,
                     planfile::transferRows(t.shape), l.node);
  }
  s += fmt::format("\nadapter_config: {}\n", p.adapterConfig.dump());
  for (const planfile::Trainable& t : p.adapterFrozen) s += fmt::format("adapter frozen t{} '{}'\n", t.param, t.adapterKey);
  s += "\nprogram:\n" + p.program;
  return s;
}

int runPrintPlan(const std::string& path) {
  const Result<planfile::Plan> plan = rt::readPlanFile(path);
  if (!plan.ok()) {
    fmt::print(stderr, "error: {}\n", plan.error().message);
    return 1;
  }
  fmt::print("{}", printPlan(*plan));
  return 0;
}

}  // namespace fbl::plan
