// `fblc diff OLD.fbp NEW.fbp [--json]`: what changed between two plans, for people and for CI
// that keeps golden plans (docs/plan-diff.md).
//  1. memory: arena, image and peak bytes;
//  2. tensors, matched by name: added, removed, and per field (dtype, shape, role, layout,
//     storage, bytes, image extent) what changed; moves in the arena are counted apart;
//  3. launches, matched by phase, graph node (the first of a fused launch's nodes) and occurrence:
//     added, removed, and per field (kernel op, work sizes, kind, fused nodes, arguments);
//  4. the optimizer and the training loop, per setting ("optimizer.lr", "training_loop.grad_accum");
//  5. anything else in the file (program text, blob, commits, input checks, ...) by its key.
// Exit status: 0 the same, 1 different, 2 a file that cannot be read as a plan.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/plan_file.h"

namespace fbl::report {

struct FieldChange {
  std::string field, before, after;
};

struct ItemChange {
  std::string name;                  // a tensor's name, or "phase node#k" for a launch
  std::string summary;               // added/removed: the item in one line
  std::vector<FieldChange> fields;   // changed: what differs
};

struct PlanDiff {
  int64_t arenaBefore = 0, arenaAfter = 0, imagesBefore = 0, imagesAfter = 0;
  size_t tensorsBefore = 0, tensorsAfter = 0, launchesBefore = 0, launchesAfter = 0;
  std::vector<ItemChange> tensorsAdded, tensorsRemoved, tensorsChanged;
  size_t tensorsMoved = 0;           // same tensor, another offset (any change upstream moves them)
  std::vector<ItemChange> launchesAdded, launchesRemoved, launchesChanged;
  std::vector<FieldChange> trainingChanged;  // optimizer and training-loop settings
  std::vector<std::string> otherKeys;  // top-level plan keys that differ beyond the above

  bool same() const;
};

PlanDiff diffPlans(const planfile::Plan& before, const planfile::Plan& after);
std::string formatDiff(const PlanDiff& d, const std::string& oldPath, const std::string& newPath);
nlohmann::json diffJson(const PlanDiff& d, const std::string& oldPath, const std::string& newPath);

struct DiffArgs {
  std::string oldPlan, newPlan;
  bool json = false;
};
// Prints the difference to `out`, a bad file as one line to `err`; returns the exit status.
int runDiff(const DiffArgs& args, std::ostream& out, std::ostream& err);

}  // namespace fbl::report
