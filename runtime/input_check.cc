#include "runtime/input_check.h"

#include <cmath>
#include <cstring>

#include "runtime/shape_text.h"

namespace fbl::rt {

namespace {

// "position 17 ([1, 1])": the flat row-major position and its coordinates.
std::string where(const planfile::Tensor& t, int64_t pos) {
  std::vector<int64_t> c(t.shape.size());
  int64_t rest = pos;
  for (size_t d = t.shape.size(); d-- > 0;) {
    const int64_t n = t.shape[d] > 0 ? t.shape[d] : 1;
    c[d] = rest % n;
    rest /= n;
  }
  std::string s = "input '" + t.name + "' position " + std::to_string(pos) + " ([";
  for (size_t d = 0; d < c.size(); ++d) s += (d ? ", " : "") + std::to_string(c[d]);
  return s + "])";
}

bool isFloatType(const std::string& dt) { return dt == "f32" || dt == "f64" || dt == "f16" || dt == "bf16"; }

int64_t intAt(const unsigned char* p, const std::string& dt) {
  if (dt == "i64") { int64_t v; std::memcpy(&v, p, 8); return v; }
  if (dt == "i32") { int32_t v; std::memcpy(&v, p, 4); return v; }
  if (dt == "i8") return static_cast<int8_t>(*p);
  return *p;  // u8
}

// "" for a finite value, else how to print it ("NaN", "inf", "-inf").
std::string nonFinite(const unsigned char* p, const std::string& dt) {
  auto name = [](bool nan, bool negative) { return nan ? std::string("NaN") : negative ? "-inf" : "inf"; };
  if (dt == "f32" || dt == "f64") {
    double v;
    if (dt == "f32") {
      float f;
      std::memcpy(&f, p, 4);
      v = f;
    } else {
      std::memcpy(&v, p, 8);
    }
    return std::isfinite(v) ? "" : name(std::isnan(v), v < 0);
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  // f16: 5 exponent bits, 10 mantissa bits; bf16: 8 and 7. All-ones exponent: inf or NaN.
  const uint16_t expMask = dt == "f16" ? 0x7C00 : 0x7F80, manMask = dt == "f16" ? 0x03FF : 0x007F;
  if ((h & expMask) != expMask) return "";
  return name((h & manMask) != 0, (h & 0x8000) != 0);
}

// Why value v breaks check c, if it does.
Status violation(const planfile::InputCheck& c, int64_t v) {
  const std::string range = "[" + std::to_string(c.lo) + ", " + std::to_string(c.hi) + ")";
  if (c.kind == "label") {
    if ((v >= c.lo && v < c.hi) || (c.hasIgnore && v == c.ignoreIndex)) return Status::success();
    return Error{"label " + std::to_string(v) + " is outside the classes " + range +
                 (c.hasIgnore ? " and is not the ignore_index " + std::to_string(c.ignoreIndex) : std::string()) +
                 " (node '" + c.node + "')"};
  }
  if (v >= c.lo && v < c.hi) return Status::success();
  return Error{"index " + std::to_string(v) + " is outside " + range + " (the table '" + c.table + "' of node '" + c.node + "')"};
}

}  // namespace

bool checkedIntegerType(const std::string& dt) { return dt == "i64" || dt == "i32" || dt == "i8" || dt == "u8"; }

Status checkInput(const planfile::Plan& plan, int32_t t, const void* data, size_t bytes) {
  const planfile::Tensor& pt = plan.tensors[t];
  const int64_t want = planfile::logicalBytes(pt);
  const bool input = pt.role == planfile::Role::Input;
  if (static_cast<int64_t>(bytes) != want)
    return Error{std::string(input ? "input '" : "tensor '") + pt.name + "' takes " + std::to_string(want) + " bytes (" +
                 pt.dtype + shapeText(pt.shape) + "), not " + std::to_string(bytes)};
  if (!input || bytes == 0) return Status::success();
  if (data == nullptr) return Error{"input '" + pt.name + "': no data"};
  const auto* p = static_cast<const unsigned char*>(data);
  const int64_t size = planfile::elementSize(pt.dtype), count = want / size;
  std::string first;
  int64_t bad = 0;
  if (isFloatType(pt.dtype)) {
    for (int64_t i = 0; i < count; ++i) {
      const std::string nf = nonFinite(p + i * size, pt.dtype);
      if (nf.empty()) continue;
      if (bad++ == 0) first = where(pt, i) + ": value " + nf + " is not finite";
    }
  } else if (checkedIntegerType(pt.dtype)) {
    std::vector<const planfile::InputCheck*> checks;
    for (const planfile::InputCheck& c : plan.inputChecks)
      if (c.input == t) checks.push_back(&c);
    if (checks.empty()) return Status::success();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t v = intAt(p + i * size, pt.dtype);
      for (const planfile::InputCheck* c : checks) {
        const Status why = violation(*c, v);
        if (why.ok()) continue;
        if (bad++ == 0) first = where(pt, i) + ": " + why.error().message;
        break;
      }
    }
  }
  if (bad == 0) return Status::success();
  return Error{bad == 1 ? first : first + " (and " + std::to_string(bad - 1) + " more positions)"};
}

Status checkInput(const planfile::Plan& plan, int32_t t, const std::string& dtype,
                  const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  const planfile::Tensor& pt = plan.tensors[t];
  if (dtype != pt.dtype || shape != pt.shape)
    return Error{std::string(pt.role == planfile::Role::Input ? "input '" : "tensor '") + pt.name + "' is " + dtype +
                 shapeText(shape) + " but the plan expects " + pt.dtype + shapeText(pt.shape)};
  return checkInput(plan, t, data, bytes);
}

}  // namespace fbl::rt
