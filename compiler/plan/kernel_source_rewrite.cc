// Rewrites of a generated kernel source before the plan concatenates it with the others:
//  1. drop the template's leading comment lines;
//  2. pool parameters: `__global T* x` -> a pool `fbl_pK`, an offset `fbl_oK` and a pointer;
//  3. {{NAME}} -> the kernel's base name;
//  4. scope to the kernel: helpers and samplers get the base name as a prefix, macros are
//     #undef'd after the source.
#include "compiler/plan/kernel_source_rewrite.h"

#include <cctype>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "compiler/support/result.h"

namespace fbl::plan {

namespace {

// A small scanner over OpenCL C source: identifiers are maximal runs of [A-Za-z0-9_], as the
// preprocessor sees them. (std::regex did this job and took a third of llama-full's compile.)
bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

class SourceCursor {
 public:
  SourceCursor(const std::string& s, size_t at) : s_(&s), at_(at) {}
  void skipSpace() {
    while (at_ < s_->size() && isSpace((*s_)[at_])) ++at_;
  }
  // Consumes the word here; empty when there is none.
  std::string_view word() {
    const size_t b = at_;
    while (at_ < s_->size() && isWordChar((*s_)[at_])) ++at_;
    return std::string_view(*s_).substr(b, at_ - b);
  }
  // Consumes `w` and the spaces after it (at least one) when the source has that word here.
  bool keyword(std::string_view w) {
    SourceCursor c = *this;
    if (c.word() != w || !isSpace(c.peek())) return false;
    c.skipSpace();
    *this = c;
    return true;
  }
  char peek() const { return at_ < s_->size() ? (*s_)[at_] : '\0'; }
  size_t at() const { return at_; }

 private:
  const std::string* s_;
  size_t at_;
};

// Visits each line start of `src` (the start, and after every newline) with a cursor past its
// leading spaces.
template <typename Fn>
void forEachLine(const std::string& src, Fn fn) {
  for (size_t at = 0; at != std::string::npos; at = src.find('\n', at), at = at == std::string::npos ? at : at + 1) {
    SourceCursor c(src, at);
    c.skipSpace();
    fn(c);
  }
}

// The helper a line defines: `[inline] [static] inline TYPE NAME (` or
// `[inline] [static] __constant sampler_t NAME =`; empty when the line defines none.
std::string helperDefinedAt(SourceCursor c) {
  const SourceCursor start = c;
  for (bool leadingInline : {true, false}) {  // "inline inline T f(" aside, the first inline is optional
    c = start;
    if (leadingInline && !c.keyword("inline")) continue;
    c.keyword("static");
    if (c.keyword("__constant")) {
      if (!c.keyword("sampler_t")) continue;
    } else {
      if (!c.keyword("inline")) continue;
      const std::string_view type = c.word();
      if (type.empty() || !isSpace(c.peek())) continue;
      c.skipSpace();
    }
    const std::string name(c.word());
    if (name.empty()) continue;
    c.skipSpace();
    if (c.peek() == '(' || c.peek() == '=') return name;
  }
  return {};
}

}  // namespace

std::string poolParams(std::string src) {
  for (size_t at = 0; (at = src.find("__kernel void ", at)) != std::string::npos; ++at) {
    if (at > 0 && src[at - 1] != '\n') continue;  // a mention in a comment, not a kernel
    const size_t open = src.find('(', at), close = src.find(')', open), body = src.find('{', close);
    FBL_ASSERT(open != std::string::npos && close != std::string::npos && body != std::string::npos);
    std::string params, prologue;
    const std::string list = src.substr(open + 1, close - open - 1);
    size_t k = 0;
    const bool none = list.find_first_not_of(" \n") == std::string::npos;
    for (size_t p = 0; !none && p <= list.size(); ++k) {
      size_t comma = list.find(',', p);
      if (comma == std::string::npos) comma = list.size();
      std::string decl = list.substr(p, comma - p);
      decl.erase(0, decl.find_first_not_of(" \n"));
      p = comma + 1;
      if (!params.empty()) params += ", ";
      if (decl.find("image2d_t") != std::string::npos) {
        params += decl.substr(0, decl.find_last_not_of(" \n") + 1);
        continue;
      }
      const size_t star = decl.rfind('*');
      FBL_ASSERT(decl.rfind("__global ", 0) == 0 && star != std::string::npos);
      const std::string type = decl.substr(0, star + 1);
      std::string name = decl.substr(star + 1);
      name.erase(name.find_last_not_of(" \n") + 1);
      params += fmt::format("__global uchar* fbl_p{0}, ulong fbl_o{0}", k);
      prologue += fmt::format("\n  {} {} = ({})(fbl_p{} + fbl_o{});", type, name.substr(name.find_first_not_of(' ')), type, k, k);
    }
    src = src.substr(0, open + 1) + params + src.substr(close, body + 1 - close) + prologue + src.substr(body + 1);
  }
  return src;
}

std::string scopeToKernel(std::string src, const std::string& base) {
  std::set<std::string> helpers;
  forEachLine(src, [&](SourceCursor c) {
    std::string name = helperDefinedAt(c);
    if (!name.empty() && name != base) helpers.insert(std::move(name));
  });
  if (!helpers.empty()) {
    std::string out;
    out.reserve(src.size() + src.size() / 8);
    for (size_t i = 0; i < src.size();) {
      if (!isWordChar(src[i])) {
        out += src[i++];
        continue;
      }
      size_t j = i;
      while (j < src.size() && isWordChar(src[j])) ++j;
      const std::string word = src.substr(i, j - i);
      if (helpers.count(word)) out += base + "_";
      out += word;
      i = j;
    }
    src = std::move(out);
  }
  std::set<std::string> macros;
  forEachLine(src, [&](SourceCursor c) {
    if (c.peek() != '#') return;
    SourceCursor after(src, c.at() + 1);
    if (!after.keyword("define")) return;
    std::string name(after.word());
    if (!name.empty()) macros.insert(std::move(name));
  });
  for (const std::string& m : macros) src += "\n#undef " + m;
  return macros.empty() ? src : src + "\n";
}

std::string stripLeadingComments(const std::string& s) {
  size_t p = 0;
  while (s.compare(p, 2, "//") == 0) {
    const size_t nl = s.find('\n', p);
    if (nl == std::string::npos) return "";
    p = nl + 1;
  }
  return s.substr(p);
}


std::string planKernelSource(const std::string& source, const std::string& base) {
  std::string src = poolParams(stripLeadingComments(source));
  for (size_t p; (p = src.find("{{NAME}}")) != std::string::npos;) src.replace(p, 8, base);
  return scopeToKernel(std::move(src), base);
}

}  // namespace fbl::plan
