// Checking a plan's contents, in the order of runtime/plan_check.h:
//  1. header: alignment, arena size, pool size and count;
//  2. tensors: unique names, dtype, shape and bytes agree (a row-major buffer holds exactly its
//     elements, an R-Tile buffer its whole tiles, a packed one at least them, an image enough
//     texels), offsets aligned and inside the arena, constants inside the blob;
//  3. the tensors the runtime itself reads and writes: staging, loss, step, inputs, trainables
//     and their gradients, state, commits, pack and unpack transfers;
//  4. launches: phases in step order, work sizes the kernel's (kernel_work), declared argument
//     bytes equal to the tensors' and at least what the kernel declares it needs, the kernel's
//     parameter list (arity, images, element sizes) matching the arguments, no launch writing a
//     weight, constant or input, and only the optimizer phase writing trainables, state or the
//     step; no transient tensor read before a launch writes it; work sizes positive, divisible
//     and within 32-bit indices;
//  5. memory: no two buffer tensors whose lifetimes (first to last launch; persistent ones the
//     whole step, kept ones to its end, staging after it) overlap share a byte.
#include "runtime/plan_check.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "runtime/files.h"
#include "runtime/input_check.h"
#include "runtime/shape_text.h"

namespace fbl::rt {

namespace {

using planfile::Launch;
using planfile::Plan;
using planfile::Role;
using planfile::Tensor;

// Large enough for any plan a phone runs, small enough that sums of two never overflow.
constexpr int64_t kMaxBytes = int64_t{1} << 46;
// More pools than a driver would give one context is a corrupt plan, not a small device.
constexpr int64_t kMaxPools = 1 << 16;
constexpr int64_t kMaxImageSide = int64_t{1} << 20;
// Kernels index work-items with 32-bit unsigned integers.
constexpr uint64_t kMaxWorkItems = uint64_t{1} << 32;

std::string num(int64_t v) { return std::to_string(v); }

bool knownDType(const std::string& d) {
  static const char* names[] = {"f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8",
                                "u64", "u32", "u16", "u8",  "bool"};
  for (const char* n : names)
    if (d == n) return true;
  return false;
}

// The tensor's row-major bytes, or -1 when a dimension is negative or the product too large.
int64_t checkedLogicalBytes(const Tensor& t) {
  int64_t n = planfile::elementSize(t.dtype);
  for (int64_t d : t.shape) {
    if (d < 0) return -1;
    if (d != 0 && n > kMaxBytes / d) return -1;
    n *= d;
  }
  return n;
}

bool persistent(Role r) {
  return r == Role::Input || r == Role::Weight || r == Role::Trainable || r == Role::State ||
         r == Role::Constant || r == Role::Step || r == Role::Counter;
}

std::string tensorName(const Plan& p, int32_t t) { return "tensor '" + p.tensors[t].name + "'"; }

// A kernel's parameter for one tensor argument, as the kernel's source declares it.
struct Param {
  bool image = false;
  int64_t elementSize = 0;  // of the pointer the kernel casts its offset to; 0: not found
  bool written = false;     // cast to a non-const pointer, or a __write_only image
};

int64_t scalarSize(const std::string& type) {
  static const std::map<std::string, int64_t> sizes = {
      {"float", 4}, {"double", 8}, {"half", 2}, {"long", 8}, {"ulong", 8}, {"int", 4},
      {"uint", 4},  {"short", 2},  {"ushort", 2}, {"char", 1}, {"uchar", 1}, {"bool", 1}};
  auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n");
  const size_t b = s.find_last_not_of(" \t\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// "__global const float* restrict" -> ("float", false).
void castType(const std::string& cast, std::string* type, bool* constant) {
  *constant = false;
  type->clear();
  size_t pos = 0;
  while (pos < cast.size()) {
    const size_t start = cast.find_first_not_of(" *", pos);
    if (start == std::string::npos) break;
    const size_t end = std::min(cast.find_first_of(" *", start), cast.size());
    const std::string word = cast.substr(start, end - start);
    if (word == "const") *constant = true;
    else if (word != "__global" && word != "global" && word != "restrict" && word != "volatile") *type = word;
    pos = end;
  }
}

// Every kernel of the program: its parameters, one per tensor argument. The plan builder writes
// each buffer parameter as two, "__global uchar* fbl_pK, ulong fbl_oK", with image parameters in
// their places, and casts each (pool + offset) to a typed pointer in the kernel's first lines.
std::map<std::string, std::vector<Param>> kernelParams(const std::string& program) {
  std::map<std::string, std::vector<Param>> out;
  std::vector<size_t> starts;
  for (size_t line = 0; line < program.size();) {
    const size_t next = program.find('\n', line);
    const size_t end = next == std::string::npos ? program.size() : next;
    const size_t first = program.find_first_not_of(" \t", line);
    if (first < end && (program.compare(first, 13, "__kernel void") == 0 || program.compare(first, 11, "kernel void") == 0))
      starts.push_back(first);
    line = end + 1;
  }
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t open = program.find('(', starts[k]);
    const size_t close = open == std::string::npos ? open : program.find(')', open);
    if (close == std::string::npos) continue;
    size_t nameEnd = open;
    while (nameEnd > starts[k] && program[nameEnd - 1] == ' ') --nameEnd;
    size_t nameStart = nameEnd;
    while (nameStart > starts[k] && (std::isalnum(static_cast<unsigned char>(program[nameStart - 1])) || program[nameStart - 1] == '_'))
      --nameStart;
    const std::string name = program.substr(nameStart, nameEnd - nameStart);
    const size_t bodyEnd = k + 1 < starts.size() ? starts[k + 1] : program.size();
    const std::string body = program.substr(close, bodyEnd - close);
    std::vector<Param> params;
    std::vector<std::string> texts;
    for (size_t pos = open + 1; pos <= close;) {
      size_t comma = program.find(',', pos);
      if (comma == std::string::npos || comma > close) comma = close;
      texts.push_back(trim(program.substr(pos, comma - pos)));
      pos = comma + 1;
    }
    if (texts.size() == 1 && texts[0].empty()) texts.clear();
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string& text = texts[i];
      Param p;
      if (text.find("image2d_t") != std::string::npos) {
        p.image = true;
        p.written = text.find("write_only") != std::string::npos;
      } else {
        // A buffer parameter is two: its pool, then its offset, used as (pool + offset).
        const size_t at = text.rfind(' ');
        const std::string pool = at == std::string::npos ? text : text.substr(at + 1);
        std::string offset;
        if (i + 1 < texts.size()) {
          const size_t o = texts[i + 1].rfind(' ');
          offset = o == std::string::npos ? texts[i + 1] : texts[i + 1].substr(o + 1);
          ++i;
        }
        const size_t use = body.find("(" + pool + " + " + offset + ")");
        const size_t castOpen = use == std::string::npos || use == 0 ? std::string::npos : body.rfind('(', use - 1);
        if (castOpen != std::string::npos) {
          std::string type;
          bool constant = false;
          castType(body.substr(castOpen + 1, use - castOpen - 2), &type, &constant);
          p.elementSize = scalarSize(type);
          p.written = !constant;
        }
      }
      params.push_back(p);
    }
    out[name] = std::move(params);
  }
  return out;
}

// An R-Tile buffer ("rtile 16x64 ...") holds whole tiles of its last two dimensions, in either
// orientation ("rows-along-x" swaps them): its bytes are one of the two paddings. Other layouts
// pass.
bool rtileBytesMatch(const Tensor& t) {
  int64_t a = 0, b = 0;
  if (std::sscanf(t.layout.c_str(), "rtile %" SCNd64 "x%" SCNd64, &a, &b) != 2 || a < 1 || b < 1) return t.layout.rfind("rtile", 0) != 0;
  const size_t rank = t.shape.size();
  const int64_t rows = rank >= 2 ? t.shape[rank - 2] : 1, cols = rank >= 1 ? t.shape[rank - 1] : 1;
  int64_t outer = planfile::elementSize(t.dtype);
  for (size_t d = 0; d + 2 < rank; ++d) outer *= t.shape[d];
  auto up = [](int64_t x, int64_t tile) { return (x + tile - 1) / tile * tile; };
  return t.bytes == outer * up(rows, a) * up(cols, b) || t.bytes == outer * up(rows, b) * up(cols, a);
}

// A frozen weight stored narrower (Tensor::encoding): an f32 matrix in a buffer, its groups
// dividing their axis, its bytes exactly the encoded layout's.
Status checkEncoded(const Plan& p, const Tensor& t, const std::string& who, bool packed) {
  const int bits = planfile::encodingBits(t.encoding);
  if (bits == 0) return Error{who + ": encoding '" + t.encoding + "' is not fp16, int8 or int4"};
  if (t.role != Role::Weight || t.image() || packed || t.dtype != "f32" || t.shape.size() != 2 || t.shape[0] < 1 ||
      t.shape[1] < 1)
    return Error{who + ": only a frozen f32 matrix in a buffer is stored " + t.encoding + " (is a " + planfile::roleName(t.role) +
                 " " + t.dtype + shapeText(t.shape) + ", " + t.storage + ")"};
  if (bits == 16 ? t.groupSize != 0 : t.groupSize < 1 || t.shape[t.groupAxis] % t.groupSize != 0)
    return Error{who + ": group " + num(t.groupSize) + " along axis " + num(t.groupAxis) + " does not fit " + t.encoding +
                 shapeText(t.shape)};
  const int64_t want = planfile::encodedBytes(bits, t.groupSize, t.shape[0], t.shape[1]);
  if (t.bytes != want) return Error{who + ": bytes " + num(t.bytes) + " are not its " + t.encoding + " encoding's " + num(want)};
  if (t.offset % p.alignment != 0)
    return Error{who + ": offset " + num(t.offset) + " is not a multiple of the alignment " + num(p.alignment)};
  return Status::success();
}

Status checkTensors(const Plan& p) {
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < p.tensors.size(); ++i)
    if (!names.emplace(p.tensors[i].name, i).second) return Error{tensorName(p, static_cast<int32_t>(i)) + ": the name is used twice (tensors " + num(static_cast<int64_t>(names[p.tensors[i].name])) + " and " + num(static_cast<int64_t>(i)) + ")"};
  if (p.alignment < 1 || p.alignment > (1 << 20) || (p.alignment & (p.alignment - 1)) != 0)
    return Error{"alignment " + num(p.alignment) + " is not a power of two up to 1 MiB"};
  if (p.arenaBytes < 0 || p.arenaBytes > kMaxBytes) return Error{"arena_bytes " + num(p.arenaBytes) + " is out of range"};
  if (p.poolBytes % p.alignment != 0)
    return Error{"pool_bytes " + num(p.poolBytes) + " is not a multiple of the alignment " + num(p.alignment)};
  if (p.poolCount() > kMaxPools)
    return Error{"arena_bytes " + num(p.arenaBytes) + " in pools of " + num(p.poolBytes) + " makes " + num(p.poolCount()) +
                 " pools, more than " + num(kMaxPools)};
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const Tensor& t = p.tensors[i];
    const std::string who = tensorName(p, static_cast<int32_t>(i));
    if (!knownDType(t.dtype)) return Error{who + ": dtype '" + t.dtype + "' is not one the runtime knows"};
    const int64_t logical = checkedLogicalBytes(t);
    if (logical < 0) return Error{who + ": shape " + shapeText(t.shape) + " has a negative or too large dimension"};
    const bool packed = t.pack >= 0 || t.unpack >= 0;
    if (!t.encoding.empty()) {
      FBL_TRY(checkEncoded(p, t, who, packed));
    } else if (t.image()) {
      if (t.offset != 0 || t.bytes != 0) return Error{who + ": an image tensor has offset and bytes 0, not " + num(t.offset) + " and " + num(t.bytes)};
      if (t.imageWidth <= 0 || t.imageHeight <= 0 || t.imageWidth > kMaxImageSide || t.imageHeight > kMaxImageSide)
        return Error{who + ": image extent " + num(t.imageWidth) + " x " + num(t.imageHeight) + " is out of range"};
      if (t.imageWidth * t.imageHeight * 16 < logical)
        return Error{who + ": image of " + num(t.imageWidth) + " x " + num(t.imageHeight) + " texels cannot hold its " + num(logical) + " bytes"};
    } else {
      if (t.bytes > 0 && t.offset % p.alignment != 0)
        return Error{who + ": offset " + num(t.offset) + " is not a multiple of the alignment " + num(p.alignment)};
      if (!packed && t.layout == "row_major" && t.bytes != logical)
        return Error{who + ": bytes " + num(t.bytes) + " are not its " + t.dtype + shapeText(t.shape) + "'s " + num(logical)};
      if (t.bytes < logical)
        return Error{who + ": bytes " + num(t.bytes) + " cannot hold its " + t.dtype + shapeText(t.shape) + " (" + num(logical) + ")"};
      if (!rtileBytesMatch(t))
        return Error{who + ": bytes " + num(t.bytes) + " are not whole tiles of its layout '" + t.layout + "' over " + t.dtype + shapeText(t.shape)};
    }
    if (t.constOffset >= 0 && t.constOffset % 16 != 0)
      return Error{who + ": const_offset " + num(t.constOffset) + " is not 16-byte aligned (the blob aligns every constant)"};
    if ((t.role == Role::Constant) != (t.constOffset >= 0) && !(t.role == Role::Constant && t.bytes == 0))
      return Error{who + ": const_offset " + num(t.constOffset) + " does not fit its role " + planfile::roleName(t.role)};
    if ((t.role == Role::Weight || t.role == Role::Trainable) && t.source.empty())
      return Error{who + ": a " + std::string(planfile::roleName(t.role)) + " has no source key"};
    // The runtime zeroes a counter's bytes at load: they must be i32 counts in the arena.
    if (t.role == Role::Counter && (t.image() || t.dtype != "i32" || t.pack >= 0 || t.unpack >= 0))
      return Error{who + ": a counter must be an i32 buffer the runtime fills itself"};
    const auto self = static_cast<int32_t>(i);
    if (t.pack >= 0) {
      const Launch& x = p.transfers[t.pack];
      if (x.phase != "pack" || x.args != std::vector<int32_t>{p.staging, self, p.transferFirstRow})
        return Error{who + ": pack " + num(t.pack) + " is not a pack transfer from the staging tensor into it"};
    }
    if (t.unpack >= 0) {
      const Launch& x = p.transfers[t.unpack];
      if (x.phase != "unpack" || x.args != std::vector<int32_t>{self, p.staging, p.transferFirstRow})
        return Error{who + ": unpack " + num(t.unpack) + " is not an unpack transfer from it into the staging tensor"};
    }
    if (packed) {
      // A chunk is transferRows whole rows of the tensor viewed as a matrix of its last dimension.
      const int64_t rows = planfile::transferRows(t.shape);
      if (t.transferRows < 1 || t.transferRows > std::max<int64_t>(1, rows))
        return Error{who + ": transfer_rows " + num(t.transferRows) + " is outside [1, " + num(rows) + "]"};
      const int64_t chunkBytes = t.transferRows * planfile::transferRowBytes(t.shape, t.dtype);
      if (p.tensors[p.staging].bytes < chunkBytes)
        return Error{who + ": the staging tensor's " + num(p.tensors[p.staging].bytes) + " bytes cannot hold its chunk of " + num(chunkBytes)};
    }
  }
  return Status::success();
}

Status checkRuntimeTensors(const Plan& p) {
  if (p.staging >= 0) {
    const Tensor& s = p.tensors[p.staging];
    if (s.image() || s.pack >= 0 || s.unpack >= 0 || persistent(s.role))
      return Error{tensorName(p, p.staging) + ": the staging tensor must be a transient row-major buffer"};
  }
  if (p.transferFirstRow >= 0) {
    const Tensor& r = p.tensors[p.transferFirstRow];
    if (r.image() || r.pack >= 0 || r.unpack >= 0 || persistent(r.role) || r.dtype != "i64" || r.bytes < 8)
      return Error{tensorName(p, p.transferFirstRow) + ": the transfer's first row must be a transient i64 buffer"};
  }
  if (p.loss >= 0) {
    const Tensor& l = p.tensors[p.loss];
    if (l.image() || l.dtype != "f32" || l.bytes < 4 || l.unpack >= 0)
      return Error{tensorName(p, p.loss) + ": the loss must be an f32 buffer of at least one element (is " + l.dtype + shapeText(l.shape) + ", " + l.storage + ")"};
  }
  if (p.step >= 0) {
    const Tensor& s = p.tensors[p.step];
    if (s.image() || s.dtype != "i64" || planfile::logicalBytes(s) != 8 || s.pack >= 0 || s.role != Role::Step)
      return Error{tensorName(p, p.step) + ": the step must be one i64 in a buffer with role step (is " + s.dtype + shapeText(s.shape) + ", role " + planfile::roleName(s.role) + ")"};
  }
  for (int32_t i : p.inputs)
    if (p.tensors[i].role != Role::Input || (p.tensors[i].image() && p.tensors[i].pack < 0))
      return Error{tensorName(p, i) + ": an input must have role input and be writable (role " + planfile::roleName(p.tensors[i].role) + ")"};
  for (const planfile::InputCheck& c : p.inputChecks) {
    if (c.lo >= c.hi && !(c.lo == c.hi && c.hasIgnore))
      return Error{"input check of node '" + c.node + "': bounds [" + num(c.lo) + ", " + num(c.hi) + ") are empty"};
    if (!checkedIntegerType(p.tensors[c.input].dtype))
      return Error{"input check of node '" + c.node + "': " + tensorName(p, c.input) + " is " + p.tensors[c.input].dtype +
                   ", not an integer input (i64, i32, i8, u8)"};
  }
  for (const planfile::Trainable& tr : p.trainables) {
    const Tensor& param = p.tensors[tr.param];
    if (param.role != Role::Trainable) return Error{tensorName(p, tr.param) + ": a trainable's param has role " + planfile::roleName(param.role)};
    if (tr.grad < 0) return Error{tensorName(p, tr.param) + ": the trainable has no gradient"};
    const Tensor& grad = p.tensors[tr.grad];
    if (grad.dtype != param.dtype || grad.shape != param.shape)
      return Error{tensorName(p, tr.grad) + ": the gradient is " + grad.dtype + shapeText(grad.shape) + " but its trainable is " + param.dtype + shapeText(param.shape)};
  }
  for (int32_t s : p.state)
    if (p.tensors[s].role != Role::State) return Error{tensorName(p, s) + ": an optimizer state has role " + planfile::roleName(p.tensors[s].role)};
  // An updated buffer is state the weights file starts: it, and only it, has a source.
  for (int32_t b : p.updatedBuffers)
    if (std::find(p.state.begin(), p.state.end(), b) == p.state.end() || p.tensors[b].source.empty())
      return Error{tensorName(p, b) + ": an updated buffer must be listed state with a source key"};
  for (int32_t s : p.state)
    if (!p.tensors[s].source.empty() && std::find(p.updatedBuffers.begin(), p.updatedBuffers.end(), s) == p.updatedBuffers.end())
      return Error{tensorName(p, s) + ": a state tensor with a source key must be an updated buffer"};
  // Checkpoints save what `trainables` and `state` list: each tensor of those roles once.
  std::vector<int> listed(p.tensors.size(), 0);
  for (const planfile::Trainable& tr : p.trainables) ++listed[tr.param];
  for (int32_t s : p.state) ++listed[s];
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    const Role r = p.tensors[t].role;
    if ((r == Role::Trainable || r == Role::State) && listed[t] != 1)
      return Error{tensorName(p, static_cast<int32_t>(t)) + ": a " + planfile::roleName(r) + " is listed " + num(listed[t]) + " times in " +
                   (r == Role::Trainable ? "trainables" : "state") + " (once is right)"};
  }
  for (const auto& c : p.commits) {
    const Tensor& src = p.tensors[c[0]];
    const Tensor& dst = p.tensors[c[1]];
    if (src.bytes < dst.bytes || (dst.role != Role::Trainable && dst.role != Role::State))
      return Error{"commit " + tensorName(p, c[0]) + " -> " + tensorName(p, c[1]) + ": bytes " + num(src.bytes) + " -> " + num(dst.bytes) +
                   " into role " + planfile::roleName(dst.role)};
  }
  return Status::success();
}

// training_loop (runtime/training_loop.h): the scalars the runtime writes are f32 scalars of role
// step, and the accumulators are listed state; a field that is off has no tensor.
Status checkTrainingLoop(const Plan& p) {
  const planfile::TrainingLoop& l = p.loop;
  const auto n = static_cast<int32_t>(p.tensors.size());
  auto scalar = [&](int32_t t, const char* what) -> Status {
    if (t < 0 || t >= n) return Error{std::string("training_loop: ") + what + " " + num(t) + " is not a tensor"};
    const Tensor& s = p.tensors[t];
    if (s.image() || s.dtype != "f32" || planfile::logicalBytes(s) != 4 || s.pack >= 0 || s.role != Role::Step)
      return Error{tensorName(p, t) + ": training_loop's " + what + " must be one f32 in a buffer with role step (is " + s.dtype +
                   shapeText(s.shape) + ", role " + planfile::roleName(s.role) + ")"};
    return Status::success();
  };
  if (l.gradAccum < 1 || l.gradAccum > (1 << 20)) return Error{"training_loop: grad_accum " + num(l.gradAccum) + " is not in [1, 2^20]"};
  if (!std::isfinite(l.clipGradNorm) || l.clipGradNorm < 0)
    return Error{"training_loop: clip_grad_norm " + std::to_string(l.clipGradNorm) + " is not a number >= 0"};
  if (l.schedule.empty() != (l.lrTensor < 0)) return Error{"training_loop: a schedule needs an lr_tensor, and only a schedule has one"};
  if (!l.schedule.empty()) {
    if (!planfile::knownSchedule(l.schedule)) return Error{"training_loop: unknown schedule '" + l.schedule + "' (constant, linear or cosine)"};
    if (!std::isfinite(l.lr) || l.lr <= 0) return Error{"training_loop: lr " + std::to_string(l.lr) + " is not a positive number"};
    if (l.warmupSteps < 0 || l.totalSteps < 0 || (l.schedule != "constant" && l.totalSteps < 1))
      return Error{"training_loop: warmup_steps " + num(l.warmupSteps) + " and total_steps " + num(l.totalSteps) + " do not make a schedule"};
    FBL_TRY(scalar(l.lrTensor, "lr_tensor"));
  }
  if ((l.gradAccum > 1) != (l.accumKeep >= 0) || (l.gradAccum > 1) == l.accumulators.empty())
    return Error{"training_loop: grad_accum " + num(l.gradAccum) + " needs accum_keep and accumulators, and grad_accum 1 has neither"};
  if (l.gradAccum > 1)
    FBL_TRY(scalar(l.accumKeep, "accum_keep"));
  for (int32_t a : l.accumulators)
    if (std::find(p.state.begin(), p.state.end(), a) == p.state.end())
      return Error{"training_loop: accumulator " + num(a) + " is not one of the plan's state tensors"};
  return Status::success();
}

int phaseOrder(const std::string& phase) {
  if (phase == "forward") return 0;
  if (phase == "backward") return 1;
  if (phase == "optimizer") return 2;
  return -1;
}

Status checkLaunch(const Plan& p, size_t index, bool transfer,
                   const std::map<std::string, std::vector<Param>>& kernels) {
  const Launch& l = transfer ? p.transfers[index] : p.launches[index];
  const std::string who = launchName(p, index, transfer);
  if (l.argBytes.size() != l.args.size())
    return Error{who + ": arg_bytes has " + num(static_cast<int64_t>(l.argBytes.size())) + " entries for " + num(static_cast<int64_t>(l.args.size())) + " args"};
  for (size_t a = 0; a < l.args.size(); ++a)
    if (l.argBytes[a] != planfile::argumentBytes(p.tensors[l.args[a]]))
      return Error{who + ": argument " + num(static_cast<int64_t>(a)) + " declares " + num(l.argBytes[a]) + " bytes but " + tensorName(p, l.args[a]) + " has " +
                   num(planfile::argumentBytes(p.tensors[l.args[a]]))};
  auto k = kernels.find(p.kernelNames[l.kernel]);
  if (k == kernels.end()) return Error{who + ": kernel '" + p.kernelNames[l.kernel] + "' is not defined in the program"};
  const std::vector<Param>& params = k->second;
  if (params.size() != l.args.size())
    return Error{who + ": args has " + num(static_cast<int64_t>(l.args.size())) + " tensors but the kernel takes " + num(static_cast<int64_t>(params.size()))};
  for (size_t a = 0; a < l.args.size(); ++a) {
    const Tensor& t = p.tensors[l.args[a]];
    const std::string arg = "argument " + num(static_cast<int64_t>(a)) + " (" + tensorName(p, l.args[a]) + ")";
    if (params[a].image != t.image())
      return Error{who + ": " + arg + " is " + (t.image() ? "an image" : "a buffer") + " but the kernel's parameter is " + (params[a].image ? "an image" : "a buffer")};
    // The staging tensor holds raw bytes (u8) of whatever it carries, an encoded weight its
    // encoding's bytes.
    const int64_t element = t.encoding.empty() ? planfile::elementSize(t.dtype) : 1;
    if (params[a].elementSize > 0 && !t.image() && l.args[a] != p.staging && params[a].elementSize != element)
      return Error{who + ": " + arg + " is " + t.dtype + " but the kernel reads elements of " + num(params[a].elementSize) + " bytes"};
    if (!transfer && params[a].written && (t.role == Role::Weight || t.role == Role::Constant || t.role == Role::Input))
      return Error{who + ": " + arg + " has role " + planfile::roleName(t.role) + ", which no step may write"};
    // Only the optimizer phase updates what survives a step: a cancelled or NaN step stops
    // before it, so nothing is half-applied.
    if (!transfer && params[a].written && l.phase != "optimizer" && (t.role == Role::Trainable || t.role == Role::State || t.role == Role::Step))
      return Error{who + ": " + arg + " has role " + planfile::roleName(t.role) + ", which only the optimizer phase may write"};
  }
  const planfile::KernelWork& work = p.kernelWork[l.kernel];
  if (l.global != work.global || l.local != work.local)
    return Error{who + ": work size global " + shapeText(l.global) + " local " + shapeText(l.local) + " is not its kernel's (kernel_work: global " +
                 shapeText(work.global) + " local " + shapeText(work.local) + ")"};
  if (l.global.empty() || l.global.size() > 3) return Error{who + ": global has " + num(static_cast<int64_t>(l.global.size())) + " dimensions (1 to 3)"};
  if (!l.local.empty() && l.local.size() != l.global.size())
    return Error{who + ": local " + shapeText(l.local) + " and global " + shapeText(l.global) + " differ in rank"};
  uint64_t items = 1;
  for (size_t d = 0; d < l.global.size(); ++d) {
    const std::string at = "[" + num(static_cast<int64_t>(d)) + "]";
    if (l.global[d] < 1 || static_cast<uint64_t>(l.global[d]) >= kMaxWorkItems)
      return Error{who + ": global" + at + " " + num(l.global[d]) + " is outside [1, 2^32)"};
    items *= static_cast<uint64_t>(l.global[d]);
    if (items > kMaxWorkItems) return Error{who + ": global " + shapeText(l.global) + " has more than 2^32 work-items"};
    if (!l.local.empty() && (l.local[d] < 1 || l.local[d] > l.global[d] || l.global[d] % l.local[d] != 0))
      return Error{who + ": global" + at + " " + num(l.global[d]) + " is not a multiple of local" + at + " " + num(l.local[d])};
  }
  return Status::success();
}

// Each launch gives every kernel parameter at least the bytes the kernel declares it needs
// (kernel_work's arg_bytes: the fewest any of its launches gives it). This ties a launch's kernel
// to the sizes it was generated for: a launch switched to a kernel that touches more is refused.
Status checkKernelSizes(const Plan& p) {
  for (const bool transfer : {false, true}) {
    const auto& list = transfer ? p.transfers : p.launches;
    for (size_t i = 0; i < list.size(); ++i) {
      const Launch& l = list[i];
      const std::vector<int64_t>& needs = p.kernelWork[l.kernel].argBytes;
      if (needs.size() != l.args.size())
        return Error{launchName(p, i, transfer) + ": kernel_work declares " + num(static_cast<int64_t>(needs.size())) + " parameters for " +
                     num(static_cast<int64_t>(l.args.size())) + " args"};
      for (size_t a = 0; a < l.args.size(); ++a)
        if (l.argBytes[a] < needs[a])
          return Error{launchName(p, i, transfer) + ": argument " + num(static_cast<int64_t>(a)) + " (" + tensorName(p, l.args[a]) + ") has " +
                       num(l.argBytes[a]) + " bytes, fewer than the kernel's " + num(needs[a]) + " (kernel_work arg_bytes)"};
    }
  }
  return Status::success();
}

// A transient tensor's first launch writes it: no kernel reads arena bytes a step never wrote
// (they would hold whatever the last step, or an earlier allocation, left there). A parameter
// whose cast was not found counts as written.
Status checkWrittenBeforeRead(const Plan& p, const std::map<std::string, std::vector<Param>>& kernels) {
  std::vector<bool> written(p.tensors.size(), false);
  for (size_t i = 0; i < p.launches.size(); ++i) {
    const Launch& l = p.launches[i];
    const std::vector<Param>& params = kernels.at(p.kernelNames[l.kernel]);
    for (size_t a = 0; a < l.args.size(); ++a) {
      const Tensor& t = p.tensors[l.args[a]];
      const bool writes = params[a].written || (!params[a].image && params[a].elementSize == 0);
      if (writes) continue;
      if ((t.role == Role::Intermediate || t.role == Role::Scratch) && l.args[a] != p.staging && !written[l.args[a]]) {
        bool writtenHere = false;  // an argument the same launch also writes through another parameter
        for (size_t b = 0; b < l.args.size(); ++b)
          writtenHere = writtenHere || (l.args[b] == l.args[a] && (params[b].written || (!params[b].image && params[b].elementSize == 0)));
        if (!writtenHere)
          return Error{launchName(p, i, false) + ": argument " + num(static_cast<int64_t>(a)) + " (" + tensorName(p, l.args[a]) + ", role " +
                       planfile::roleName(t.role) + ") is read before any launch writes it"};
      }
    }
    for (size_t a = 0; a < l.args.size(); ++a)
      if (params[a].written || (!params[a].image && params[a].elementSize == 0)) written[l.args[a]] = true;
  }
  return Status::success();
}

Status checkLaunches(const Plan& p) {
  std::map<std::string, size_t> names;
  for (size_t k = 0; k < p.kernelNames.size(); ++k)
    if (!names.emplace(p.kernelNames[k], k).second)
      return Error{"kernels[" + num(static_cast<int64_t>(k)) + "] '" + p.kernelNames[k] + "' is listed twice"};
  const auto kernels = kernelParams(p.program);
  int previous = 0;
  for (size_t i = 0; i < p.launches.size(); ++i) {
    const std::string& phase = p.launches[i].phase;
    const int order = phaseOrder(phase);
    if (order < 0) return Error{launchName(p, i, false) + ": phase '" + phase + "' is not forward, backward or optimizer"};
    if (order < previous) return Error{launchName(p, i, false) + ": phase '" + phase + "' comes after a later phase's launch"};
    previous = order;
    FBL_TRY(checkLaunch(p, i, false, kernels));
  }
  for (size_t i = 0; i < p.transfers.size(); ++i) {
    const std::string& phase = p.transfers[i].phase;
    if (phase != "pack" && phase != "unpack") return Error{launchName(p, i, true) + ": a transfer's phase '" + phase + "' is not pack or unpack"};
    FBL_TRY(checkLaunch(p, i, true, kernels));
  }
  FBL_TRY(checkKernelSizes(p));
  return checkWrittenBeforeRead(p, kernels);
}

// 5. Lifetimes in launch indices; persistent tensors span [0, end], kept ones end at `end`,
// the staging and first-row tensors live at `end` (between steps).
Status checkOverlaps(const Plan& p) {
  const auto n = static_cast<int32_t>(p.tensors.size());
  const auto end = static_cast<int64_t>(p.launches.size());
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t i = 0; i < p.launches.size(); ++i)
    for (int32_t a : p.launches[i].args) {
      if (first[a] < 0) first[a] = static_cast<int64_t>(i);
      last[a] = static_cast<int64_t>(i);
    }
  auto keep = [&](int32_t t) {
    if (t < 0) return;
    if (first[t] < 0) first[t] = end;
    last[t] = end;
  };
  for (int32_t t = 0; t < n; ++t)
    if (persistent(p.tensors[t].role)) {
      first[t] = 0;
      last[t] = end;
    }
  keep(p.loss);
  for (const planfile::Trainable& tr : p.trainables) keep(tr.grad);
  for (const auto& c : p.commits) keep(c[0]);
  for (int32_t t : {p.staging, p.transferFirstRow}) {
    keep(t);
    if (t >= 0) first[t] = end;
  }
  std::vector<int32_t> live;
  for (int32_t t = 0; t < n; ++t)
    if (!p.tensors[t].image() && p.tensors[t].bytes > 0 && first[t] >= 0) live.push_back(t);
  std::sort(live.begin(), live.end(), [&](int32_t a, int32_t b) { return p.tensors[a].offset < p.tensors[b].offset; });
  for (size_t i = 0; i < live.size(); ++i) {
    const Tensor& a = p.tensors[live[i]];
    for (size_t j = i + 1; j < live.size() && p.tensors[live[j]].offset < a.offset + a.bytes; ++j) {
      const int32_t b = live[j];
      if (first[live[i]] <= last[b] && first[b] <= last[live[i]])
        return Error{tensorName(p, b) + ": offset " + num(p.tensors[b].offset) + " overlaps " + tensorName(p, live[i]) + " (@" + num(a.offset) + "+" +
                     num(a.bytes) + ") while both are live (launches " + num(std::max(first[b], first[live[i]])) + " to " +
                     num(std::min(last[b], last[live[i]])) + ")"};
    }
  }
  return Status::success();
}

}  // namespace

std::string launchName(const Plan& p, size_t index, bool transfer) {
  const Launch& l = transfer ? p.transfers[index] : p.launches[index];
  const bool named = l.kernel >= 0 && l.kernel < static_cast<int32_t>(p.kernelNames.size());
  return std::string(transfer ? "transfer " : "launch ") + num(static_cast<int64_t>(index)) + " (" + (named ? p.kernelNames[l.kernel] : "?") + ", node '" + l.node + "')";
}

Status checkPlan(const Plan& p) {
  FBL_TRY(checkTensors(p));
  FBL_TRY(checkRuntimeTensors(p));
  FBL_TRY(checkTrainingLoop(p));
  FBL_TRY(checkLaunches(p));
  return checkOverlaps(p);
}

Status checkLaunchGeometry(const Plan& p, const DeviceLimits& limits) {
  for (const bool transfer : {false, true})
    for (size_t i = 0; i < (transfer ? p.transfers : p.launches).size(); ++i) {
      const Launch& l = transfer ? p.transfers[i] : p.launches[i];
      const std::string who = launchName(p, i, transfer);
      if (l.global.size() > limits.maxDims)
        return Error{who + ": global has " + num(static_cast<int64_t>(l.global.size())) + " dimensions, the device " + num(limits.maxDims)};
      for (size_t d = 0; d < l.global.size(); ++d)
        if (limits.addressBits < 64 && static_cast<uint64_t>(l.global[d]) >> limits.addressBits != 0)
          return Error{who + ": global" + shapeText(l.global) + " exceeds the device's " + num(limits.addressBits) + "-bit sizes"};
      if (l.local.empty()) continue;
      uint64_t group = 1;
      for (size_t d = 0; d < l.local.size(); ++d) {
        if (static_cast<uint64_t>(l.local[d]) > limits.maxItemSizes[d])
          return Error{who + ": local[" + num(static_cast<int64_t>(d)) + "] " + num(l.local[d]) + " exceeds the device's " +
                       num(static_cast<int64_t>(limits.maxItemSizes[d]))};
        group *= static_cast<uint64_t>(l.local[d]);
      }
      if (group > limits.maxGroupSize)
        return Error{who + ": local " + shapeText(l.local) + " is a work-group of " + num(static_cast<int64_t>(group)) + " work-items, the device allows " +
                     num(static_cast<int64_t>(limits.maxGroupSize))};
    }
  return Status::success();
}

Result<Plan> loadPlan(const std::string& bytes, const std::string& path, const DeviceLimits* limits) {
  const std::string where = "plan '" + path + "': ";
  Result<Plan> plan = planfile::parse(bytes);
  if (!plan.ok()) return Error{where + plan.error().message};
  if (Status e = checkPlan(*plan); !e.ok()) return Error{where + e.error().message};
  if (limits)
    if (Status e = checkLaunchGeometry(*plan, *limits); !e.ok()) return Error{where + e.error().message};
  return plan;
}

Result<Plan> readPlanFile(const std::string& path, const DeviceLimits* limits) {
  FBL_ASSIGN(const std::string bytes, readWholeFile(path, "a plan file"));
  return loadPlan(bytes, path, limits);
}

}  // namespace fbl::rt
