#include "compiler/report/plan_diff.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "runtime/plan_check.h"

namespace fbl::report {

namespace {

using planfile::Launch;
using planfile::Plan;
using planfile::Tensor;

std::string dims(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string storageOf(const Tensor& t) {
  return t.image() ? fmt::format("image {}x{}", t.imageWidth, t.imageHeight) : std::string("buffer");
}

std::string tensorLine(const Tensor& t) {
  return fmt::format("{} {} {}{} {} {} {} bytes", planfile::roleName(t.role), t.name, t.dtype, dims(t.shape), t.layout,
                     storageOf(t), t.bytes);
}

// "k12_matmul" -> "matmul": kernel numbers follow first use, so they shift between plans.
std::string kernelOp(const Plan& p, int32_t k) {
  const std::string& name = p.kernelNames[k];
  const size_t us = name.find('_');
  return name.size() > 1 && name[0] == 'k' && us != std::string::npos ? name.substr(us + 1) : name;
}

std::string argNames(const Plan& p, const Launch& l) {
  std::string s;
  for (int32_t a : l.args) s += (s.empty() ? "" : ", ") + p.tensors[a].name;
  return "(" + s + ")";
}

std::string workSize(const Launch& l) { return "global " + dims(l.global) + " local " + dims(l.local); }

std::string launchLine(const Plan& p, const Launch& l) {
  return fmt::format("{} {}{} {} {}", l.phase, p.kernelNames[l.kernel], argNames(p, l), workSize(l), l.kind);
}

// Launches keyed by phase, first node and occurrence: fusion appends "+Op" to a launch's node,
// and one node may have several launches (conversions, transfers).
std::map<std::string, const Launch*> launchesByKey(const Plan& p, const std::vector<Launch>& list) {
  std::map<std::string, const Launch*> out;
  std::map<std::string, int> seen;
  for (const Launch& l : list) {
    const std::string node = l.node.substr(0, l.node.find('+'));
    const std::string base = l.phase + " " + node;
    const int k = seen[base]++;
    out[k == 0 ? base : base + "#" + std::to_string(k)] = &l;
  }
  return out;
}

void compare(std::vector<FieldChange>& out, const std::string& field, const std::string& a, const std::string& b) {
  if (a != b) out.push_back({field, a, b});
}

void diffTensors(const Plan& a, const Plan& b, PlanDiff& d) {
  std::map<std::string, const Tensor*> before, after;
  for (const Tensor& t : a.tensors) before[t.name] = &t;
  for (const Tensor& t : b.tensors) after[t.name] = &t;
  for (const auto& [name, t] : before)
    if (!after.count(name)) d.tensorsRemoved.push_back({name, tensorLine(*t), {}});
  for (const auto& [name, t] : after) {
    auto it = before.find(name);
    if (it == before.end()) {
      d.tensorsAdded.push_back({name, tensorLine(*t), {}});
      continue;
    }
    const Tensor& x = *it->second;
    ItemChange c{name, "", {}};
    compare(c.fields, "role", planfile::roleName(x.role), planfile::roleName(t->role));
    compare(c.fields, "dtype", x.dtype, t->dtype);
    compare(c.fields, "shape", dims(x.shape), dims(t->shape));
    compare(c.fields, "layout", x.layout, t->layout);
    compare(c.fields, "storage", storageOf(x), storageOf(*t));
    compare(c.fields, "bytes", std::to_string(x.bytes), std::to_string(t->bytes));
    if (!c.fields.empty()) d.tensorsChanged.push_back(std::move(c));
    if (x.offset != t->offset && !x.image() && !t->image()) ++d.tensorsMoved;
  }
}

void diffLaunches(const Plan& a, const Plan& b, PlanDiff& d) {
  for (const bool transfers : {false, true}) {
    const auto before = launchesByKey(a, transfers ? a.transfers : a.launches);
    const auto after = launchesByKey(b, transfers ? b.transfers : b.launches);
    for (const auto& [key, l] : before)
      if (!after.count(key)) d.launchesRemoved.push_back({key, launchLine(a, *l), {}});
    for (const auto& [key, l] : after) {
      auto it = before.find(key);
      if (it == before.end()) {
        d.launchesAdded.push_back({key, launchLine(b, *l), {}});
        continue;
      }
      const Launch& x = *it->second;
      ItemChange c{key, "", {}};
      compare(c.fields, "kernel", kernelOp(a, x.kernel), kernelOp(b, l->kernel));
      compare(c.fields, "work size", workSize(x), workSize(*l));
      compare(c.fields, "kind", x.kind, l->kind);
      compare(c.fields, "node", x.node, l->node);
      compare(c.fields, "args", argNames(a, x), argNames(b, *l));
      if (!c.fields.empty()) d.launchesChanged.push_back(std::move(c));
    }
  }
}

// The settings a user chose at compile time: the optimizer's, and the training loop's (a plan
// without a training_loop section has its defaults). The loop's tensor indices are left to the
// tensor and launch lists.
void diffTraining(const Plan& a, const Plan& b, PlanDiff& d) {
  std::set<std::string> keys;
  for (const auto* o : {&a.optimizer, &b.optimizer})
    for (auto it = o->begin(); it != o->end(); ++it) keys.insert(it.key());
  auto setting = [](const nlohmann::json& o, const std::string& k) { return o.contains(k) ? o.at(k).dump() : "(none)"; };
  for (const std::string& k : keys) compare(d.trainingChanged, "optimizer." + k, setting(a.optimizer, k), setting(b.optimizer, k));
  auto loop = [](const planfile::TrainingLoop& l) {
    return std::vector<std::pair<std::string, std::string>>{
        {"grad_accum", std::to_string(l.gradAccum)},
        {"clip_grad_norm", nlohmann::json(l.clipGradNorm).dump()},
        {"schedule", l.schedule.empty() ? "(none)" : l.schedule},
        {"lr", nlohmann::json(l.lr).dump()},
        {"warmup_steps", std::to_string(l.warmupSteps)},
        {"total_steps", std::to_string(l.totalSteps)}};
  };
  const auto la = loop(a.loop), lb = loop(b.loop);
  for (size_t i = 0; i < la.size(); ++i) compare(d.trainingChanged, "training_loop." + la[i].first, la[i].second, lb[i].second);
}

nlohmann::json items(const std::vector<ItemChange>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const ItemChange& c : list) {
    nlohmann::json o{{"name", c.name}};
    if (!c.summary.empty()) o["what"] = c.summary;
    for (const FieldChange& f : c.fields) o["changes"][f.field] = {{"before", f.before}, {"after", f.after}};
    out.push_back(std::move(o));
  }
  return out;
}

nlohmann::json training(const std::vector<FieldChange>& list) {
  nlohmann::json out = nlohmann::json::object();
  for (const FieldChange& f : list) out[f.field] = {{"before", f.before}, {"after", f.after}};
  return out;
}

std::string signedDelta(int64_t before, int64_t after) {
  return after == before ? "" : fmt::format(" ({:+})", after - before);
}

// The plan's JSON with tensor indices replaced by names: two plans with other tensor lists can
// still name the same loss, step, inputs, trainables, state and commits.
nlohmann::json byName(const Plan& p) {
  nlohmann::json j = planfile::toJson(p);
  auto name = [&p](int32_t t) { return t >= 0 && t < static_cast<int32_t>(p.tensors.size()) ? nlohmann::json(p.tensors[t].name) : nlohmann::json(); };
  j["loss"] = name(p.loss);
  j["step"] = name(p.step);
  j["staging"] = name(p.staging);
  for (const auto& [key, list] : {std::pair<const char*, const std::vector<int32_t>*>{"inputs", &p.inputs},
                                   {"state", &p.state}, {"updated_buffers", &p.updatedBuffers}}) {
    if (!j.contains(key)) continue;
    nlohmann::json names = nlohmann::json::array();
    for (int32_t t : *list) names.push_back(name(t));
    j[key] = std::move(names);
  }
  for (size_t i = 0; i < p.trainables.size(); ++i) {
    j["trainables"][i]["param"] = name(p.trainables[i].param);
    j["trainables"][i]["grad"] = name(p.trainables[i].grad);
  }
  for (size_t i = 0; i < p.commits.size(); ++i) j["commits"][i] = {name(p.commits[i][0]), name(p.commits[i][1])};
  for (size_t i = 0; i < p.inputChecks.size(); ++i) j["input_checks"][i]["input"] = name(p.inputChecks[i].input);
  return j;
}

}  // namespace

bool PlanDiff::same() const {
  return arenaBefore == arenaAfter && imagesBefore == imagesAfter && tensorsAdded.empty() && tensorsRemoved.empty() &&
         tensorsChanged.empty() && tensorsMoved == 0 && launchesAdded.empty() && launchesRemoved.empty() &&
         launchesChanged.empty() && trainingChanged.empty() && otherKeys.empty();
}

PlanDiff diffPlans(const Plan& a, const Plan& b) {
  PlanDiff d;
  d.arenaBefore = a.arenaBytes;
  d.arenaAfter = b.arenaBytes;
  d.imagesBefore = a.imageBytes();
  d.imagesAfter = b.imageBytes();
  d.tensorsBefore = a.tensors.size();
  d.tensorsAfter = b.tensors.size();
  d.launchesBefore = a.launches.size();
  d.launchesAfter = b.launches.size();
  diffTensors(a, b, d);
  diffLaunches(a, b, d);
  diffTraining(a, b, d);
  // Whatever the lists above do not cover (the program, the blob, commits, checks, ...).
  const nlohmann::json ja = byName(a), jb = byName(b);
  std::set<std::string> keys;
  for (auto it = ja.begin(); it != ja.end(); ++it) keys.insert(it.key());
  for (auto it = jb.begin(); it != jb.end(); ++it) keys.insert(it.key());
  for (const std::string& k : keys) {
    if (k == "tensors" || k == "launches" || k == "transfers" || k == "arena_bytes" || k == "image_slots" || k == "kernels" ||
        k == "kernel_work" || k == "optimizer" || k == "training_loop")
      continue;
    if (!ja.contains(k) || !jb.contains(k) || ja.at(k) != jb.at(k)) d.otherKeys.push_back(k);
  }
  if (a.blob != b.blob) d.otherKeys.push_back("blob");
  return d;
}

std::string formatDiff(const PlanDiff& d, const std::string& oldPath, const std::string& newPath) {
  if (d.same()) return fmt::format("{} and {}: no differences\n", oldPath, newPath);
  std::string s = fmt::format("{} -> {}\n", oldPath, newPath);
  s += fmt::format("memory: arena {} -> {} bytes{}, images {} -> {}{}, peak {} -> {}{}\n", d.arenaBefore, d.arenaAfter,
                   signedDelta(d.arenaBefore, d.arenaAfter), d.imagesBefore, d.imagesAfter,
                   signedDelta(d.imagesBefore, d.imagesAfter), d.arenaBefore + d.imagesBefore,
                   d.arenaAfter + d.imagesAfter, signedDelta(d.arenaBefore + d.imagesBefore, d.arenaAfter + d.imagesAfter));
  s += fmt::format("tensors: {} -> {}: {} added, {} removed, {} changed, {} moved in the arena\n", d.tensorsBefore,
                   d.tensorsAfter, d.tensorsAdded.size(), d.tensorsRemoved.size(), d.tensorsChanged.size(), d.tensorsMoved);
  auto list = [&s](const char* mark, const std::vector<ItemChange>& items) {
    for (const ItemChange& c : items) {
      if (!c.summary.empty()) s += fmt::format("  {} {}\n", mark, c.summary);
      for (const FieldChange& f : c.fields) s += fmt::format("  {} {}: {} {} -> {}\n", mark, c.name, f.field, f.before, f.after);
    }
  };
  list("-", d.tensorsRemoved);
  list("+", d.tensorsAdded);
  list("~", d.tensorsChanged);
  s += fmt::format("launches: {} -> {}: {} added, {} removed, {} changed\n", d.launchesBefore, d.launchesAfter,
                   d.launchesAdded.size(), d.launchesRemoved.size(), d.launchesChanged.size());
  list("-", d.launchesRemoved);
  list("+", d.launchesAdded);
  list("~", d.launchesChanged);
  for (const FieldChange& f : d.trainingChanged) s += fmt::format("training: {} {} -> {}\n", f.field, f.before, f.after);
  if (!d.otherKeys.empty()) {
    std::string keys;
    for (const std::string& k : d.otherKeys) keys += (keys.empty() ? "" : ", ") + k;
    s += "also changed: " + keys + "\n";
  }
  return s;
}

nlohmann::json diffJson(const PlanDiff& d, const std::string& oldPath, const std::string& newPath) {
  return {{"old", oldPath},
          {"new", newPath},
          {"same", d.same()},
          {"memory",
           {{"arena_bytes", {{"before", d.arenaBefore}, {"after", d.arenaAfter}}},
            {"image_bytes", {{"before", d.imagesBefore}, {"after", d.imagesAfter}}},
            {"peak_bytes", {{"before", d.arenaBefore + d.imagesBefore}, {"after", d.arenaAfter + d.imagesAfter}}}}},
          {"tensors",
           {{"before", d.tensorsBefore},
            {"after", d.tensorsAfter},
            {"added", items(d.tensorsAdded)},
            {"removed", items(d.tensorsRemoved)},
            {"changed", items(d.tensorsChanged)},
            {"moved", d.tensorsMoved}}},
          {"launches",
           {{"before", d.launchesBefore},
            {"after", d.launchesAfter},
            {"added", items(d.launchesAdded)},
            {"removed", items(d.launchesRemoved)},
            {"changed", items(d.launchesChanged)}}},
          {"training", training(d.trainingChanged)},
          {"other", d.otherKeys}};
}

int runDiff(const DiffArgs& args, std::ostream& out, std::ostream& err) {
  Plan plans[2];
  for (const auto& [path, plan] : {std::pair{&args.oldPlan, &plans[0]}, std::pair{&args.newPlan, &plans[1]}}) {
    Result<Plan> read = rt::readPlanFile(*path);
    if (!read.ok()) {
      err << "error: " << read.error().message << "\n";
      return 2;
    }
    *plan = std::move(read).value();
  }
  const PlanDiff d = diffPlans(plans[0], plans[1]);
  if (args.json) out << diffJson(d, args.oldPlan, args.newPlan).dump(1) << "\n";
  else out << formatDiff(d, args.oldPlan, args.newPlan);
  return d.same() ? 0 : 1;
}

}  // namespace fbl::report
