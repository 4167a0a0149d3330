// A line-at-a-time recursive-descent reader for the IR text form.
//
// 1. Split the text into lines; on each, lex words, strings, %values and punctuation ('#'
//    starts a comment).
// 2. The first statement is the header `graph "name" opset N`.
// 3. Each later line is one statement, chosen by its first word: input, init, const, output,
//    or a node (optionally prefixed by bwd/opt).
// 4. Names resolve against the values defined so far; types, data and attributes are checked
//    as they are read (element counts against shapes, list element kinds).
// 5. `<...>` annotations are kept as text, keyed by what they follow (annotations.h).
#include "compiler/ir/parser.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <unordered_set>

#include <fmt/format.h>

namespace fbl::ir {

namespace {

enum class Tok { Word, String, Value, Punct, Annotation, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // the word, the unescaped string, the value name, the punctuation, or
                     // an annotation's text between its brackets
};

bool isWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '-' || c == '/' || c == '+';
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class LineParser {
 public:
  LineParser(std::string_view source, int line, Graph& g, std::unordered_set<std::string>& names,
             ParsedAnnotations* annotations)
      : source_(source), line_(line), g_(g), nodeNames_(names), annotations_(annotations) {}

  Status lex(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
      char c = s[i];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++i;
      } else if (c == '#') {
        break;
      } else if (c == '"') {
        Token t{Tok::String, {}};
        FBL_TRY(lexString(s, i, t.text));
        toks_.push_back(std::move(t));
      } else if (c == '%') {
        ++i;
        Token t{Tok::Value, {}};
        if (i < s.size() && s[i] == '"') {
          FBL_TRY(lexString(s, i, t.text));
        } else {
          while (i < s.size() && isWordChar(s[i])) t.text += s[i++];
        }
        if (t.text.empty()) return fail("'%' must be followed by a name");
        toks_.push_back(std::move(t));
      } else if (isWordChar(c)) {
        Token t{Tok::Word, {}};
        while (i < s.size() && isWordChar(s[i])) t.text += s[i++];
        toks_.push_back(std::move(t));
      } else if (c == '<') {
        Token t{Tok::Annotation, {}};
        FBL_TRY(lexAnnotation(s, i, t.text));
        toks_.push_back(std::move(t));
      } else if (std::string_view("()[]{},=:@").find(c) != std::string_view::npos) {
        toks_.push_back({Tok::Punct, std::string(1, c)});
        ++i;
      } else {
        return fail(fmt::format("unexpected character '{}'", c));
      }
    }
    return {};
  }

  bool empty() const { return toks_.empty(); }
  const std::vector<Token>& tokens() const { return toks_; }

  Status header() {
    FBL_TRY(expectWord("graph"));
    if (peek().kind != Tok::String) return fail("expected the graph name as a quoted string");
    g_.name = next().text;
    FBL_TRY(expectWord("opset"));
    FBL_ASSIGN(g_.opset, integer("opset"));
    return end();
  }

  Status statement() {
    const Token& t = peek();
    if (t.kind == Tok::Word) {
      if (t.text == "input") return input();
      if (t.text == "init") return constant(ValueKind::Initializer);
      if (t.text == "const") return constant(ValueKind::Constant);
      if (t.text == "output") return output();
    }
    return node();
  }

 private:
  Error fail(std::string_view msg) const {
    return makeError("{}:{}: {}", source_, line_, msg);
  }

  Status lexString(std::string_view s, size_t& i, std::string& out) {
    ++i;  // opening quote
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size()) break;
      char e = s[i++];
      if (e == 'n') {
        out += '\n';
      } else if (e == 't') {
        out += '\t';
      } else if (e == 'x') {
        int h = i + 1 < s.size() ? hexDigit(s[i]) : -1;
        int l = i + 1 < s.size() ? hexDigit(s[i + 1]) : -1;
        if (h < 0 || l < 0) return fail("bad \\x escape in a string");
        out += static_cast<char>(h * 16 + l);
        i += 2;
      } else {
        out += e;
      }
    }
    if (i >= s.size()) return fail("unterminated string");
    ++i;  // closing quote
    return {};
  }

  // From '<' to its matching '>', skipping quoted strings; the text between, trimmed.
  Status lexAnnotation(std::string_view s, size_t& i, std::string& out) {
    const size_t start = ++i;
    int depth = 1;
    while (i < s.size() && depth > 0) {
      char c = s[i];
      if (c == '"') {
        std::string ignored;
        FBL_TRY(lexString(s, i, ignored));
        continue;
      }
      depth += c == '<' ? 1 : c == '>' ? -1 : 0;
      ++i;
    }
    if (depth > 0) return fail("unterminated annotation: '<' without its '>'");
    std::string_view body = s.substr(start, i - 1 - start);
    while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
    while (!body.empty() && (body.back() == ' ' || body.back() == '\t')) body.remove_suffix(1);
    if (body.empty()) return fail("empty annotation '<>'");
    out = std::string(body);
    return {};
  }

  // An optional `<...>` after a value, an input or a node, kept in `into`.
  template <typename Key>
  Status annotation(std::map<Key, Annotation> ParsedAnnotations::*into, const Key& key) {
    if (peek().kind != Tok::Annotation) return {};
    return keep(next(), into, key);
  }
  template <typename Key>
  Status keep(Token t, std::map<Key, Annotation> ParsedAnnotations::*into, const Key& key) {
    if (annotations_ == nullptr)
      return fail(fmt::format("unexpected annotation '<{}>': this reader takes plain graph text", t.text));
    (annotations_->*into)[key] = {std::move(t.text), line_};
    return {};
  }

  const Token& peek(size_t ahead = 0) const {
    static const Token kEnd;
    return pos_ + ahead < toks_.size() ? toks_[pos_ + ahead] : kEnd;
  }
  Token next() { return pos_ < toks_.size() ? toks_[pos_++] : Token{}; }
  bool isPunct(char c, size_t ahead = 0) const {
    const Token& t = peek(ahead);
    return t.kind == Tok::Punct && t.text[0] == c;
  }
  bool accept(char c) {
    if (!isPunct(c)) return false;
    ++pos_;
    return true;
  }
  Status expect(char c) {
    if (accept(c)) return {};
    return fail(fmt::format("expected '{}' but found {}", c, describe(peek())));
  }
  Status expectWord(std::string_view w) {
    if (peek().kind == Tok::Word && peek().text == w) {
      ++pos_;
      return {};
    }
    return fail(fmt::format("expected '{}' but found {}", w, describe(peek())));
  }
  Status end() {
    if (peek().kind == Tok::End) return {};
    return fail(fmt::format("unexpected {} at the end of the line", describe(peek())));
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End: return "the end of the line";
      case Tok::Value: return fmt::format("'%{}'", t.text);
      case Tok::String: return fmt::format("string \"{}\"", t.text);
      case Tok::Annotation: return fmt::format("annotation '<{}>'", t.text);
      default: return fmt::format("'{}'", t.text);
    }
  }

  Result<int64_t> integer(std::string_view what) {
    Token t = next();
    int64_t v = 0;
    if (t.kind == Tok::Word) {
      auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (ec == std::errc() && p == t.text.data() + t.text.size()) return v;
    }
    return fail(fmt::format("expected an integer ({}) but found {}", what, describe(t)));
  }

  // dtype, then an optional [dims].
  Status type(Value& v) {
    Token t = next();
    auto dt = t.kind == Tok::Word ? dtypeFromName(t.text) : std::nullopt;
    if (!dt) return fail(fmt::format("expected a dtype (f32, i64, ...) but found {}", describe(t)));
    v.dtype = *dt;
    if (!accept('[')) return {};
    v.shapeKnown = true;
    if (accept(']')) return {};
    do {
      FBL_ASSIGN(int64_t d, integer("dimension"));
      if (d < 0) return fail("a dimension must be >= 0");
      v.shape.push_back(d);
    } while (accept(','));
    return expect(']');
  }

  Result<ValueId> use() {
    Token t = next();
    if (t.kind == Tok::Word && t.text == "_") return kNoValue;
    if (t.kind != Tok::Value) return fail(fmt::format("expected a %value but found {}", describe(t)));
    ValueId id = g_.findValue(t.text);
    if (id == kNoValue) return fail(fmt::format("%{} is used before it is defined", t.text));
    return id;
  }

  Status define(const std::string& name) {
    if (g_.findValue(name) != kNoValue) return fail(fmt::format("%{} is defined twice", name));
    return {};
  }

  Status input() {
    next();
    Token t = next();
    if (t.kind != Tok::Value) return fail("expected '%name' after 'input'");
    FBL_TRY(define(t.text));
    Value v;
    v.name = t.text;
    v.kind = ValueKind::Input;
    if (accept(':')) FBL_TRY(type(v));
    ValueId id = g_.addValue(std::move(v));
    g_.inputs.push_back(id);
    FBL_TRY(annotation(&ParsedAnnotations::values, id));
    return end();
  }

  Status output() {
    next();
    FBL_ASSIGN(ValueId id, use());
    if (id == kNoValue) return fail("a graph output cannot be '_'");
    g_.outputs.push_back(id);
    return end();
  }

  // init %w : f32[2] [external("f", offset=0, length=8)] [= data]; const %c : T = data.
  Status constant(ValueKind kind) {
    std::string keyword = next().text;
    Token t = next();
    if (t.kind != Tok::Value) return fail(fmt::format("expected '%name' after '{}'", keyword));
    FBL_TRY(define(t.text));
    Value v;
    v.name = t.text;
    v.kind = kind;
    FBL_TRY(expect(':'));
    FBL_TRY(type(v));
    if (!v.shapeKnown) return fail(fmt::format("{} %{} needs a shape", keyword, v.name));
    if (kind == ValueKind::Initializer && peek().kind == Tok::Word && peek().text == "external") {
      next();
      ExternalData ext;
      FBL_TRY(expect('('));
      if (peek().kind != Tok::String) return fail("expected the external file as a string");
      ext.location = next().text;
      while (accept(',')) {
        Token key = next();
        FBL_TRY(expect('='));
        FBL_ASSIGN(int64_t n, integer(key.text));
        if (key.text == "offset") {
          ext.offset = n;
        } else if (key.text == "length") {
          ext.length = n;
        } else {
          return fail(fmt::format("unknown external-data key {}", describe(key)));
        }
      }
      FBL_TRY(expect(')'));
      v.external = std::move(ext);
    }
    std::optional<Token> note;
    if (peek().kind == Tok::Annotation) note = next();
    if (accept('=')) {
      FBL_ASSIGN(Tensor data, tensorData(v.dtype, v.shape));
      v.data = std::make_shared<const Tensor>(std::move(data));
    } else if (kind == ValueKind::Constant) {
      return fail(fmt::format("const %{} needs '= [values]'", v.name));
    }
    FBL_TRY(end());
    ValueId id = g_.addValue(std::move(v));
    if (note) FBL_TRY(keep(std::move(*note), &ParsedAnnotations::values, id));
    return {};
  }

  // [v0,v1,...] with exactly numel(shape) elements of dtype t.
  Result<Tensor> tensorData(DType t, const Shape& shape) {
    if (peek().kind == Tok::Word && peek().text == "hash")
      return fail("this constant was printed as a hash and has no data to read; print with "
                  "maxInlineElements = -1");
    FBL_TRY(expect('['));
    int64_t numel = 1;
    for (int64_t d : shape)
      if (__builtin_mul_overflow(numel, d, &numel) || numel > (int64_t{1} << 32))
        return fail("the constant is too large to write as text");
    Tensor out(t, shape);
    int64_t i = 0;
    if (!accept(']')) {
      do {
        Token e = next();
        if (e.kind != Tok::Word) return fail(fmt::format("expected a number but found {}", describe(e)));
        if (i >= numel)
          return fail(fmt::format("more than {} values for shape {}", numel, shapeToString(shape)));
        FBL_TRY(storeElement(out, i++, e.text));
      } while (accept(','));
      FBL_TRY(expect(']'));
    }
    if (i != numel)
      return fail(fmt::format("{} values for shape {}, which holds {}", i, shapeToString(shape), numel));
    return out;
  }

  Status storeElement(Tensor& t, int64_t i, const std::string& s) {
    if (t.dtype() == DType::Bool && (s == "true" || s == "false")) {
      t.set(i, s == "true" ? 1 : 0);
      return {};
    }
    if (isFloat(t.dtype())) {
      FBL_ASSIGN(double d, parseFloat(s));
      t.set(i, t.dtype() == DType::F32 ? static_cast<double>(std::strtof(s.c_str(), nullptr)) : d);
      return {};
    }
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
      return fail(fmt::format("'{}' is not an integer", s));
    if (t.dtype() == DType::I64) {
      t.data<int64_t>()[i] = v;
    } else {
      t.set(i, static_cast<double>(v));
    }
    return {};
  }

  Result<double> parseFloat(const std::string& s) {
    char* endp = nullptr;
    double d = std::strtod(s.c_str(), &endp);
    if (s.empty() || endp != s.c_str() + s.size())
      return fail(fmt::format("'{}' is not a number", s));
    return d;
  }

  static bool looksFloat(const std::string& s) {
    return s.find_first_of(".eE") != std::string::npos || s == "inf" || s == "-inf" ||
           s == "nan";
  }

  Result<AttrValue> attrValue() {
    const Token& t = peek();
    if (t.kind == Tok::String) return AttrValue(next().text);
    if (t.kind == Tok::Word && t.text == "tensor") {
      next();
      Value v;
      FBL_TRY(type(v));
      if (!v.shapeKnown) return fail("a tensor attribute needs a shape");
      FBL_ASSIGN(Tensor data, tensorData(v.dtype, v.shape));
      return AttrValue(std::move(data));
    }
    if (t.kind == Tok::Word && (t.text == "f" || t.text == "s") && isPunct('[', 1) &&
        isPunct(']', 2)) {
      bool floats = next().text == "f";
      pos_ += 2;
      return floats ? AttrValue(std::vector<float>{}) : AttrValue(std::vector<std::string>{});
    }
    if (accept('[')) return listValue();
    Token w = next();
    if (w.kind != Tok::Word) return fail(fmt::format("expected an attribute value but found {}", describe(w)));
    if (looksFloat(w.text)) {
      FBL_TRY(parseFloat(w.text));
      return AttrValue(std::strtof(w.text.c_str(), nullptr));
    }
    int64_t v = 0;
    auto [p, ec] = std::from_chars(w.text.data(), w.text.data() + w.text.size(), v);
    if (ec != std::errc() || p != w.text.data() + w.text.size())
      return fail(fmt::format("'{}' is not an attribute value", w.text));
    return AttrValue(v);
  }

  // After '[': ints, floats or strings, decided by the first element.
  Result<AttrValue> listValue() {
    if (accept(']')) return AttrValue(std::vector<int64_t>{});
    if (peek().kind == Tok::String) {
      std::vector<std::string> out;
      do {
        Token s = next();
        if (s.kind != Tok::String) return fail("a list of strings holds only strings");
        out.push_back(std::move(s.text));
      } while (accept(','));
      FBL_TRY(expect(']'));
      return AttrValue(std::move(out));
    }
    std::vector<std::string> words;
    bool anyFloat = false;
    do {
      Token w = next();
      if (w.kind != Tok::Word) return fail(fmt::format("expected a number but found {}", describe(w)));
      anyFloat = anyFloat || looksFloat(w.text);
      words.push_back(std::move(w.text));
    } while (accept(','));
    FBL_TRY(expect(']'));
    if (anyFloat) {
      std::vector<float> out;
      for (const auto& w : words) {
        FBL_TRY(parseFloat(w));
        out.push_back(std::strtof(w.c_str(), nullptr));
      }
      return AttrValue(std::move(out));
    }
    std::vector<int64_t> out;
    for (const auto& w : words) {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
      if (ec != std::errc() || p != w.data() + w.size())
        return fail(fmt::format("'{}' is not an integer", w));
      out.push_back(v);
    }
    return AttrValue(std::move(out));
  }

  // [bwd|opt] outs = Op(args) {attrs} @name, or Op(args) ... for a node without outputs.
  Status node() {
    Node n;
    if (peek().kind == Tok::Word && (peek().text == "bwd" || peek().text == "opt") &&
        peek(1).kind != Tok::Punct) {
      n.phase = next().text == "bwd" ? Phase::Backward : Phase::Optimizer;
    }
    std::vector<Value> outs;
    std::vector<bool> omitted;
    std::vector<std::optional<Token>> outNotes;
    if (peek().kind == Tok::Value || (peek().kind == Tok::Word && peek().text == "_")) {
      do {
        Token t = next();
        if (t.kind == Tok::Word && t.text == "_") {
          outs.emplace_back();
          omitted.push_back(true);
          outNotes.emplace_back();
          continue;
        }
        if (t.kind != Tok::Value) return fail(fmt::format("expected a %value but found {}", describe(t)));
        Value v;
        v.name = t.text;
        if (accept(':')) FBL_TRY(type(v));
        outs.push_back(std::move(v));
        omitted.push_back(false);
        outNotes.emplace_back();
        if (peek().kind == Tok::Annotation) outNotes.back() = next();
      } while (accept(','));
      FBL_TRY(expect('='));
    }
    Token op = next();
    if (op.kind != Tok::Word && op.kind != Tok::String)
      return fail(fmt::format("expected an op name but found {}", describe(op)));
    n.op = op.text;
    FBL_TRY(expect('('));
    if (!accept(')')) {
      const NodeId self = static_cast<NodeId>(g_.nodes.size());
      do {
        FBL_ASSIGN(ValueId id, use());
        n.inputs.push_back(id);
        FBL_TRY(annotation(&ParsedAnnotations::inputs, std::pair(self, static_cast<int>(n.inputs.size()) - 1)));
      } while (accept(','));
      FBL_TRY(expect(')'));
    }
    if (accept('{')) {
      do {
        Token key = next();
        if (key.kind != Tok::Word && key.kind != Tok::String)
          return fail(fmt::format("expected an attribute name but found {}", describe(key)));
        FBL_TRY(expect('='));
        FBL_ASSIGN(AttrValue v, attrValue());
        if (!n.attrs.emplace(key.text, std::move(v)).second)
          return fail(fmt::format("attribute '{}' is given twice", key.text));
      } while (accept(','));
      FBL_TRY(expect('}'));
    }
    if (accept('@')) {
      Token name = next();
      if (name.kind != Tok::Word && name.kind != Tok::String)
        return fail(fmt::format("expected a node name after '@' but found {}", describe(name)));
      n.name = name.text;
    } else {
      n.name = fmt::format("{}_{}", n.op, g_.nodes.size());
      for (int k = 1; nodeNames_.count(n.name); ++k)
        n.name = fmt::format("{}_{}_{}", n.op, g_.nodes.size(), k);
    }
    FBL_TRY(annotation(&ParsedAnnotations::nodes, static_cast<NodeId>(g_.nodes.size())));
    FBL_TRY(end());
    if (!nodeNames_.insert(n.name).second)
      return fail(fmt::format("node name '{}' is used twice", n.name));
    for (size_t i = 0; i < outs.size(); ++i) {
      if (omitted[i]) {
        n.outputs.push_back(kNoValue);
        continue;
      }
      FBL_TRY(define(outs[i].name));
      n.outputs.push_back(g_.addValue(std::move(outs[i])));
      if (outNotes[i]) FBL_TRY(keep(std::move(*outNotes[i]), &ParsedAnnotations::values, n.outputs.back()));
    }
    g_.addNode(std::move(n));
    return {};
  }

  std::string_view source_;
  int line_;
  Graph& g_;
  std::unordered_set<std::string>& nodeNames_;
  ParsedAnnotations* annotations_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<AnnotationToken>> lexAnnotation(const Annotation& a, std::string_view source) {
  Graph unused;
  std::unordered_set<std::string> names;
  LineParser p(source, a.line, unused, names, nullptr);
  FBL_TRY(p.lex(a.text));
  std::vector<AnnotationToken> out;
  for (const Token& t : p.tokens()) {
    switch (t.kind) {
      case Tok::Word: out.push_back({AnnotationToken::Kind::Word, t.text}); break;
      case Tok::String: out.push_back({AnnotationToken::Kind::String, t.text}); break;
      case Tok::Value: out.push_back({AnnotationToken::Kind::Value, t.text}); break;
      case Tok::Punct: out.push_back({AnnotationToken::Kind::Punct, t.text}); break;
      case Tok::Annotation:
        return makeError("{}:{}: annotation '<{}>' holds another annotation", source, a.line, a.text);
      case Tok::End: break;
    }
  }
  return out;
}

Result<Graph> parseGraph(std::string_view text, std::string_view source, ParsedAnnotations* annotations) {
  Graph g;
  g.sourcePath = std::string(source);
  std::unordered_set<std::string> nodeNames;
  bool sawHeader = false;
  int lineNo = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string_view line =
        text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    ++lineNo;
    LineParser p(source, lineNo, g, nodeNames, annotations);
    FBL_TRY(p.lex(line));
    if (!p.empty()) {
      if (!sawHeader) {
        FBL_TRY(p.header());
        sawHeader = true;
      } else {
        FBL_TRY(p.statement());
      }
    }
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  if (!sawHeader) return makeError("{}: empty graph text (expected 'graph \"name\" opset N')", source);
  return g;
}

}  // namespace fbl::ir
