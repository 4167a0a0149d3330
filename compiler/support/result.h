// User-facing errors are values: a Result<T> holds either a T or one line of text that names
// the file, node or tensor at fault. Internal invariants use FBL_ASSERT (file and line).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
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

// `e` with its control characters written as \n, \r, \t or \xNN. A model file's names are
// untrusted bytes, and an error that quotes one must stay one line: the importer's and the
// loader's errors pass through this on their way out.
inline Error oneLine(Error e) {
  std::string out;
  out.reserve(e.message.size());
  for (const char c : e.message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
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
