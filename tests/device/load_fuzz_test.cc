// Mutation fuzz of the files an app loads: llama-tiny's plan (buffer and image storage), its
// weights and a checkpoint, each mutated one field at a time with a valid checksum (deterministic seed). A mutant is refused by
// the loader's checks (one line naming the plan file), accepted unchanged for execution (it only
// changed what the runtime does not execute: node names, layout names for people), or accepted
// with a change the runtime executes; a few of those are run on PoCL and compared with the
// unmutated step. Whatever is accepted must keep every kernel argument inside its tensor and
// every tensor inside the arena, every image argument no smaller and no launch larger than the
// kernel's, judged against the unmutated plan's kernels (an oracle apart from
// runtime/plan_check.cc). The outcome counts are printed (docs/security.md quotes them).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <set>

#include "compiler/driver/compile_command.h"
#include "runtime/plan_check.h"
#include "runtime/weights_check.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

using nlohmann::json;

struct Model {
  driver::CompileArgs args;
  planfile::Plan plan;
  std::string bytes;
};

// llama-tiny for the PoCL profile, with its tensors where `storage` puts them and its frozen
// base stored as `baseWeights` says.
const Model& llamaTiny(const std::string& storage = "auto", const std::string& baseWeights = "fp32") {
  static std::map<std::string, Model> models;
  const std::string key = storage + "-" + baseWeights;
  auto it = models.find(key);
  if (it != models.end()) return it->second;
  Model c;
  c.args.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  c.args.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  c.args.storage = storage;
  c.args.baseWeights = baseWeights;
  c.args.output = tempDir() + "/fuzz-" + key + ".fbp";
  c.args.weights = tempDir() + "/fuzz-" + key + ".safetensors";
  auto r = driver::compileModel(c.args);
  REQUIRE(r.ok());
  REQUIRE(driver::writeWeights(c.args, r->plan).ok());
  c.bytes = planfile::serialize(r->plan);
  c.plan = fbl::testing::requireValue(planfile::parse(c.bytes));  // with argBytes, as the runtime sees it
  std::ofstream(c.args.output, std::ios::binary) << c.bytes;
  return models[key] = std::move(c);
}

// The plan file's bytes for a JSON section and blob, with a valid checksum.
std::string planBytes(const json& j, const std::vector<unsigned char>& blob) {
  const std::string js = j.dump(1);
  std::string out(planfile::kMagic, sizeof planfile::kMagic);
  auto put = [&out](const void* d, size_t n) { out.append(static_cast<const char*>(d), n); };
  const uint32_t version = planfile::kVersion, reserved = 0;
  const uint64_t jsonLen = js.size(), blobLen = blob.size();
  put(&version, 4);
  put(&reserved, 4);
  put(&jsonLen, 8);
  put(&blobLen, 8);
  out += js;
  put(blob.data(), blob.size());
  const uint64_t sum = planfile::fnv1a64(out.data(), out.size());
  put(&sum, 8);
  return out;
}

// One-field mutations of a JSON document: a leaf replaced by a value that a corrupted or
// hand-edited file would plausibly hold, or an array lengthened or shortened.
struct Mutator {
  std::mt19937_64 rng;
  std::vector<json::json_pointer> leaves, arrays;
  std::map<std::string, std::vector<std::string>> stringsByKey;
  std::vector<int64_t> integers;

  Mutator(const json& doc, const std::set<std::string>& skip, uint64_t seed) : rng(seed) { collect(doc, json::json_pointer(), skip, ""); }

  void collect(const json& v, const json::json_pointer& at, const std::set<std::string>& skip, const std::string& key) {
    if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it)
        if (!(at.empty() && skip.count(it.key()))) collect(*it, at / it.key(), skip, it.key());
    } else if (v.is_array()) {
      arrays.push_back(at);
      for (size_t i = 0; i < v.size(); ++i) collect(v[i], at / i, skip, key);
    } else {
      leaves.push_back(at);
      if (v.is_string()) stringsByKey[key].push_back(v.get<std::string>());
      if (v.is_number_integer()) integers.push_back(v.get<int64_t>());
    }
  }

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

  // Mutates `doc` in place and says what it did.
  std::string mutate(json& doc) {
    if (!arrays.empty() && pick(8) == 0) {
      const json::json_pointer& at = arrays[pick(arrays.size())];
      json& a = doc[at];
      if (!a.empty() && pick(2) == 0) {
        a.erase(a.size() - 1);
        return at.to_string() + ": dropped its last element";
      }
      a.push_back(a.empty() ? json(0) : a[pick(a.size())]);
      return at.to_string() + ": duplicated an element";
    }
    const json::json_pointer& at = leaves[pick(leaves.size())];
    json& v = doc[at];
    const std::string before = v.dump();
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      const int64_t choices[] = {0, -1, x + 1, x - 1, x * 2, x / 2, int64_t{1} << 31, int64_t{1} << 32, int64_t{1} << 62,
                                 -(int64_t{1} << 62), static_cast<int64_t>(pick(1 << 20)), integers[pick(integers.size())]};
      v = choices[pick(std::size(choices))];
    } else if (v.is_string()) {
      std::string key = at.back();
      if (!key.empty() && std::isdigit(static_cast<unsigned char>(key[0]))) key = at.parent_pointer().back();
      const auto& pool = stringsByKey[key];
      const size_t r = pick(pool.size() + 2);
      v = r < pool.size() ? json(pool[r]) : r == pool.size() ? json("") : json("x");
    } else if (v.is_boolean()) {
      v = !v.get<bool>();
    } else if (v.is_number_float()) {
      v = v.get<double>() * 2 + 1;
    } else {
      v = 1;
    }
    return at.to_string() + ": " + before + " -> " + v.dump();
  }
};

// What execution depends on: the plan with the fields only people read cleared.
std::string executed(planfile::Plan p) {
  p.model.clear();
  p.profile.clear();
  p.explain = json();
  for (auto& t : p.tensors) {
    t.layout.clear();
    if (t.role == planfile::Role::Intermediate || t.role == planfile::Role::Scratch) t.name.clear();
  }
  for (auto* list : {&p.launches, &p.transfers})
    for (auto& l : *list) {
      l.node.clear();
      l.kind.clear();
      l.fused.clear();
    }
  for (auto& c : p.inputChecks) {
    c.node.clear();
    c.table.clear();
  }
  return planfile::toJson(p).dump();
}

// The oracle: what each kernel of the unmutated plan touches (the bytes of the tensors it was
// generated for) must fit the tensors and the arena the accepted mutant gives it, and the host's
// own reads and writes (loss, step, staging, constants, commits) must stay inside the arena.
std::string outOfBounds(const planfile::Plan& base, const planfile::Plan& m) {
  std::map<std::string, std::vector<int64_t>> extent, global;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> image;
  for (const auto* list : {&base.launches, &base.transfers})
    for (const auto& l : *list) {
      auto& g = global[base.kernelNames[l.kernel]];
      g.resize(std::max(g.size(), l.global.size()), 0);
      for (size_t d = 0; d < l.global.size(); ++d) g[d] = std::max(g[d], l.global[d]);
      auto& im = image[base.kernelNames[l.kernel]];
      im.resize(std::max(im.size(), l.args.size()), {INT64_MAX, INT64_MAX});
      for (size_t a = 0; a < l.args.size(); ++a)
        if (base.tensors[l.args[a]].image())
          im[a] = {std::min(im[a].first, base.tensors[l.args[a]].imageWidth), std::min(im[a].second, base.tensors[l.args[a]].imageHeight)};
      // A kernel touches no more than the smallest tensor any of its launches gives it.
      auto& e = extent[base.kernelNames[l.kernel]];
      e.resize(std::max(e.size(), l.args.size()), INT64_MAX);
      for (size_t a = 0; a < l.args.size(); ++a)
        if (!base.tensors[l.args[a]].image()) e[a] = std::min(e[a], base.tensors[l.args[a]].bytes);
    }
  auto inside = [&](int64_t offset, int64_t bytes) { return offset >= 0 && bytes >= 0 && offset <= m.arenaBytes && bytes <= m.arenaBytes - offset; };
  for (const auto* list : {&m.launches, &m.transfers})
    for (const auto& l : *list) {
      auto it = extent.find(m.kernelNames[l.kernel]);
      if (it == extent.end()) return "kernel " + m.kernelNames[l.kernel] + " is not one of the plan's";
      if (it->second.size() != l.args.size()) return "kernel " + m.kernelNames[l.kernel] + " gets another number of arguments";
      // Not every kernel guards every dimension of its range (a batched matmul does not guard
      // its batch), so a launch may not run more work-items than its kernel was generated for.
      const auto& g = global.at(m.kernelNames[l.kernel]);
      for (size_t d = 0; d < l.global.size(); ++d)
        if (d >= g.size() ? l.global[d] > 1 : l.global[d] > g[d])
          return "a launch of " + m.kernelNames[l.kernel] + " has global " + std::to_string(l.global[d]) + " in dimension " + std::to_string(d) +
                 ", more than the kernel was generated for";
      for (size_t a = 0; a < l.args.size(); ++a) {
        const auto& t = m.tensors[l.args[a]];
        if (t.image()) {  // a write outside an image is undefined in OpenCL
          const auto& [w, h] = image.at(m.kernelNames[l.kernel])[a];
          if (t.imageWidth < w || t.imageHeight < h)
            return "image argument " + std::to_string(a) + " of " + m.kernelNames[l.kernel] + " is smaller than the kernel's";
          continue;
        }
        if (l.args[a] == m.staging) continue;
        if (it->second[a] > t.bytes || !inside(t.offset, it->second[a]))
          return "argument " + std::to_string(a) + " of " + m.kernelNames[l.kernel] + " (tensor '" + t.name + "', " + std::to_string(t.bytes) +
                 " bytes @" + std::to_string(t.offset) + ") cannot hold the kernel's " + std::to_string(it->second[a]) + " bytes";
      }
    }
  if (m.loss >= 0 && !inside(m.tensors[m.loss].offset, 4)) return "the loss lies outside the arena";
  if (m.step >= 0 && !inside(m.tensors[m.step].offset, 8)) return "the step lies outside the arena";
  for (const auto& t : m.tensors) {
    if (t.pack >= 0 || t.unpack >= 0) {
      const int64_t chunk = t.transferRows * planfile::transferRowBytes(t.shape, t.dtype);
      if (!inside(m.tensors[m.staging].offset, chunk) || m.tensors[m.staging].bytes < chunk)
        return "the staging tensor cannot hold a chunk of '" + t.name + "'";
      if (!inside(m.tensors[m.transferFirstRow].offset, 8)) return "the transfer's first row lies outside the arena";
    }
    if (!t.image() && !inside(t.offset, t.bytes)) return "tensor '" + t.name + "' lies outside the arena";
    if (t.constOffset >= 0 && t.constOffset + t.bytes > static_cast<int64_t>(m.blob.size())) return "constant '" + t.name + "' lies outside the blob";
  }
  for (const auto& c : m.commits)
    if (!inside(m.tensors[c[0]].offset, m.tensors[c[1]].bytes)) return "a commit reads outside the arena";
  return "";
}

// Inputs within every bound the plan records, the same for every run.
void writeInputs(rt::Session& s, const planfile::Plan& p) {
  for (int32_t in : p.inputs) {
    const planfile::Tensor& t = p.tensors[in];
    const int64_t n = planfile::logicalBytes(t) / planfile::elementSize(t.dtype);
    if (t.dtype == "i64") {
      int64_t bound = 1 << 20;
      for (const auto& c : p.inputChecks)
        if (c.input == in) bound = std::min(bound, c.hi);
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) v[k] = (k * 37 + 11) % bound;
      REQUIRE_OK(s.writeTensor(t.name, v.data(), v.size() * 8));
    } else {
      std::vector<unsigned char> v(static_cast<size_t>(planfile::logicalBytes(t)), 0);
      REQUIRE_OK(s.writeTensor(t.name, v.data(), v.size()));
    }
  }
}

// One step from the unmutated weights: the loss and every trainable's bytes after it.
struct StepResult {
  std::string error;
  float loss = 0.0f;
  std::vector<std::vector<unsigned char>> trainables;
  bool operator==(const StepResult& o) const {
    return error.empty() && o.error.empty() && std::memcmp(&loss, &o.loss, 4) == 0 && trainables == o.trainables;
  }
};

StepResult runStep(const std::string& planPath, const Model& m) {
  StepResult r;
  auto opened = rt::Session::open(planPath);
  r.error = fbl::testing::errorText(opened);
  if (!opened.ok()) return r;
  rt::Session& s = **opened;
  if ((r.error = fbl::testing::errorText(s.loadWeights(m.args.weights))).empty()) {
    writeInputs(s, s.plan());
    r.error = fbl::testing::errorText(s.trainStep(&r.loss));
  }
  for (const auto& t : s.plan().trainables) {
    r.trainables.emplace_back();
    if (r.error.empty()) r.error = fbl::testing::errorText(s.readTensor(t.param, &r.trainables.back()));
  }
  return r;
}

bool oneLine(const std::string& e) { return !e.empty() && e.find('\n') == std::string::npos; }

// `mutants` one-field mutants of m's plan; at most `maxRuns` of those that change what runs are
// run (the rest are judged by the checks and the oracle alone).
void fuzzPlan(const Model& m, uint64_t seed, int kMutants, int kMaxRuns) {
  const StepResult baseline = kMaxRuns > 0 ? runStep(m.args.output, m) : StepResult{};
  INFO(baseline.error);
  REQUIRE(baseline.error.empty());
  // The device's limits, from a session of the buffer plan (the device is the same).
  const rt::DeviceLimits limits = fbl::testing::requireValue(rt::Session::open(llamaTiny().args.output))->deviceLimits();
  const std::string baseExecuted = executed(m.plan);
  // The explain section is optional and never read by the runtime: left out, every mutant is
  // smaller to write and parse.
  json doc = planfile::toJson(m.plan);
  doc.erase("explain");
  // The program is the plan's code (trusted, docs/security.md); explain, optimizer and the adapter
  // config are for reports and peft; the build options belong to the program.
  Mutator mutator(doc, {"program", "explain", "optimizer", "adapter_config", "build_options"}, seed);
  int refused = 0, inert = 0, ranSame = 0, ranDifferent = 0, failedCleanly = 0, notRun = 0;
  std::vector<std::string> samples, executedMutants;
  const std::string path = tempDir() + "/fuzz-mutant.fbp";
  for (int i = 0; i < kMutants; ++i) {
    json mutant = doc;
    const std::string what = mutator.mutate(mutant);
    const std::string bytes = planBytes(mutant, m.plan.blob);
    const Result<planfile::Plan> loaded = rt::loadPlan(bytes, path, &limits);
    const std::string e = fbl::testing::errorText(loaded);
    INFO("mutant " << i << ": " << what << "\n  " << e);
    if (!loaded.ok()) {
      CHECK(oneLine(e));
      CHECK(e.rfind("plan '" + path + "': ", 0) == 0);
      ++refused;
      if (samples.size() < 8 && i % 7 == 0) samples.push_back(what + "\n      " + e);
      continue;
    }
    const planfile::Plan& p = *loaded;
    CHECK(outOfBounds(m.plan, p) == "");
    if (executed(p) == baseExecuted) {
      ++inert;
      continue;
    }
    if (ranSame + ranDifferent + failedCleanly >= kMaxRuns) {
      ++notRun;
      executedMutants.push_back("not run: " + what);
      continue;
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    const StepResult r = runStep(path, m);
    if (!r.error.empty()) {
      CHECK(oneLine(r.error));
      ++failedCleanly;
      executedMutants.push_back("failed cleanly: " + what + "\n      " + r.error);
    } else if (r == baseline) {
      ++ranSame;
      executedMutants.push_back("ran, same results: " + what);
    } else {
      ++ranDifferent;
      executedMutants.push_back("ran, other results: " + what);
    }
  }
  std::printf("%s plan mutants: %d; refused by the checks %d; accepted, nothing executed changed %d; ran with the same loss and "
              "trainables %d; ran with other results %d; failed cleanly at open or step %d; accepted and not run %d; crashed 0\n",
              m.args.storage.c_str(), kMutants, refused, inert, ranSame, ranDifferent, failedCleanly, notRun);
  for (const auto& s : samples) std::printf("  e.g. %s\n", s.c_str());
  for (const auto& s : executedMutants) std::printf("  accepted, %s\n", s.c_str());
  CHECK(refused + inert + ranSame + ranDifferent + failedCleanly + notRun == kMutants);
  CHECK(refused > kMutants / 2);
}

TEST_CASE("mutated plans are refused, or run inside their tensors", "[runtime][fuzz]") { fuzzPlan(llamaTiny(), 17, 300, 6); }

// Image storage: the image checks (slot, extent, texels, image parameters) under the same
// mutations, judged by the checks and the oracle without running.
TEST_CASE("mutated image-storage plans are refused, or stay inside their images", "[runtime][fuzz]") {
  const Model& m = llamaTiny("image");
  REQUIRE_FALSE(m.plan.imageSlots.empty());
  fuzzPlan(m, 23, 150, 0);
}

// An int4 base (docs/plan-format.md, "Encoded weights"): the encoding checks under the same
// mutations, two of the accepted ones that change what runs run.
TEST_CASE("mutated plans with an int4 base are refused, or stay inside their tensors", "[runtime][fuzz]") {
  const Model& m = llamaTiny("auto", "int4");
  REQUIRE(std::any_of(m.plan.tensors.begin(), m.plan.tensors.end(), [](const planfile::Tensor& t) { return t.encoding == "int4"; }));
  fuzzPlan(m, 29, 150, 2);
}

// Each weights or checkpoint mutant is refused by the safetensors parser or by the plan's
// check, or accepted with every byte the plan reads unchanged. The files carry fbl.checksum, so a
// flipped bit in the tensor data (which the parser cannot see) is refused too, and an accepted
// mutant holds exactly the original tensors and metadata.
void fuzzSafetensors(const std::string& label, const std::string& bytes, uint64_t seed,
                     const std::function<std::string(const safetensors::File&)>& check,
                     const std::function<std::vector<std::string>()>& keys) {
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, bytes.data(), 8);
  const json header = json::parse(bytes.substr(8, headerLen));
  safetensors::File original = fbl::testing::requireValue(safetensors::parse(bytes, label));
  REQUIRE(check(original) == "");
  Mutator mutator(header, {}, seed);
  constexpr int kMutants = 200;
  REQUIRE(original.metadata.count(safetensors::kChecksumKey) == 1);
  int refusedParse = 0, refusedPlan = 0, accepted = 0, flipped = 0;
  for (int i = 0; i < kMutants; ++i) {
    std::string what, mutated;
    const bool flip = i % 10 == 8;
    if (flip) {  // one bit of the data
      mutated = bytes;
      const uint64_t dataBytes = bytes.size() - 8 - headerLen;
      const uint64_t at = 8 + headerLen + mutator.pick(dataBytes);
      const int bit = static_cast<int>(mutator.pick(8));
      mutated[at] = static_cast<char>(static_cast<unsigned char>(mutated[at]) ^ (1u << bit));
      what = "bit " + std::to_string(bit) + " of byte " + std::to_string(at) + " flipped";
    } else if (i % 10 == 9) {  // the header length, or the file cut short
      mutated = bytes;
      const uint64_t lens[] = {0, headerLen - 1, headerLen + 8, bytes.size(), uint64_t{1} << 63, ~uint64_t{0}};
      if (i % 20 == 9) {
        const uint64_t len = lens[mutator.pick(std::size(lens))];
        std::memcpy(mutated.data(), &len, 8);
        what = "header length " + std::to_string(headerLen) + " -> " + std::to_string(len);
      } else {
        mutated.resize(mutator.pick(bytes.size()));
        what = "cut to " + std::to_string(mutated.size()) + " bytes";
      }
    } else {
      json h = header;
      what = mutator.mutate(h);
      std::string js = h.dump();
      while (js.size() % 8 != 0) js.push_back(' ');
      const uint64_t n = js.size();
      mutated = std::string(reinterpret_cast<const char*>(&n), 8) + js + bytes.substr(8 + headerLen);
    }
    INFO(label << " mutant " << i << ": " << what);
    const Result<safetensors::File> parsed = safetensors::parse(mutated, label);
    std::string e = fbl::testing::errorText(parsed);
    if (!parsed.ok()) {
      CHECK(oneLine(e));
      CHECK(e.find(label) != std::string::npos);
      ++refusedParse;
      continue;
    }
    const safetensors::File& f = *parsed;
    e = check(f);
    if (flip) {
      CHECK_THAT(e, Catch::Contains("is corrupted: its tensors or metadata do not match its checksum"));
      ++flipped;
    }
    if (!e.empty()) {
      CHECK(oneLine(e));
      CHECK(e.find(label) != std::string::npos);
      ++refusedPlan;
      continue;
    }
    ++accepted;
    CHECK(f.metadata == original.metadata);
    REQUIRE(f.tensors.size() == original.tensors.size());
    for (const auto& [k, t] : original.tensors) {
      INFO(k);
      REQUIRE(f.tensors.count(k) == 1);
      CHECK(f.tensors.at(k).dtype == t.dtype);
      CHECK(f.tensors.at(k).shape == t.shape);
      CHECK(f.tensors.at(k).data == t.data);
    }
    for (const std::string& k : keys()) {
      INFO(k);
      REQUIRE(f.tensors.count(k) == 1);
      CHECK(f.tensors.at(k).data == original.tensors.at(k).data);
    }
  }
  std::printf("%s mutants: %d; refused by the safetensors checks %d; refused against the plan or the checksum %d (%d "
              "flipped data bits, all refused); accepted with the plan's bytes unchanged %d; crashed 0\n",
              label.c_str(), kMutants, refusedParse, refusedPlan, flipped, accepted);
  CHECK(flipped == kMutants / 10);
  CHECK(refusedParse + refusedPlan + accepted == kMutants);
}

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_CASE("mutated weights and checkpoints are refused or read unchanged", "[runtime][fuzz]") {
  const Model& m = llamaTiny();
  const planfile::Plan& p = m.plan;
  fuzzSafetensors(
      m.args.weights, fileBytes(m.args.weights), 18, [&](const safetensors::File& f) { return fbl::testing::errorText(rt::checkWeights(p, f, m.args.weights)); },
      [&] {
        std::vector<std::string> keys;
        for (const auto& t : p.tensors)
          if (t.role == planfile::Role::Weight || t.role == planfile::Role::Trainable) keys.push_back(t.source);
        return keys;
      });
  // A checkpoint as the runtime writes it, after one step.
  auto s = fbl::testing::requireValue(rt::Session::open(m.args.output));
  REQUIRE_OK(s->loadWeights(m.args.weights));
  writeInputs(*s, p);
  float loss = 0.0f;
  REQUIRE_OK(s->trainStep(&loss));
  const std::string ckpt = tempDir() + "/fuzz.ckpt.safetensors";
  REQUIRE_OK(s->saveCheckpoint(ckpt));
  fuzzSafetensors(
      ckpt, fileBytes(ckpt), 19,
      [&](const safetensors::File& f) {
        int64_t step = 0;
        return fbl::testing::errorText(rt::checkCheckpoint(p, f, ckpt, &step));
      },
      [&] {
        std::vector<std::string> keys;
        for (const auto& t : p.trainables) keys.push_back(p.tensors[t.param].name);
        for (int32_t st : p.state) keys.push_back(p.tensors[st].name);
        return keys;
      });
}

}  // namespace
}  // namespace fbl::testing
