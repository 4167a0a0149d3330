// User-facing errors are values (runtime/status.h: Status, Result<T>, FBL_TRY), shared with the
// runtime; this adds formatted errors and one-line quoting. Internal invariants use FBL_ASSERT
// (file and line).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "runtime/status.h"

namespace fbl {

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

}  // namespace fbl

// An internal invariant: a failure is a bug in fbl, not in the user's input.
#define FBL_ASSERT(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "fbl internal error at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                           \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
