// User-facing errors are values: a Result<T> holds either a T or one line of text that names
// the file, node or tensor at fault. Internal invariants use FBL_ASSERT (file and line).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace fbl {

struct Error {
  std::string message;
};

template <typename... Args>
Error makeError(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 where s[i] starts none.
inline size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char b = at(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) n = 2;
  else if (b >= 0xe0 && b <= 0xef) n = 3, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
  else return 0;
  if (i + n > s.size() || at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  return n;
}

// `e` with its control characters written as \n, \r, \t or \xNN, and so is each byte that
// starts no well-formed UTF-8 sequence. A model file's names are untrusted bytes, and an error
// that quotes one must stay one line of text: the importer's and the loader's errors pass
// through this on their way out.
inline Error oneLine(Error e) {
  const std::string& in = e.message;
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    const char c = in[i];
    const auto u = static_cast<unsigned char>(c);
    const size_t n = utf8SequenceLength(in, i);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (n == 0 || u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out.append(in, i, n);
    i += n == 0 ? 1 : n;
  }
  return Error{std::move(out)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e)), failed_(true) {}
  static Status success() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool failed_ = false;
};

}  // namespace fbl

// Propagates an error out of the current function.
#define FBL_TRY(expr)                                \
  do {                                               \
    auto fbl_try_result_ = (expr);                   \
    if (!fbl_try_result_.ok()) return fbl_try_result_.error(); \
  } while (0)

#define FBL_CONCAT_INNER(a, b) a##b
#define FBL_CONCAT(a, b) FBL_CONCAT_INNER(a, b)
// auto x = FBL_TRY_ASSIGN(...) is not portable; use: FBL_ASSIGN(auto x, expr);
#define FBL_ASSIGN(decl, expr) FBL_ASSIGN_IMPL(FBL_CONCAT(fbl_assign_, __LINE__), decl, expr)
#define FBL_ASSIGN_IMPL(tmp, decl, expr)       \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.error();           \
  decl = std::move(tmp).value()

// An internal invariant: a failure is a bug in fbl, not in the user's input.
#define FBL_ASSERT(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "fbl internal error at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                           \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
