#include "compiler/report/memory_report.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fbl::report {

using planfile::Role;

std::string humanBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1000) return fmt::format("{} B", bytes);
  if (bytes < 1000 * 1000) return fmt::format("{:.3g} kB", b / 1e3);
  if (bytes < int64_t{1000} * 1000 * 1000) return fmt::format("{:.3g} MB", b / 1e6);
  return fmt::format("{:.3g} GB", b / 1e9);
}

MemoryReport memoryReport(const planfile::Plan& plan, const profile::MemoryLimits& limits) {
  MemoryReport r;
  r.limits = limits;
  r.arenaBytes = plan.arenaBytes;
  r.imageBytes = plan.imageBytes();
  r.peakBytes = r.arenaBytes + r.imageBytes;
  r.pools = plan.arenaBytes > 0 ? plan.poolCount() : 0;
  r.allocations = r.pools + static_cast<int64_t>(plan.imageSlots.size());
  r.largestAllocationBytes = plan.arenaBytes > 0 ? plan.poolSize(0) : 0;
  r.largestAllocation = r.pools > 1 ? fmt::format("pool 0 of {}", r.pools) : "the arena, one pool";
  // A tensor larger than the profile's largest allocation leaves the arena in one pool: name it.
  if (limits.maxAllocBytes && r.largestAllocationBytes > *limits.maxAllocBytes) {
    const planfile::Tensor* big = nullptr;
    for (const planfile::Tensor& pt : plan.tensors)
      if (!pt.image() && (!big || pt.bytes > big->bytes)) big = &pt;
    if (big && big->bytes > *limits.maxAllocBytes)
      r.largestAllocation += fmt::format(" (tensor '{}' of {} does not fit a pool; only frozen matrices that embeddings and heads read "
                                         "are stored in row blocks)",
                                         big->name, humanBytes(big->bytes));
  }
  // Each image object's bytes, and the first tensor it holds (tensors share an object only when
  // their lifetimes do not overlap).
  std::vector<int32_t> holder(plan.imageSlots.size(), -1);
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    const planfile::Tensor& pt = plan.tensors[t];
    if (pt.image() && pt.imageSlot >= 0 && static_cast<size_t>(pt.imageSlot) < holder.size() && holder[pt.imageSlot] < 0)
      holder[pt.imageSlot] = static_cast<int32_t>(t);
  }
  auto add = [&](Role role, int64_t bytes) -> bool {
    switch (role) {
      case Role::Weight: r.frozenWeightBytes += bytes; return true;
      case Role::Trainable: r.trainableBytes += bytes; return true;
      case Role::State: r.optimizerStateBytes += bytes; return true;
      case Role::Constant: r.constantBytes += bytes; return true;
      case Role::Input:
      case Role::Step:
      case Role::Counter: r.inputBytes += bytes; return true;
      default: return false;
    }
  };
  int64_t persistentInArena = 0;
  for (const planfile::Tensor& pt : plan.tensors)
    if (!pt.image() && add(pt.role, pt.bytes)) persistentInArena += pt.bytes;
  r.transientBytes = std::max<int64_t>(0, r.arenaBytes - persistentInArena);
  for (size_t s = 0; s < plan.imageSlots.size(); ++s) {
    const int64_t bytes = plan.imageSlotBytes(s);
    const Role role = holder[s] >= 0 ? plan.tensors[holder[s]].role : Role::Intermediate;
    if (!add(role, bytes)) r.transientBytes += bytes;
    if (bytes > r.largestAllocationBytes) {
      r.largestAllocationBytes = bytes;
      r.largestAllocation = holder[s] >= 0 ? fmt::format("image object {} ({})", s, plan.tensors[holder[s]].name)
                                           : fmt::format("image object {}", s);
    }
  }
  if (limits.maxAllocBytes) r.fitsMaxAlloc = r.largestAllocationBytes <= *limits.maxAllocBytes;
  if (limits.appBudgetBytes) r.fitsBudget = r.peakBytes <= *limits.appBudgetBytes;
  if (limits.globalBytes) r.fitsGlobal = r.peakBytes <= *limits.globalBytes;
  return r;
}

nlohmann::json memoryReportJson(const MemoryReport& r) {
  using nlohmann::json;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return {{"peak_bytes", r.peakBytes},
          {"arena_bytes", r.arenaBytes},
          {"image_bytes", r.imageBytes},
          {"allocations", r.allocations},
          {"pools", r.pools},
          {"largest_allocation_bytes", r.largestAllocationBytes},
          {"largest_allocation", r.largestAllocation},
          {"by_role",
           {{"frozen_weights", r.frozenWeightBytes},
            {"trainables", r.trainableBytes},
            {"optimizer_state", r.optimizerStateBytes},
            {"constants", r.constantBytes},
            {"inputs", r.inputBytes},
            {"transient_peak", r.transientBytes}}},
          {"limits",
           {{"global_bytes", opt(r.limits.globalBytes)},
            {"max_alloc_bytes", opt(r.limits.maxAllocBytes)},
            {"app_budget_bytes", opt(r.limits.appBudgetBytes)}}},
          {"fits", {{"max_alloc", opt(r.fitsMaxAlloc)}, {"app_budget", opt(r.fitsBudget)}, {"global", opt(r.fitsGlobal)}}}};
}

std::string memorySummaryLine(const MemoryReport& r, const std::string& profileName) {
  std::string s = fmt::format("memory: peak {} in {} allocation{}, largest {} ({})", humanBytes(r.peakBytes),
                              r.allocations, r.allocations == 1 ? "" : "s", humanBytes(r.largestAllocationBytes),
                              r.largestAllocation);
  std::vector<std::string> verdicts;
  if (r.fitsMaxAlloc)
    verdicts.push_back(fmt::format("{} {}'s max_alloc_bytes {}", *r.fitsMaxAlloc ? "within" : "OVER", profileName,
                                   humanBytes(*r.limits.maxAllocBytes)));
  if (r.fitsBudget)
    verdicts.push_back(fmt::format("peak {} its app_budget_bytes {}", *r.fitsBudget ? "within" : "OVER",
                                   humanBytes(*r.limits.appBudgetBytes)));
  if (verdicts.empty()) verdicts.push_back(fmt::format("{} gives no memory limits", profileName));
  return s + ": " + fmt::format("{}", fmt::join(verdicts, "; "));
}

}  // namespace fbl::report
