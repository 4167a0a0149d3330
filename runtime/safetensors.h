// safetensors files (https://huggingface.co/docs/safetensors): base weights written by
// `fblc compile`, checkpoints and peft adapters written by the runtime. Header-only (C++17,
// standard library, nlohmann::json) so the compiler and the runtime share one implementation.
//
// Layout: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// optional "__metadata__" (string to string), then the raw bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
// reader (or a crash) sees the old file or the new one, never half of one.
inline std::string writeFileAtomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  std::FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (!fp) return "cannot write '" + tmp + "'";
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), fp) == bytes.size() &&
                  std::fflush(fp) == 0;
  if (std::fclose(fp) != 0 || !ok) {
    std::remove(tmp.c_str());
    return "cannot write '" + tmp + "' (disk full?)";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return "cannot rename '" + tmp + "' to '" + path + "'";
  return "";
}

inline std::string write(const std::string& path, const File& f) {
  return writeFileAtomic(path, serialize(f));
}

// Returns an empty string on success, else one line naming the file and the fault.
inline std::string read(const std::string& path, File* f) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open '" + path + "'";
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) return "'" + path + "' is not a safetensors file (too short)";
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8) return "'" + path + "' is not a safetensors file (bad header length)";
  nlohmann::json h = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n),
                                           nullptr, false);
  if (h.is_discarded() || !h.is_object()) return "'" + path + "' has a malformed safetensors header";
  const uint64_t base = 8 + n;
  try {
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") {
        for (auto m = it->begin(); m != it->end(); ++m) f->metadata[m.key()] = m->get<std::string>();
        continue;
      }
      Entry e;
      e.dtype = it->at("dtype").get<std::string>();
      e.shape = it->at("shape").get<std::vector<int64_t>>();
      const auto offs = it->at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || base + offs[1] > bytes.size())
        return "'" + path + "': tensor '" + it.key() + "' lies outside the file";
      e.data.assign(bytes.begin() + static_cast<int64_t>(base + offs[0]),
                    bytes.begin() + static_cast<int64_t>(base + offs[1]));
      f->tensors[it.key()] = std::move(e);
    }
  } catch (const nlohmann::json::exception& ex) {
    return "'" + path + "' has a malformed safetensors header: " + ex.what();
  }
  return "";
}

}  // namespace fbl::safetensors
