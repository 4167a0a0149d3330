// The plan file: what `fblc compile` writes and the runtime executes. Header-only (C++17, the
// standard library and nlohmann::json) because both sides need it and the runtime links nothing
// from the compiler. docs/plan-format.md describes the format for people.
//
// Layout on disk (little-endian):
//   "FBLPLAN\n"  u32 version  u32 0  u64 json_len  u64 blob_len  json  blob  u64 fnv1a64
// The checksum covers every byte before it. The JSON holds tensors, the memory plan, the OpenCL
// program and the launch list; the blob holds compile-time constants (masks, rotary tables),
// never weights: weights are named and loaded from a safetensors file.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/fnv1a64.h"
#include "runtime/status.h"
#include "runtime/training_loop.h"

namespace fbl::planfile {

inline constexpr char kMagic[8] = {'F', 'B', 'L', 'P', 'L', 'A', 'N', '\n'};
// 2: image storage (Tensor::image*, Plan::imageSlots) and packed layouts (Tensor::pack/unpack,
// Plan::transfers, Plan::staging).
// 3: Plan::inputChecks, and kernels that guard every index they read (a version-2 plan's
// program does not, so it is refused rather than read without its checks).
// 4: Launch::argBytes, each argument's byte size as the launch declares it, and
// Plan::kernelWork, each kernel's work sizes and the bytes its parameters need; the loader checks
// every launch against both (runtime/plan_check.h).
// 5: Plan::loop (`training_loop`: gradient accumulation, clipping, the lr schedule); a version-4
// runtime would ignore it and train with other semantics, so the version says so.
// 6: Plan::updatedBuffers, state that starts from the weights file and every micro-batch commits
// (BatchNorm's running statistics); a version-5 runtime would zero it.
// 7: Plan::poolBytes: the arena is allocated as pools, and every kernel takes a pool and an
// offset per buffer parameter (a version-6 runtime binds one buffer and offsets).
// 8: chunked transfers (Tensor::transferRows, Plan::transferFirstRow): the staging tensor holds
// a chunk of rows, and each transfer takes the chunk's first row as a third argument.
// 9: frozen weights stored narrower (Tensor::encoding): kernels dequantize them, and the weights
// file holds the encoded bytes.
inline constexpr uint32_t kVersion = 9;

using ::fbl::fnv1a64;

// What a tensor is for; decides who fills it and whether its bytes survive a step.
// Counter: i32 counts that kernels keep between their groups (rtile_matmul_narrow.cl's
// `arrivals`): the runtime zeroes them at load and every launch leaves them zero. A runtime that
// predates the role refuses the plan (an unknown role) rather than run it unzeroed.
enum class Role { Input, Weight, Trainable, State, Constant, Step, Intermediate, Scratch, Counter };
inline const char* roleName(Role r) {
  static const char* names[] = {"input", "weight",       "trainable", "state",  "constant",
                                "step",  "intermediate", "scratch",   "counter"};
  return names[static_cast<int>(r)];
}

struct Tensor {
  std::string name;
  std::string dtype;               // "f32", "i64", "bool", ...
  std::vector<int64_t> shape;
  std::string layout = "row_major";  // for people: "row_major", "rtile 16x64 strips", "image", "texture"
  // "buffer": `bytes` at `offset` in the arena (a packed layout may pad them). "image": an
  // RGBA/FLOAT image2d of imageWidth x imageHeight texels, the image object `imageSlot` of the
  // plan (tensors whose lifetimes do not overlap share one); offset and bytes are then 0.
  std::string storage = "buffer";
  Role role = Role::Intermediate;
  int64_t offset = 0;              // in the arena, bytes
  int64_t bytes = 0;
  std::string source;              // Weight/Trainable: the safetensors key
  int64_t constOffset = -1;        // Constant: bytes in the blob
  int64_t imageWidth = 0, imageHeight = 0;
  int32_t imageSlot = -1;
  // A tensor the runtime writes or reads (weights, trainables, state) in another layout than
  // row-major: the Plan::transfers launches that pack it from row-major bytes in the staging
  // tensor and unpack it there. -1: its bytes are row-major, copied as they are.
  int32_t pack = -1, unpack = -1;
  // With a pack or unpack: the rows (all dims but the last folded) one transfer launch moves
  // through the staging tensor; the runtime runs it once per chunk of that many rows.
  int64_t transferRows = 0;
  // A frozen weight stored narrower than its f32 values (`fblc compile --base-weights`): "fp16",
  // or "int8" / "int4", signed integers each times the fp16 scale of its group of `groupSize`
  // elements along `groupAxis` of the [rows x cols] matrix; encodedBytes() lays the bytes out.
  // Empty: the bytes are `dtype` elements. The weights file holds the encoded bytes as they are.
  std::string encoding;
  int64_t groupSize = 0;
  int32_t groupAxis = 1;

  bool image() const { return storage == "image"; }
  // Filled from the weights file by `source`: weights, trainables and updated buffers (state
  // that starts from the model's values, Plan::updatedBuffers).
  bool fromWeights() const {
    return role == Role::Weight || role == Role::Trainable || (role == Role::State && !source.empty());
  }
};

// Bytes of a tensor's elements, row-major: what the host writes and reads.
inline int64_t elementSize(const std::string& dtype) {
  if (dtype == "f64" || dtype == "i64" || dtype == "u64") return 8;
  if (dtype == "f32" || dtype == "i32" || dtype == "u32") return 4;
  if (dtype == "f16" || dtype == "bf16" || dtype == "i16" || dtype == "u16") return 2;
  return 1;
}
// The bits of an encoding (Tensor::encoding): 16, 8 or 4; 0 for none or an unknown one.
inline int encodingBits(const std::string& encoding) {
  return encoding == "fp16" ? 16 : encoding == "int8" ? 8 : encoding == "int4" ? 4 : 0;
}
// The encoding of `bits` (16, 8 or 4) by name: the inverse of encodingBits.
inline std::string encodingName(int bits) { return bits == 16 ? "fp16" : "int" + std::to_string(bits); }
// An encoded [rows x cols] matrix, row-major: the elements (`bits` each, two 4-bit elements a
// byte, the even one in the low nibble), then from the next 16-byte boundary one fp16 scale per
// group (8 and 4 bits), the scales in the row-major order of the [rows/g x cols] or
// [rows x cols/g] grid of groups; the whole padded to 16 bytes. The byte offset of the scales:
inline int64_t encodedScalesOffset(int bits, int64_t rows, int64_t cols) {
  return (rows * cols * bits / 8 + (bits == 4 ? (rows * cols) % 2 : 0) + 15) / 16 * 16;
}
inline int64_t encodedBytes(int bits, int64_t group, int64_t rows, int64_t cols) {
  const int64_t scales = bits == 8 || bits == 4 ? rows * cols / group : 0;
  return (encodedScalesOffset(bits, rows, cols) + 2 * scales + 15) / 16 * 16;
}
// What a launch declares of an argument (Launch::argBytes): a buffer's bytes in the arena, an
// image's texels (16 bytes each).
inline int64_t argumentBytes(const Tensor& t) { return t.image() ? t.imageWidth * t.imageHeight * 16 : t.bytes; }
inline int64_t logicalBytes(const Tensor& t) {
  int64_t n = elementSize(t.dtype);
  for (int64_t d : t.shape) n *= d;
  return n;
}

// What the host writes and reads of a tensor: its encoded bytes, or its row-major elements.
inline int64_t hostBytes(const Tensor& t) { return t.encoding.empty() ? logicalBytes(t) : t.bytes; }

// The rows a transfer moves a tensor in (Tensor::transferRows): a matrix of its last
// dimension's columns, the other dimensions folded into rows (1 for a scalar).
inline int64_t transferRows(const std::vector<int64_t>& shape) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  return rows;
}
// The row-major bytes of one such row: a chunk of Tensor::transferRows rows is that many times it.
inline int64_t transferRowBytes(const std::vector<int64_t>& shape, const std::string& dtype) {
  return (shape.empty() ? 1 : shape.back()) * elementSize(dtype);
}

struct Launch {
  std::string phase;               // "forward", "backward", "optimizer"
  int32_t kernel = 0;              // index into Plan::kernelNames
  std::vector<int32_t> args;       // tensor ids, in kernel parameter order
  std::vector<int64_t> global;     // 1..3 dims
  std::vector<int64_t> local;      // empty: the driver chooses
  std::string node;                // the graph node it comes from, for diagnostics
  // What the launch does: "compute"; "transform", a movement op (Reshape/Transpose/Slice/...)
  // run as a kernel; "conversion", a layout conversion the layout lowering inserted. Benchmarks
  // sum the last two as layout-transformation time.
  std::string kind = "compute";
  // Nodes computed inside this launch's kernel besides `node` (compiler/plan/fusion.h); for
  // reports only, the runtime ignores it. `node` then ends in "+Op" per fused node.
  std::vector<std::string> fused;
  // Per argument, the bytes of the tensor the kernel was generated for (argumentBytes: an
  // image's texels), as the file declares them; the writer takes them from the tensor table, and the loader refuses a launch whose
  // argument names a tensor of another size (runtime/plan_check.h). Filled by parse().
  std::vector<int64_t> argBytes;
};

// What one consumer needs of an integer input's values (compiler/analysis/input_bounds.h); the
// runtime checks every element the host writes against every check of that input.
struct InputCheck {
  int32_t input = -1;              // a tensor of Plan::inputs
  std::string kind = "index";      // "index" (a Gather's indices) or "label" (a loss's labels)
  int64_t lo = 0, hi = 0;          // lo <= v < hi
  bool hasIgnore = false;          // "label": ignoreIndex is accepted too
  int64_t ignoreIndex = 0;
  std::string node;                // the consumer, for messages
  std::string table;               // "index": the tensor it indexes
};

struct Trainable {
  int32_t param = -1;
  int32_t grad = -1;
  std::string adapterKey;          // its key in peft's adapter_model.safetensors
};

// The work sizes a kernel was generated for: shapes are literals in its code, and identical
// instantiations are merged, so every launch of one kernel has them.
struct KernelWork {
  std::vector<int64_t> global, local;
  // Per parameter, the fewest bytes any of its launches gives it (argumentBytes): the kernel
  // touches no more, so a launch must give it at least these.
  std::vector<int64_t> argBytes;
};

struct Plan {
  std::string model;
  std::string profile;
  int64_t alignment = 256;
  // The arena is the plan's address space for buffer tensors: offsets are in it, and its size
  // is the planned peak. The runtime allocates it as pools of pool_bytes (the last one holds
  // the rest), each no larger than the device may allocate at once; no tensor straddles two.
  int64_t arenaBytes = 0;
  int64_t poolBytes = int64_t{1} << 46;  // the largest arena a plan may have: one pool
  std::vector<Tensor> tensors;
  std::string program;             // OpenCL C 1.2, every kernel of the plan
  std::string buildOptions = "-cl-std=CL1.2";
  std::vector<std::string> kernelNames;
  // Per kernel, as the file declares them; the writer takes them from each kernel's first launch,
  // and the loader refuses a launch of other sizes. Filled by parse().
  std::vector<KernelWork> kernelWork;
  std::vector<Launch> launches;
  // Launches the runtime runs outside steps (phase "pack" or "unpack"), named by Tensor::pack
  // and Tensor::unpack; their arguments are [staging, tensor, first row] and [tensor, staging,
  // first row].
  std::vector<Launch> transfers;
  int32_t staging = -1;            // the row-major tensor transfers go through; -1: none
  int32_t transferFirstRow = -1;   // i64 [1]: the chunk's first row, written before each transfer
  std::vector<std::array<int64_t, 2>> imageSlots;  // the plan's image objects: width, height (texels)
  std::vector<std::array<int32_t, 2>> commits;  // copy [src, dst] after a step (updated -> param)
  std::vector<int32_t> inputs;     // the graph's run-time inputs in order (input_N), step excluded
  std::vector<InputCheck> inputChecks;
  int32_t loss = -1;
  int32_t step = -1;
  std::vector<Trainable> trainables;
  std::vector<int32_t> state;
  // State the forward pass updates, as PyTorch updates a module's buffers in train mode
  // (BatchNorm's running mean and variance): each is loaded from the weights file by its
  // `source`, committed after every micro-batch (not only optimizer steps) and saved in
  // checkpoints. Written only when non-empty.
  std::vector<int32_t> updatedBuffers;
  // The model's outputs before its loss (`fblc compile --outputs`: the logits or hidden states
  // the loss reads), row-major buffers whose bytes survive the step: an evaluation step leaves
  // them for the host to read. Written only when non-empty.
  std::vector<int32_t> outputs;
  nlohmann::json optimizer = nlohmann::json::object();
  TrainingLoop loop;               // written only when enabled(): default plans are unchanged
  nlohmann::json adapterConfig = nlohmann::json::object();  // peft's adapter_config.json
  // Why the trainables cannot be exported as peft's adapter; written only when non-empty.
  std::string adapterRefusal;
  // Frozen tensors peft saves beside the adapter (the base weight of an embedding it adapts),
  // each with its key; grad is -1. Written only when non-empty.
  std::vector<Trainable> adapterFrozen;
  std::vector<unsigned char> blob;
  // What `fblc explain` reads: the layout pipeline's decisions and the graph they were made on
  // (docs/explain.md). Optional, written only when non-empty; the runtime never reads it.
  nlohmann::json explain;

  // Bytes of the plan's image objects (RGBA/FLOAT, 16 per texel), beside the arena.
  int64_t imageBytes() const {
    int64_t b = 0;
    for (size_t s = 0; s < imageSlots.size(); ++s) b += imageSlotBytes(s);
    return b;
  }
  int64_t imageSlotBytes(size_t s) const { return imageSlots[s][0] * imageSlots[s][1] * 16; }

  int64_t poolCount() const { return arenaBytes == 0 ? 1 : (arenaBytes + poolBytes - 1) / poolBytes; }
  // Pool i's bytes: pool_bytes, the last one the rest of the arena (at least 1: OpenCL buffers
  // cannot be empty).
  int64_t poolSize(int64_t i) const { return std::max<int64_t>(1, std::min(poolBytes, arenaBytes - i * poolBytes)); }
  // A buffer tensor's pool, and its offset in it.
  int64_t poolOf(const Tensor& t) const { return t.offset / poolBytes; }
  int64_t offsetInPool(const Tensor& t) const { return t.offset % poolBytes; }

  int32_t findTensor(const std::string& name) const {
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].name == name) return static_cast<int32_t>(i);
    return -1;
  }
};

inline nlohmann::json toJson(const Plan& p) {
  using nlohmann::json;
  json j;
  j["format"] = "fbl-plan";
  j["version"] = kVersion;
  j["model"] = p.model;
  j["profile"] = p.profile;
  j["alignment"] = p.alignment;
  j["arena_bytes"] = p.arenaBytes;
  j["pool_bytes"] = p.poolBytes;
  json ts = json::array();
  for (const Tensor& t : p.tensors) {
    json o{{"name", t.name},       {"dtype", t.dtype},     {"shape", t.shape},
           {"layout", t.layout},   {"storage", t.storage}, {"role", roleName(t.role)},
           {"offset", t.offset},   {"bytes", t.bytes}};
    if (!t.source.empty()) o["source"] = t.source;
    if (t.constOffset >= 0) o["const_offset"] = t.constOffset;
    if (t.image()) {
      o["image"] = {t.imageWidth, t.imageHeight};
      o["image_slot"] = t.imageSlot;
    }
    if (t.pack >= 0) o["pack"] = t.pack;
    if (t.unpack >= 0) o["unpack"] = t.unpack;
    if (t.pack >= 0 || t.unpack >= 0) o["transfer_rows"] = t.transferRows;
    if (!t.encoding.empty()) {
      o["encoding"] = t.encoding;
      if (t.groupSize > 0) o["group"] = {t.groupSize, t.groupAxis};
    }
    ts.push_back(std::move(o));
  }
  j["tensors"] = std::move(ts);
  j["program"] = p.program;
  j["build_options"] = p.buildOptions;
  j["kernels"] = p.kernelNames;
  json work = json::array();
  for (size_t k = 0; k < p.kernelNames.size(); ++k) {
    json w = {{"global", json::array()}, {"local", json::array()}, {"arg_bytes", json::array()}};
    std::vector<int64_t> fewest;
    for (const auto* list : {&p.launches, &p.transfers})
      for (auto it = list->rbegin(); it != list->rend(); ++it) {
        if (it->kernel != static_cast<int32_t>(k)) continue;
        w["global"] = it->global;
        w["local"] = it->local;
        for (size_t a = 0; a < it->args.size(); ++a) {
          const int64_t b = it->args[a] >= 0 && it->args[a] < static_cast<int32_t>(p.tensors.size()) ? argumentBytes(p.tensors[it->args[a]]) : 0;
          if (a >= fewest.size()) fewest.push_back(b);
          else fewest[a] = std::min(fewest[a], b);
        }
      }
    w["arg_bytes"] = fewest;
    work.push_back(std::move(w));
  }
  j["kernel_work"] = std::move(work);
  auto launches = [&p](const std::vector<Launch>& list) {
    json ls = json::array();
    for (const Launch& l : list) {
      std::vector<int64_t> argBytes;
      for (int32_t a : l.args)
        argBytes.push_back(a >= 0 && a < static_cast<int32_t>(p.tensors.size()) ? argumentBytes(p.tensors[a]) : -1);
      ls.push_back({{"phase", l.phase}, {"kernel", l.kernel}, {"args", l.args}, {"arg_bytes", argBytes},
                    {"global", l.global}, {"local", l.local}, {"node", l.node}});
      if (l.kind != "compute") ls.back()["kind"] = l.kind;
      if (!l.fused.empty()) ls.back()["fused"] = l.fused;
    }
    return ls;
  };
  j["launches"] = launches(p.launches);
  j["transfers"] = launches(p.transfers);
  j["staging"] = p.staging;
  j["transfer_first_row"] = p.transferFirstRow;
  j["image_slots"] = p.imageSlots;
  j["commits"] = p.commits;
  j["inputs"] = p.inputs;
  json checks = json::array();
  for (const InputCheck& c : p.inputChecks) {
    json o{{"input", c.input}, {"kind", c.kind}, {"lo", c.lo}, {"hi", c.hi}, {"node", c.node}};
    if (c.hasIgnore) o["ignore_index"] = c.ignoreIndex;
    if (!c.table.empty()) o["table"] = c.table;
    checks.push_back(std::move(o));
  }
  j["input_checks"] = std::move(checks);
  j["loss"] = p.loss;
  j["step"] = p.step;
  json tr = json::array();
  for (const Trainable& t : p.trainables)
    tr.push_back({{"param", t.param}, {"grad", t.grad}, {"adapter_key", t.adapterKey}});
  j["trainables"] = std::move(tr);
  j["state"] = p.state;
  if (!p.updatedBuffers.empty()) j["updated_buffers"] = p.updatedBuffers;
  if (!p.outputs.empty()) j["outputs"] = p.outputs;
  j["optimizer"] = p.optimizer;
  if (p.loop.enabled())
    j["training_loop"] = {{"grad_accum", p.loop.gradAccum},   {"clip_grad_norm", p.loop.clipGradNorm},
                          {"schedule", p.loop.schedule},      {"lr", p.loop.lr},
                          {"warmup_steps", p.loop.warmupSteps}, {"total_steps", p.loop.totalSteps},
                          {"lr_tensor", p.loop.lrTensor},     {"accum_keep", p.loop.accumKeep},
                          {"accumulators", p.loop.accumulators}};
  j["adapter_config"] = p.adapterConfig;
  if (!p.adapterRefusal.empty()) j["adapter_refusal"] = p.adapterRefusal;
  if (!p.adapterFrozen.empty()) {
    json fr = json::array();
    for (const Trainable& t : p.adapterFrozen) fr.push_back({{"param", t.param}, {"adapter_key", t.adapterKey}});
    j["adapter_frozen"] = std::move(fr);
  }
  if (!p.explain.is_null() && !p.explain.empty()) j["explain"] = p.explain;
  return j;
}

inline bool roleFromName(const std::string& s, Role* r) {
  for (int i = 0; i <= static_cast<int>(Role::Counter); ++i)
    if (s == roleName(static_cast<Role>(i))) {
      *r = static_cast<Role>(i);
      return true;
    }
  return false;
}

inline std::string serialize(const Plan& p) {
  // dump() of nlohmann's std::map-backed objects sorts keys: the same plan gives the same bytes.
  const std::string js = toJson(p).dump(1);
  std::string out(kMagic, sizeof kMagic);
  auto put = [&out](const void* d, size_t n) { out.append(static_cast<const char*>(d), n); };
  const uint32_t version = kVersion, reserved = 0;
  const uint64_t jsonLen = js.size(), blobLen = p.blob.size();
  put(&version, 4);
  put(&reserved, 4);
  put(&jsonLen, 8);
  put(&blobLen, 8);
  out += js;
  put(p.blob.data(), p.blob.size());
  const uint64_t sum = fnv1a64(out.data(), out.size());
  put(&sum, 8);
  return out;
}

// An index field: an integer that fits int32_t (nlohmann converts a larger one silently, so
// 2^32 + 5 would become tensor 5).
inline int32_t indexValue(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer()) throw std::invalid_argument("'" + key + "' is not an integer index: " + v.dump());
  const int64_t x = v.get<int64_t>();
  if ((v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) || x < INT32_MIN || x > INT32_MAX)
    throw std::out_of_range("'" + key + "' " + v.dump() + " is not a 32-bit index");
  return static_cast<int32_t>(x);
}
inline int32_t indexField(const nlohmann::json& o, const char* key) { return indexValue(o.at(key), key); }
// An integer field (nlohmann would convert 1e30 to an int64_t with undefined behaviour).
inline int64_t intValue(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer()) throw std::invalid_argument("'" + key + "' is not an integer: " + v.dump());
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw std::out_of_range("'" + key + "' " + v.dump() + " is out of range");
  return v.get<int64_t>();
}
inline int64_t intField(const nlohmann::json& o, const char* key) { return intValue(o.at(key), key); }
inline std::vector<int64_t> intListValue(const nlohmann::json& v, const std::string& key) {
  if (!v.is_array()) throw std::invalid_argument("'" + key + "' is not a list");
  std::vector<int64_t> out;
  for (const auto& x : v) out.push_back(intValue(x, key));
  return out;
}
inline std::vector<int64_t> intList(const nlohmann::json& o, const char* key) { return intListValue(o.at(key), key); }
inline std::vector<int32_t> indexListValue(const nlohmann::json& v, const std::string& key) {
  if (!v.is_array()) throw std::invalid_argument("'" + key + "' is not a list");
  std::vector<int32_t> out;
  for (const auto& x : v) out.push_back(indexValue(x, key));
  return out;
}
inline std::vector<int32_t> indexList(const nlohmann::json& o, const char* key) { return indexListValue(o.at(key), key); }

// The plan in `bytes`, else one line saying what is wrong with the file.
inline Result<Plan> parse(const std::string& bytes) {
  Plan p;
  const size_t head = sizeof kMagic + 4 + 4 + 8 + 8;
  if (bytes.size() < head + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return Error{"not an fbl plan (bad magic); compile one with `fblc compile`"};
  uint32_t version = 0;
  uint64_t jsonLen = 0, blobLen = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version != kVersion)
    return Error{"plan format version " + std::to_string(version) + " is not supported (this runtime reads " +
                 std::to_string(kVersion) + "); recompile it with this release's `fblc compile`"};
  std::memcpy(&jsonLen, bytes.data() + 16, 8);
  std::memcpy(&blobLen, bytes.data() + 24, 8);
  if (jsonLen > bytes.size() || blobLen > bytes.size() || head + jsonLen + blobLen + 8 != bytes.size())
    return Error{"plan is truncated or corrupted (section sizes do not match the file size)"};
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (sum != fnv1a64(bytes.data(), bytes.size() - 8))
    return Error{"plan is corrupted (checksum mismatch); recompile or copy it again"};
  nlohmann::json j = nlohmann::json::parse(bytes.begin() + head, bytes.begin() + head + jsonLen,
                                           nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"plan is corrupted (its JSON section does not parse)"};
  std::string at = "the header";  // the item being read, for the message
  try {
    p.model = j.at("model").get<std::string>();
    p.profile = j.at("profile").get<std::string>();
    p.alignment = intField(j, "alignment");
    p.arenaBytes = intField(j, "arena_bytes");
    p.poolBytes = intField(j, "pool_bytes");
    for (const auto& o : j.at("tensors")) {
      Tensor t;
      at = "tensor " + std::to_string(p.tensors.size());
      t.name = o.at("name").get<std::string>();
      at += " '" + t.name + "'";
      t.dtype = o.at("dtype").get<std::string>();
      t.shape = intList(o, "shape");
      t.layout = o.at("layout").get<std::string>();
      t.storage = o.at("storage").get<std::string>();
      if (!roleFromName(o.at("role").get<std::string>(), &t.role))
        return Error{"plan tensor '" + t.name + "' has an unknown role"};
      t.offset = intField(o, "offset");
      t.bytes = intField(o, "bytes");
      if (o.contains("source")) t.source = o.at("source").get<std::string>();
      if (o.contains("const_offset")) t.constOffset = intField(o, "const_offset");
      if (o.contains("image")) {
        const std::vector<int64_t> extent = intList(o, "image");
        if (extent.size() != 2) return Error{"plan tensor '" + t.name + "' has an image extent that is not [width, height]"};
        t.imageWidth = extent[0];
        t.imageHeight = extent[1];
        t.imageSlot = indexField(o, "image_slot");
      }
      t.pack = o.contains("pack") ? indexField(o, "pack") : -1;
      t.unpack = o.contains("unpack") ? indexField(o, "unpack") : -1;
      if (t.pack >= 0 || t.unpack >= 0) t.transferRows = o.at("transfer_rows").get<int64_t>();
      if (o.contains("encoding")) t.encoding = o.at("encoding").get<std::string>();
      if (o.contains("group")) {
        const std::vector<int64_t> group = intList(o, "group");
        if (group.size() != 2 || group[1] < 0 || group[1] > 1)
          return Error{"plan tensor '" + t.name + "' has a group that is not [size, axis 0 or 1]"};
        t.groupSize = group[0];
        t.groupAxis = static_cast<int32_t>(group[1]);
      }
      p.tensors.push_back(std::move(t));
    }
    p.program = j.at("program").get<std::string>();
    p.buildOptions = j.at("build_options").get<std::string>();
    p.kernelNames = j.at("kernels").get<std::vector<std::string>>();
    at = "kernel_work";
    for (const auto& w : j.at("kernel_work")) p.kernelWork.push_back({intList(w, "global"), intList(w, "local"), intList(w, "arg_bytes")});
    if (p.kernelWork.size() != p.kernelNames.size()) return Error{"plan is malformed: kernel_work does not have one entry per kernel"};
    auto readLaunches = [&at](const nlohmann::json& list, std::vector<Launch>* out, const char* what) {
      for (const auto& o : list) {
        Launch l;
        at = what + std::string(" ") + std::to_string(out->size());
        l.phase = o.at("phase").get<std::string>();
        l.kernel = indexField(o, "kernel");
        l.args = indexList(o, "args");
        l.global = intList(o, "global");
        l.local = intList(o, "local");
        l.argBytes = intList(o, "arg_bytes");
        l.node = o.at("node").get<std::string>();
        l.kind = o.value("kind", std::string("compute"));
        if (o.contains("fused")) l.fused = o.at("fused").get<std::vector<std::string>>();
        out->push_back(std::move(l));
      }
    };
    readLaunches(j.at("launches"), &p.launches, "launch");
    readLaunches(j.at("transfers"), &p.transfers, "transfer");
    at = "the plan's tensor lists";
    p.staging = indexField(j, "staging");
    p.transferFirstRow = indexField(j, "transfer_first_row");
    for (const auto& slot : j.at("image_slots")) {
      const std::vector<int64_t> extent = intListValue(slot, "image_slots");
      if (extent.size() != 2) return Error{"plan is malformed: an image slot is not [width, height]"};
      p.imageSlots.push_back({extent[0], extent[1]});
    }
    for (const auto& c : j.at("commits")) {
      const std::vector<int32_t> pair = indexListValue(c, "commits");
      if (pair.size() != 2) return Error{"plan is malformed: a commit is not a [src, dst] pair"};
      p.commits.push_back({pair[0], pair[1]});
    }
    p.inputs = indexList(j, "inputs");
    for (const auto& o : j.at("input_checks")) {
      InputCheck c;
      c.input = indexField(o, "input");
      c.kind = o.at("kind").get<std::string>();
      c.lo = intField(o, "lo");
      c.hi = intField(o, "hi");
      c.hasIgnore = o.contains("ignore_index");
      if (c.hasIgnore) c.ignoreIndex = intField(o, "ignore_index");
      c.node = o.at("node").get<std::string>();
      c.table = o.value("table", std::string());
      p.inputChecks.push_back(std::move(c));
    }
    p.loss = indexField(j, "loss");
    p.step = indexField(j, "step");
    for (const auto& o : j.at("trainables"))
      p.trainables.push_back({indexField(o, "param"), indexField(o, "grad"),
                               o.at("adapter_key").get<std::string>()});
    p.state = indexList(j, "state");
    if (j.contains("updated_buffers")) p.updatedBuffers = indexList(j, "updated_buffers");
    if (j.contains("outputs")) {
      at = "outputs";
      p.outputs = indexList(j, "outputs");
    }
    p.optimizer = j.at("optimizer");
    if (j.contains("training_loop")) {
      at = "training_loop";
      const auto& o = j.at("training_loop");
      const int64_t accum = intField(o, "grad_accum");
      if (accum < 1 || accum > (1 << 20)) return Error{"plan's training_loop grad_accum " + std::to_string(accum) + " is not in [1, 2^20]"};
      p.loop.gradAccum = static_cast<int32_t>(accum);
      p.loop.clipGradNorm = o.at("clip_grad_norm").get<double>();
      p.loop.schedule = o.at("schedule").get<std::string>();
      p.loop.lr = o.at("lr").get<double>();
      p.loop.warmupSteps = intField(o, "warmup_steps");
      p.loop.totalSteps = intField(o, "total_steps");
      p.loop.lrTensor = indexField(o, "lr_tensor");
      p.loop.accumKeep = indexField(o, "accum_keep");
      p.loop.accumulators = indexList(o, "accumulators");
    }
    p.adapterConfig = j.at("adapter_config");
    if (j.contains("adapter_refusal")) {
      at = "adapter_refusal";
      p.adapterRefusal = j.at("adapter_refusal").get<std::string>();
    }
    if (j.contains("adapter_frozen")) {
      at = "adapter_frozen";
      for (const auto& o : j.at("adapter_frozen"))
        p.adapterFrozen.push_back({indexField(o, "param"), -1, o.at("adapter_key").get<std::string>()});
    }
    if (j.contains("explain")) p.explain = j.at("explain");
  } catch (const std::exception& e) {
    return Error{"plan is malformed at " + at + ": " + e.what()};
  }
  p.blob.assign(bytes.begin() + head + jsonLen, bytes.begin() + head + jsonLen + blobLen);
  // Indices must be in range before anyone uses them.
  const auto n = static_cast<int32_t>(p.tensors.size());
  auto bad = [n](int32_t i) { return i < -1 || i >= n; };
  const auto transfers = static_cast<int32_t>(p.transfers.size());
  if (p.poolBytes < 1 || p.arenaBytes < 0)
    return Error{"plan's pool_bytes " + std::to_string(p.poolBytes) + " or arena_bytes " + std::to_string(p.arenaBytes) + " is out of range"};
  for (const Tensor& t : p.tensors) {
    // Written so that no sum can overflow.
    if (t.offset < 0 || t.bytes < 0 || t.offset > p.arenaBytes || t.bytes > p.arenaBytes - t.offset)
      return Error{"plan tensor '" + t.name + "' lies outside the arena (offset " + std::to_string(t.offset) + ", bytes " +
                   std::to_string(t.bytes) + ", arena_bytes " + std::to_string(p.arenaBytes) + ")"};
    if (!t.image() && t.bytes > 0 && p.poolOf(t) != (t.offset + t.bytes - 1) / p.poolBytes)
      return Error{"plan tensor '" + t.name + "' straddles two pools (offset " + std::to_string(t.offset) + ", bytes " +
                   std::to_string(t.bytes) + ", pool_bytes " + std::to_string(p.poolBytes) + ")"};
    const auto blobBytes = static_cast<int64_t>(p.blob.size());
    if (t.constOffset >= 0 && (t.constOffset > blobBytes || t.bytes > blobBytes - t.constOffset))
      return Error{"plan constant '" + t.name + "' lies outside the blob (const_offset " + std::to_string(t.constOffset) + ")"};
    if (t.storage != "buffer" && t.storage != "image")
      return Error{"plan tensor '" + t.name + "' has an unknown storage '" + t.storage + "'"};
    if (t.image() && (t.imageSlot < 0 || t.imageSlot >= static_cast<int32_t>(p.imageSlots.size()) ||
                      p.imageSlots[t.imageSlot][0] != t.imageWidth || p.imageSlots[t.imageSlot][1] != t.imageHeight ||
                      t.dtype != "f32" || t.constOffset >= 0))
      return Error{"plan tensor '" + t.name + "': image_slot " + std::to_string(t.imageSlot) + " and image [" + std::to_string(t.imageWidth) + ", " +
                   std::to_string(t.imageHeight) + "] do not name an f32 image slot of that extent"};
    if (t.pack < -1 || t.pack >= transfers || t.unpack < -1 || t.unpack >= transfers ||
        ((t.pack >= 0 || t.unpack >= 0) &&
         (p.staging < 0 || p.staging >= n || p.transferFirstRow < 0 || p.transferFirstRow >= n)))
      return Error{"plan tensor '" + t.name + "': pack " + std::to_string(t.pack) + " or unpack " + std::to_string(t.unpack) +
                   " is not a transfer, or there is no staging tensor or first-row tensor"};
    if (t.image() && t.pack < 0 && t.role != Role::Intermediate)
      return Error{"plan tensor '" + t.name + "' is an image the runtime cannot fill"};
  }
  if (bad(p.staging) || bad(p.transferFirstRow))
    return Error{"plan's staging " + std::to_string(p.staging) + " or transfer_first_row " + std::to_string(p.transferFirstRow) +
                 " is not a tensor"};
  for (const auto& slot : p.imageSlots)
    if (slot[0] <= 0 || slot[1] <= 0) return Error{"plan has an image of no extent"};
  for (const auto* list : {&p.launches, &p.transfers})
    for (size_t i = 0; i < list->size(); ++i) {
      const Launch& l = (*list)[i];
      const std::string who = std::string(list == &p.launches ? "launch " : "transfer ") + std::to_string(i) + " (node '" + l.node + "')";
      if (l.kernel < 0 || l.kernel >= static_cast<int32_t>(p.kernelNames.size()))
        return Error{who + ": kernel " + std::to_string(l.kernel) + " is not one of the " + std::to_string(p.kernelNames.size()) + " kernels"};
      for (size_t a = 0; a < l.args.size(); ++a)
        if (l.args[a] < 0 || l.args[a] >= n)
          return Error{who + ": args[" + std::to_string(a) + "] " + std::to_string(l.args[a]) + " is not one of the " + std::to_string(n) + " tensors"};
      if (l.global.empty() || l.global.size() > 3 || (!l.local.empty() && l.local.size() != l.global.size()))
        return Error{who + ": global has " + std::to_string(l.global.size()) + " dimensions and local " + std::to_string(l.local.size()) +
                     " (1 to 3, local empty or the same)"};
    }
  for (const auto& c : p.commits)
    if (c[0] < 0 || c[0] >= n || c[1] < 0 || c[1] >= n || p.tensors[c[0]].image() || p.tensors[c[1]].image())
      return Error{"plan has a commit [" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + "] that is not two buffer tensors"};
  if (bad(p.loss) || bad(p.step)) return Error{"plan's loss " + std::to_string(p.loss) + " or step " + std::to_string(p.step) + " is not a tensor"};
  for (int32_t i : p.inputs)
    if (i < 0 || i >= n) return Error{"plan's inputs name " + std::to_string(i) + ", not a tensor"};
  for (const InputCheck& c : p.inputChecks)
    if (std::find(p.inputs.begin(), p.inputs.end(), c.input) == p.inputs.end() ||
        (c.kind != "index" && c.kind != "label") || c.lo > c.hi)
      return Error{"plan has a bad input check (node '" + c.node + "')"};
  for (const Trainable& t : p.trainables)
    if (t.param < 0 || t.param >= n || bad(t.grad))
      return Error{"plan's trainable '" + t.adapterKey + "' has param " + std::to_string(t.param) + " and grad " + std::to_string(t.grad) + ", not tensors"};
  for (const Trainable& t : p.adapterFrozen)
    if (t.param < 0 || t.param >= n)
      return Error{"plan's adapter tensor '" + t.adapterKey + "' has param " + std::to_string(t.param) + ", not a tensor"};
  for (int32_t s : p.state)
    if (s < 0 || s >= n) return Error{"plan's state names " + std::to_string(s) + ", not a tensor"};
  for (int32_t b : p.updatedBuffers)
    if (b < 0 || b >= n) return Error{"plan's updated_buffers name " + std::to_string(b) + ", not a tensor"};
  for (int32_t o : p.outputs)
    if (o < 0 || o >= n || p.tensors[o].image() || p.tensors[o].layout != "row_major")
      return Error{"plan's outputs name " + std::to_string(o) + ", not a row-major buffer tensor"};
  return p;
}

}  // namespace fbl::planfile
