#include "runtime/npy.h"

#include <cstring>

#include "runtime/files.h"

namespace fbl::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

struct DescrName {
  const char* descr;
  const char* dtype;
};
// numpy writes '|' for one-byte types and '<' for the rest on a little-endian machine.
constexpr DescrName kDescrs[] = {
    {"<i8", "i64"}, {"<i4", "i32"}, {"<i2", "i16"}, {"|i1", "i8"},  {"<u8", "u64"}, {"<u4", "u32"},
    {"<u2", "u16"}, {"|u1", "u8"},  {"|b1", "bool"}, {"<f2", "f16"}, {"<f4", "f32"}, {"<f8", "f64"},
};

int64_t elementBytes(const std::string& dtype) {
  if (dtype == "i64" || dtype == "u64" || dtype == "f64") return 8;
  if (dtype == "i32" || dtype == "u32" || dtype == "f32") return 4;
  if (dtype == "i16" || dtype == "u16" || dtype == "f16") return 2;
  return 1;
}

// Header text for a message: control bytes as \xNN, at most 40 characters, so that the
// message stays one line whatever the file holds.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 40)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      const char* hex = "0123456789abcdef";
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    }
  }
  return s.size() > 40 ? out + "..." : out;
}

// A reader of the header's dict literal: {'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  // What is wrong with the header, as words that follow "the .npy header".
  Status parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool seenDescr = false, seenFortran = false, seenShape = false;
    if (!consume('{')) return Error{"does not start with '{'"};
    while (true) {
      if (consume('}')) break;
      std::string key;
      if (!quoted(&key)) return Error{"has a key that is not a quoted string"};
      if (!consume(':')) return Error{"has no ':' after '" + printable(key) + "'"};
      if (key == "descr") {
        if (seenDescr || !quoted(descr)) return Error{"has a 'descr' that is repeated or not a string"};
        seenDescr = true;
      } else if (key == "fortran_order") {
        if (seenFortran) return Error{"repeats 'fortran_order'"};
        if (word("True")) *fortran = true;
        else if (word("False")) *fortran = false;
        else return Error{"has a 'fortran_order' that is neither True nor False"};
        seenFortran = true;
      } else if (key == "shape") {
        if (seenShape) return Error{"repeats 'shape'"};
        FBL_TRY(tuple(shape));
        seenShape = true;
      } else {
        return Error{"has an unknown key '" + printable(key) + "'"};
      }
      if (consume(',')) continue;
      if (consume('}')) break;
      return Error{"has no ',' or '}' after '" + printable(key) + "'"};
    }
    skipSpaces();
    if (at_ + 1 != s_.size() || s_[at_] != '\n') return Error{"does not end with '}' and a newline"};
    if (!seenDescr || !seenFortran || !seenShape) return Error{"lacks one of 'descr', 'fortran_order', 'shape'"};
    return Status::success();
  }

 private:
  void skipSpaces() {
    while (at_ < s_.size() && (s_[at_] == ' ' || (s_[at_] == '\n' && at_ + 1 < s_.size()))) ++at_;
  }
  bool consume(char c) {
    skipSpaces();
    if (at_ < s_.size() && s_[at_] == c) return ++at_, true;
    return false;
  }
  bool word(const char* w) {
    skipSpaces();
    const size_t n = std::strlen(w);
    if (s_.compare(at_, n, w) != 0) return false;
    at_ += n;
    return true;
  }
  bool quoted(std::string* out) {
    skipSpaces();
    if (at_ >= s_.size() || (s_[at_] != '\'' && s_[at_] != '"')) return false;
    const char q = s_[at_++];
    const size_t end = s_.find(q, at_);
    if (end == std::string::npos) return false;
    *out = s_.substr(at_, end - at_);
    at_ = end + 1;
    return true;
  }
  // (), (7,), (3, 4): dimensions below 2^40, as safetensors::parse allows.
  Status tuple(std::vector<int64_t>* shape) {
    if (!consume('(')) return Error{"has a 'shape' that is not a tuple"};
    while (!consume(')')) {
      skipSpaces();
      uint64_t d = 0;
      size_t digits = 0;
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9' && digits < 14) d = d * 10 + uint64_t(s_[at_++] - '0'), ++digits;
      if (digits == 0 || d > (uint64_t{1} << 40)) return Error{"has a 'shape' dimension that is not a non-negative integer below 2^40"};
      shape->push_back(static_cast<int64_t>(d));
      const bool closes = (skipSpaces(), at_ < s_.size() && s_[at_] == ')');
      if (!consume(',') && !closes) return Error{"has a 'shape' without ',' between dimensions"};
    }
    return Status::success();
  }

  const std::string s_;
  size_t at_ = 0;
};

}  // namespace

Result<Array> parse(const std::string& bytes, const std::string& path) {
  const std::string where = "'" + path + "'";
  if (bytes.size() < 10 || bytes.compare(0, kMagicBytes, kMagic, kMagicBytes) != 0)
    return Error{where + " is not a .npy file (no \\x93NUMPY magic)"};
  const unsigned major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return Error{where + ": .npy version " + std::to_string(major) + "." + std::to_string(minor) + " is not 1.0, 2.0 or 3.0"};
  const size_t lenBytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + lenBytes) return Error{where + " is truncated inside its header length"};
  uint64_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i) headerLen |= uint64_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
  const uint64_t dataStart = 8 + lenBytes + headerLen;
  if (dataStart > bytes.size())
    return Error{where + " is truncated: its header says " + std::to_string(headerLen) + " bytes, the file has " +
                 std::to_string(bytes.size() - 8 - lenBytes)};
  std::string descr;
  bool fortran = false;
  Array a;
  HeaderParser header(bytes.substr(8 + lenBytes, headerLen));
  if (Status e = header.parse(&descr, &fortran, &a.shape); !e.ok()) return Error{where + ": the .npy header " + e.error().message};
  if (fortran) return Error{where + ": the array is in Fortran order; save it in C order (numpy.ascontiguousarray)"};
  // A one-byte type has no byte order; '<' in front of it is accepted as well as '|'.
  for (const DescrName& d : kDescrs)
    if (descr == d.descr || (descr.size() == 3 && descr[0] == '<' && d.descr[0] == '|' && descr.substr(1) == d.descr + 1))
      a.dtype = d.dtype;
  if (a.dtype.empty())
    return Error{where + ": dtype '" + printable(descr) + "' is not supported" +
                 (!descr.empty() && descr[0] == '>'
                      ? " (big-endian: save it little-endian, arr.astype('<" + printable(descr.substr(1)) + "'))"
                      : " (bool, int8..int64, uint8..uint64, float16/32/64)")};
  uint64_t expected = static_cast<uint64_t>(elementBytes(a.dtype));
  for (int64_t d : a.shape) {
    if (d != 0 && expected > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) return Error{where + ": the shape is too large"};
    expected *= static_cast<uint64_t>(d);
  }
  const uint64_t have = bytes.size() - dataStart;
  if (have != expected)
    return Error{where + (have < expected ? " is truncated" : " has trailing bytes") + ": " + a.dtype + " of its shape needs " +
                 std::to_string(expected) + " data bytes, the file has " + std::to_string(have)};
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(dataStart), bytes.end());
  return a;
}

Result<Array> read(const std::string& path) {
  FBL_ASSIGN(const std::string bytes, rt::readWholeFile(path, "an .npy file"));
  return parse(bytes, path);
}

std::string serialize(const Array& a) {
  std::string descr;
  for (const DescrName& d : kDescrs)
    if (a.dtype == d.dtype) descr = d.descr;
  std::string shape;  // numpy's tuple: (), (7,), (3, 4)
  for (size_t i = 0; i < a.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape[i]);
  if (a.shape.size() == 1) shape += ",";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // numpy pads with spaces so that the data starts at a multiple of 64 bytes.
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out(kMagic, kMagicBytes);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  return out;
}

}  // namespace fbl::npy
