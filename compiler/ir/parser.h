// Reads the text form that printer.h writes (grammar in docs/ir.md), so a pass test states its
// input and expected graphs as text. Errors are one line: "<source>:<line>: <what>".
#pragma once

#include <string_view>
#include <vector>

#include "compiler/ir/annotations.h"
#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::ir {

// Values must be defined (input/init/const/node output) before they are used; node names are
// optional (missing ones become "<op>_<index>"). Constants printed as a hash cannot be read
// back: print with PrintOptions::maxInlineElements = -1 for a full round trip.
// `<...>` annotations (annotations.h) are handed to `annotations`; without one they are an
// error.
Result<Graph> parseGraph(std::string_view text, std::string_view source = "<text>",
                         ParsedAnnotations* annotations = nullptr);

// An annotation's words as the IR's lexer reads them, for the layer that owns them: bare words
// ("32x64", "tile-map"), strings (unescaped), %names and punctuation (one of ()[]{},=:@). Errors
// are one line, "<source>:<line>: <what>".
struct AnnotationToken {
  enum class Kind { Word, String, Value, Punct };
  Kind kind = Kind::Word;
  std::string text;
};
Result<std::vector<AnnotationToken>> lexAnnotation(const Annotation& a, std::string_view source);

}  // namespace fbl::ir
