// oneLine: an error that quotes untrusted bytes (a model file's names) stays one line of valid
// UTF-8 text.
#include <catch2/catch.hpp>

#include "compiler/support/result.h"

namespace {

std::string shown(const std::string& message) { return fbl::oneLine(fbl::Error{message}).message; }

TEST_CASE("oneLine escapes control characters and bytes that start no UTF-8 sequence", "[support]") {
  // Control characters, as before.
  CHECK(shown("node 'a\nb'\r\t") == "node 'a\\nb'\\r\\t");
  CHECK(shown(std::string("x\x1b[31m\x7f", 7)) == "x\\x1b[31m\\x7f");
  // Well-formed UTF-8 passes: two, three and four bytes, and the last code point.
  const std::string text = "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
  CHECK(shown(text) == text);
  // A flipped byte in an op type, a lone continuation byte.
  CHECK(shown("Tr\xe3nspose") == "Tr\\xe3nspose");
  CHECK(shown("a\x80z") == "a\\x80z");
  // Overlong forms, a surrogate, past U+10FFFF, bytes that never start a sequence.
  CHECK(shown("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(shown("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");
  CHECK(shown("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(shown("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  CHECK(shown("\xf8\xff") == "\\xf8\\xff");
  // A sequence cut short by the end of the text, or by a byte that does not continue it.
  CHECK(shown("ab\xe6\x97") == "ab\\xe6\\x97");
  CHECK(shown("\xe6\x97z\xe6\x97\xa5") == "\\xe6\\x97z\xe6\x97\xa5");
}

}  // namespace
