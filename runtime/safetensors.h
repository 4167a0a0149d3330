// safetensors files (https://huggingface.co/docs/safetensors): base weights written by
// `fblc compile`, checkpoints and peft adapters written by the runtime. Header-only (C++17,
// standard library, nlohmann::json) so the compiler and the runtime share one implementation.
//
// Layout: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// optional "__metadata__" (string to string), then the raw bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/files.h"
#include "runtime/fnv1a64.h"
#include "runtime/status.h"

namespace fbl::safetensors {

struct Entry {
  std::string dtype;  // safetensors spelling: "F32", "I64", "BOOL", ...
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;
};

struct File {
  std::map<std::string, Entry> tensors;
  std::map<std::string, std::string> metadata;
};

// fbl dtype names ("f32") <-> safetensors ("F32").
inline std::string fromFblDType(const std::string& d) {
  if (d == "f32") return "F32";
  if (d == "f16") return "F16";
  if (d == "bf16") return "BF16";
  if (d == "f64") return "F64";
  if (d == "i64") return "I64";
  if (d == "i32") return "I32";
  if (d == "i8") return "I8";
  if (d == "u8") return "U8";
  if (d == "bool") return "BOOL";
  return "";
}

inline std::string serialize(const File& f) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  for (const auto& [name, e] : f.tensors) {
    h[name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {off, off + e.data.size()}}};
    off += e.data.size();
  }
  if (!f.metadata.empty()) h["__metadata__"] = f.metadata;
  std::string js = h.dump();
  while (js.size() % 8 != 0) js.push_back(' ');  // the format recommends 8-byte alignment
  const uint64_t n = js.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  out += js;
  for (const auto& [name, e] : f.tensors) out.append(reinterpret_cast<const char*>(e.data.data()), e.data.size());
  return out;
}

// Writes atomically: a temporary file beside the target, flushed, then renamed over it, so a
// reader (or a crash) sees the old file or the new one, never half of one. `what` names the file
// when `path` is a directory.
inline Status writeFileAtomic(const std::string& path, const std::string& bytes, const char* what = "a file") {
  FBL_TRY(rt::directoryRefused(path, what));
  const std::string tmp = path + ".tmp";
  std::FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (!fp) return Error{"cannot write '" + tmp + "'"};
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), fp) == bytes.size() &&
                  std::fflush(fp) == 0;
  if (std::fclose(fp) != 0 || !ok) {
    std::remove(tmp.c_str());
    return Error{"cannot write '" + tmp + "' (disk full?)"};
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Error{"cannot rename '" + tmp + "' to '" + path + "'"};
  }
  return Status::success();
}

inline Status write(const std::string& path, const File& f, const char* what = "a safetensors file") {
  return writeFileAtomic(path, serialize(f), what);
}

// Bytes per element of a safetensors dtype; 0 for one this reader does not know.
inline int64_t elementBytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

// The format's own limit on the header (safetensors refuses a larger one too).
inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

// Parses a whole file's bytes, checking the header before trusting any of it: its length, that
// it is a JSON object, each tensor's dtype known, shape non-negative, data_offsets inside the
// data and of exactly dtype x shape bytes with no overflow, the tensors' byte ranges disjoint
// and together covering the data, metadata strings. `path` is for messages.
inline Result<File> parse(const std::string& bytes, const std::string& path) {
  File f;
  const std::string where = "'" + path + "'";
  if (bytes.size() < 8) return Error{where + " is not a safetensors file (too short)"};
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8 || n > kMaxHeaderBytes)
    return Error{where + " is not a safetensors file (header length " + std::to_string(n) + " exceeds the file's " +
                 std::to_string(bytes.size() - 8) + " bytes or 100 MiB)"};
  nlohmann::json h = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n),
                                           nullptr, false);
  if (h.is_discarded() || !h.is_object()) return Error{where + " has a malformed safetensors header (not a JSON object)"};
  const uint64_t base = 8 + n;
  const uint64_t dataBytes = bytes.size() - base;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  try {
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") {
        if (!it->is_object()) return Error{where + ": __metadata__ is not an object of strings"};
        for (auto m = it->begin(); m != it->end(); ++m) {
          if (!m->is_string()) return Error{where + ": metadata '" + m.key() + "' is not a string"};
          f.metadata[m.key()] = m->get<std::string>();
        }
        continue;
      }
      const std::string who = where + ": tensor '" + it.key() + "'";
      if (!it->is_object()) return Error{who + " is not an object"};
      Entry e;
      const auto& dtype = it->at("dtype");
      if (!dtype.is_string() || elementBytes(dtype.get<std::string>()) == 0) return Error{who + ": dtype " + dtype.dump() + " is unknown"};
      e.dtype = dtype.get<std::string>();
      uint64_t expected = static_cast<uint64_t>(elementBytes(e.dtype));
      const auto& shape = it->at("shape");
      if (!shape.is_array()) return Error{who + ": shape is not an array"};
      for (const auto& d : shape) {
        // Dimensions up to 2^40 and a product below 2^62: no product of them overflows.
        if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40))
          return Error{who + ": shape dimension " + d.dump() + " is not a non-negative integer below 2^40"};
        const uint64_t dim = d.get<uint64_t>();
        if (dim != 0 && expected > (uint64_t{1} << 62) / dim) return Error{who + ": shape " + shape.dump() + " is too large"};
        expected *= dim;
        e.shape.push_back(static_cast<int64_t>(dim));
      }
      const auto& offs = it->at("data_offsets");
      if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
        return Error{who + ": data_offsets " + offs.dump() + " is not two non-negative integers"};
      const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
      if (begin > end || end > dataBytes)
        return Error{who + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] lie outside the file's " +
                     std::to_string(dataBytes) + " data bytes"};
      if (end - begin != expected)
        return Error{who + ": data_offsets hold " + std::to_string(end - begin) + " bytes but " + e.dtype + shape.dump() + " needs " +
                     std::to_string(expected)};
      ranges.emplace_back(begin, end);
      e.data.assign(bytes.begin() + static_cast<int64_t>(base + begin), bytes.begin() + static_cast<int64_t>(base + end));
      f.tensors[it.key()] = std::move(e);
    }
  } catch (const nlohmann::json::exception& ex) {
    return Error{where + " has a malformed safetensors header: " + ex.what()};
  }
  // In offset order the tensors must tile the data: each starts where the last ended.
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < at) return Error{where + ": two tensors share the data bytes at offset " + std::to_string(begin)};
    if (begin > at) return Error{where + ": the data bytes [" + std::to_string(at) + ", " + std::to_string(begin) + ") belong to no tensor"};
    at = end;
  }
  if (at != dataBytes) return Error{where + ": the data bytes after offset " + std::to_string(at) + " belong to no tensor"};
  return f;
}

// The checksum fbl writes into its own files (base weights from `fblc compile`, checkpoints), so
// that a flipped bit in a tensor or in the metadata is refused rather than trained on. Metadata
// `fbl.checksum` = "fnv1a64:" + 16 lowercase hex digits of:
//   each tensor, in byte order of the names: FNV-1a 64 of its name, a 0 byte, its dtype, a 0 byte,
//   its rank and each dimension as u64 little-endian, and its data bytes (the tensor's digest);
//   then FNV-1a 64, from the offset basis, over every tensor's digest as u64 little-endian in that
//   order, followed by every metadata key but fbl.checksum in byte order: key, 0 byte, value, 0 byte.
// Each byte is hashed once; a file without the key (older, or not written by fbl) is not checked.
inline constexpr const char* kChecksumKey = "fbl.checksum";

// u64 little-endian on any host.
inline uint64_t fnv1a64U64(uint64_t v, uint64_t h) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  return fnv1a64(b, 8, h);
}

inline uint64_t tensorDigest(const std::string& name, const Entry& e) {
  const unsigned char zero = 0;
  uint64_t h = fnv1a64(name.data(), name.size());
  h = fnv1a64(&zero, 1, h);
  h = fnv1a64(e.dtype.data(), e.dtype.size(), h);
  h = fnv1a64(&zero, 1, h);
  h = fnv1a64U64(e.shape.size(), h);
  for (int64_t d : e.shape) h = fnv1a64U64(static_cast<uint64_t>(d), h);
  return fnv1a64(e.data.data(), e.data.size(), h);
}

// Every tensor's digest, by name.
inline std::map<std::string, uint64_t> tensorDigests(const File& f) {
  std::map<std::string, uint64_t> out;
  for (const auto& [name, e] : f.tensors) out[name] = tensorDigest(name, e);
  return out;
}

// FNV-1a 64 over the digests of `names` (each present in `digests`), in the order given.
template <typename Names>
uint64_t digestOf(const std::map<std::string, uint64_t>& digests, const Names& names) {
  uint64_t h = kFnv1a64Basis;
  for (const std::string& n : names) h = fnv1a64U64(digests.at(n), h);
  return h;
}

inline std::string digestText(uint64_t h) {
  static const char* hex = "0123456789abcdef";
  std::string out = "fnv1a64:";
  for (int i = 15; i >= 0; --i) out += hex[(h >> (4 * i)) & 15];
  return out;
}

inline std::string fileChecksum(const File& f, const std::map<std::string, uint64_t>& digests) {
  uint64_t h = kFnv1a64Basis;
  for (const auto& [name, d] : digests) h = fnv1a64U64(d, h);
  const unsigned char zero = 0;
  for (const auto& [k, v] : f.metadata) {
    if (k == kChecksumKey) continue;
    h = fnv1a64(&zero, 1, fnv1a64(k.data(), k.size(), h));
    h = fnv1a64(&zero, 1, fnv1a64(v.data(), v.size(), h));
  }
  return digestText(h);
}

// Sets the file's fbl.checksum (after every other metadata key is set).
inline void addChecksum(File* f) { f->metadata[kChecksumKey] = fileChecksum(*f, tensorDigests(*f)); }

// Success when the file has no fbl.checksum or matches it; else one line naming the file. `digests`:
// tensorDigests(f), computed by the caller when it needs them too.
inline Status verifyChecksum(const File& f, const std::string& path, const std::map<std::string, uint64_t>& digests) {
  auto it = f.metadata.find(kChecksumKey);
  if (it == f.metadata.end()) return Status::success();
  const std::string& want = it->second;
  if (want.size() != 24 || want.compare(0, 8, "fnv1a64:") != 0 ||
      want.find_first_not_of("0123456789abcdef", 8) != std::string::npos)
    return Error{"'" + path + "': metadata fbl.checksum '" + want + "' is not fnv1a64: and 16 hex digits"};
  if (fileChecksum(f, digests) != want)
    return Error{"'" + path + "' is corrupted: its tensors or metadata do not match its checksum (metadata fbl.checksum); "
                 "write or copy it again"};
  return Status::success();
}

// The file, else one line naming the file and the fault.
inline Result<File> read(const std::string& path, const char* what = "a safetensors file") {
  FBL_ASSIGN(const std::string bytes, rt::readWholeFile(path, what));
  return parse(bytes, path);
}

}  // namespace fbl::safetensors
