#include "runtime/tools/tensor_proto_io.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "runtime/safetensors.h"

namespace fbl::train {

namespace {

// onnx.proto's TensorProto field numbers and the DataType codes fbl reads.
enum Field { kDims = 1, kDataType = 2, kSegment = 3, kFloatData = 4, kInt32Data = 5, kInt64Data = 7, kName = 8,
             kRawData = 9, kDataLocation = 14 };
enum Wire { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct DType {
  int code;
  const char* name;
  size_t size;
};
constexpr DType kDTypes[] = {{1, "f32", 4}, {2, "u8", 1}, {3, "i8", 1}, {6, "i32", 4}, {7, "i64", 8}, {9, "bool", 1}};

// A cursor over protobuf wire-format bytes; every read checks the bounds.
struct Cursor {
  const unsigned char* p;
  const unsigned char* end;
  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) return false;
      const unsigned char b = *p++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool length(std::string_view* s) {
    uint64_t n = 0;
    if (!varint(&n) || n > static_cast<uint64_t>(end - p)) return false;
    *s = std::string_view(reinterpret_cast<const char*>(p), n);
    p += n;
    return true;
  }
  bool fixed(size_t n, uint64_t* v) {
    if (static_cast<size_t>(end - p) < n) return false;
    *v = 0;
    std::memcpy(v, p, n);  // little-endian, as the wire format
    p += n;
    return true;
  }
  bool skip(int wire) {
    uint64_t v = 0;
    std::string_view s;
    switch (wire) {
      case kVarint: return varint(&v);
      case kFixed64: return fixed(8, &v);
      case kBytes: return length(&s);
      case kFixed32: return fixed(4, &v);
      default: return false;  // groups (3, 4) and unknown wire types
    }
  }
};

// Appends a repeated scalar field's values, packed (wire type 2) or one at a time.
template <typename T>
bool repeated(Cursor& w, int wire, int scalarWire, std::vector<T>* out) {
  auto one = [&](Cursor& from) {
    uint64_t v = 0;
    const bool ok = scalarWire == kVarint ? from.varint(&v) : from.fixed(scalarWire == kFixed32 ? 4 : 8, &v);
    if (!ok) return false;
    if constexpr (std::is_same_v<T, float>) {
      const auto bits = static_cast<uint32_t>(v);
      float f;
      std::memcpy(&f, &bits, 4);
      out->push_back(f);
    } else {
      out->push_back(static_cast<T>(v));  // int32 and int64 are two's complement in a varint
    }
    return true;
  };
  if (wire == scalarWire) return one(w);
  if (wire != kBytes) return false;
  std::string_view s;
  if (!w.length(&s)) return false;
  Cursor packed{reinterpret_cast<const unsigned char*>(s.data()), reinterpret_cast<const unsigned char*>(s.data()) + s.size()};
  while (packed.p != packed.end)
    if (!one(packed)) return false;
  return true;
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

Result<ProtoTensor> parseTensorProto(const std::string& bytes, const std::string& path) {
  if (bytes.empty()) return Error{path + ": empty file, not an ONNX TensorProto"};
  const Error malformed{path + ": not a valid ONNX TensorProto (protobuf parse failed)"};
  Cursor w{reinterpret_cast<const unsigned char*>(bytes.data()), reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size()};
  std::vector<int64_t> dims, int64s;
  std::vector<int32_t> int32s;
  std::vector<float> floats;
  int64_t dataType = 0, location = 0;
  std::string name;
  std::string_view raw;
  bool hasRaw = false, segmented = false;
  while (w.p != w.end) {
    uint64_t key = 0;
    if (!w.varint(&key) || key >> 3 == 0 || key >> 3 > (1u << 29)) return malformed;
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    bool ok = true;
    std::string_view s;
    uint64_t v = 0;
    switch (field) {
      case kDims: ok = repeated(w, wire, kVarint, &dims); break;
      case kFloatData: ok = repeated(w, wire, kFixed32, &floats); break;
      case kInt32Data: ok = repeated(w, wire, kVarint, &int32s); break;
      case kInt64Data: ok = repeated(w, wire, kVarint, &int64s); break;
      case kDataType:
        ok = wire == kVarint && w.varint(&v);
        dataType = static_cast<int64_t>(v);
        break;
      case kDataLocation:
        ok = wire == kVarint && w.varint(&v);
        location = static_cast<int64_t>(v);
        break;
      case kName:
        ok = wire == kBytes && w.length(&s);
        name.assign(s);
        break;
      case kRawData:
        ok = wire == kBytes && w.length(&raw);
        hasRaw = true;
        break;
      case kSegment:
        ok = wire == kBytes && w.length(&s);
        segmented = true;
        break;
      default: ok = w.skip(wire);
    }
    if (!ok) return malformed;
  }
  const std::string what = "tensor '" + name + "'";
  const DType* dt = nullptr;
  for (const DType& d : kDTypes)
    if (d.code == dataType) dt = &d;
  if (!dt)
    return Error{path + ": unsupported dtype code " + std::to_string(dataType) + " for " + what +
                 " (fbl supports f32, i64, i32, bool, u8, i8; export the model in f32)"};
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return Error{path + ": " + what + " has a negative dimension " + std::to_string(d)};
    if (__builtin_mul_overflow(count, d, &count) || count > (int64_t{1} << 40))
      return Error{path + ": " + what + " has too many elements (" + shapeText(dims) + ")"};
  }
  if (location == 1) return Error{path + ": " + what + " keeps its data in an external file, which is not allowed here"};
  if (segmented) return Error{path + ": " + what + " is segmented, which fbl does not support"};
  const auto want = static_cast<size_t>(count) * dt->size;
  ProtoTensor t{name, dt->name, dims, {}};
  if (hasRaw) {
    if (raw.size() != want)
      return Error{path + ": " + what + " has " + std::to_string(raw.size()) + " bytes of raw_data but its shape " + shapeText(dims) +
                   " of " + dt->name + " needs " + std::to_string(want)};
    t.bytes.assign(raw.begin(), raw.end());
    if (dt->code == 9)  // any non-zero byte is true; keep the 0/1 invariant
      for (unsigned char& b : t.bytes) b = b != 0;
    return t;
  }
  // Typed fields: f32 in float_data, i64 in int64_data, the others in int32_data.
  const char* field = dt->code == 1 ? "float_data" : dt->code == 7 ? "int64_data" : "int32_data";
  const size_t values = dt->code == 1 ? floats.size() : dt->code == 7 ? int64s.size() : int32s.size();
  if (values != static_cast<size_t>(count)) {
    if (values == 0) return Error{path + ": " + what + " of shape " + shapeText(dims) + " has no data"};
    return Error{path + ": " + what + " has " + std::to_string(values) + " values in " + field + " but its shape " + shapeText(dims) +
                 " holds " + std::to_string(count)};
  }
  t.bytes.resize(want);
  for (size_t i = 0; i < values; ++i) {
    unsigned char* at = t.bytes.data() + i * dt->size;
    switch (dt->code) {
      case 1: std::memcpy(at, &floats[i], 4); break;
      case 7: std::memcpy(at, &int64s[i], 8); break;
      case 6: std::memcpy(at, &int32s[i], 4); break;
      case 9: *at = int32s[i] != 0; break;
      default: *at = static_cast<unsigned char>(int32s[i]); break;  // u8, i8: the low byte
    }
  }
  return t;
}

Result<ProtoTensor> readTensorProto(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error{path + ": cannot open"};
  std::ostringstream s;
  s << f.rdbuf();
  if (!f && !f.eof()) return Error{path + ": read failed"};
  return parseTensorProto(s.str(), path);
}

Status writeTensorProto(const std::string& path, const ProtoTensor& t) {
  const DType* dt = nullptr;
  for (const DType& d : kDTypes)
    if (t.dtype == d.name) dt = &d;
  if (!dt) return Error{path + ": no TensorProto for dtype " + t.dtype};
  int64_t count = 1;
  for (int64_t d : t.shape) count *= d;
  if (t.bytes.size() != static_cast<size_t>(count) * dt->size)
    return Error{path + ": tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) + " bytes, not " +
                 std::to_string(static_cast<size_t>(count) * dt->size)};
  std::string b;
  auto varint = [&b](uint64_t v) {
    for (; v >= 0x80; v >>= 7) b.push_back(static_cast<char>((v & 0x7f) | 0x80));
    b.push_back(static_cast<char>(v));
  };
  auto bytesField = [&](int field, const void* p, size_t n) {
    varint(static_cast<uint64_t>(field) << 3 | kBytes);
    varint(n);
    b.append(static_cast<const char*>(p), n);
  };
  for (int64_t d : t.shape) {
    varint(kDims << 3 | kVarint);
    varint(static_cast<uint64_t>(d));
  }
  varint(kDataType << 3 | kVarint);
  varint(static_cast<uint64_t>(dt->code));
  bytesField(kName, t.name.data(), t.name.size());
  bytesField(kRawData, t.bytes.data(), t.bytes.size());
  return safetensors::writeFileAtomic(path, b, "the tensor");
}

}  // namespace fbl::train
