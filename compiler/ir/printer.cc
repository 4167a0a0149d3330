#include "compiler/ir/printer.h"

#include <cmath>

#include <fmt/format.h>

#include "runtime/fnv1a64.h"

namespace fbl::ir {

namespace {

bool isBareChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '-' || c == '/';
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// A bare word, or a quoted string when the name would not lex as one.
std::string word(std::string_view s) {
  bool bare = !s.empty();
  for (char c : s) bare = bare && isBareChar(c);
  return bare ? std::string(s) : quoted(s);
}

// Shortest text that reads back to the same float, always with a '.' or an exponent so that
// the parser tells it from an integer.
std::string floatText(double v, bool isDouble) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string s = isDouble ? fmt::format("{}", v) : fmt::format("{}", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string tensorData(const Tensor& t) {
  std::string out = "[";
  const bool isF = isFloat(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) out += ',';
    double v = t.at(i);
    if (t.dtype() == DType::Bool) {
      out += v != 0 ? "true" : "false";
    } else if (isF) {
      out += floatText(v, t.dtype() == DType::F64);
    } else if (t.dtype() == DType::I64) {
      out += fmt::format("{}", t.data<int64_t>()[i]);  // exact beyond 2^53
    } else {
      out += fmt::format("{}", static_cast<int64_t>(v));
    }
  }
  return out + "]";
}

// "[1,2]" when small enough, else "hash:..." (not parseable: it only identifies the data).
std::string tensorContents(const Tensor& t, int64_t limit) {
  if (limit >= 0 && t.numel() > limit) return "hash:" + tensorHash(t);
  return tensorData(t);
}

std::string tensorType(const Tensor& t) {
  return fmt::format("{}{}", dtypeName(t.dtype()), shapeToString(t.shape()));
}

std::string attrText(const AttrValue& a, const PrintOptions& opts) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return fmt::format("{}", v);
        } else if constexpr (std::is_same_v<T, float>) {
          return floatText(v, false);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quoted(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return fmt::format("[{}]", fmt::join(v, ","));
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          if (v.empty()) return "f[]";  // an empty list says its element type
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + floatText(v[i], false);
          return out + "]";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          if (v.empty()) return "s[]";
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + quoted(v[i]);
          return out + "]";
        } else {
          return fmt::format("tensor {} {}", tensorType(v), tensorContents(v, opts.maxInlineElements));
        }
      },
      a);
}

std::string valueRef(const Graph& g, ValueId v) {
  if (v == kNoValue) return "_";
  return printValueName(g.values[v].name);
}

// " : f32[2]", or nothing when nothing is known.
std::string typeSuffix(const Value& v) {
  std::string ty = printType(v);
  return ty.empty() ? ty : " : " + ty;
}

// " <text>" when the annotator has something to say, else nothing.
std::string bracketed(std::string text) { return text.empty() ? text : " <" + text + ">"; }

std::string valueAnnotation(const Graph& g, ValueId v, const PrintOptions& opts) {
  return opts.annotator && v != kNoValue ? bracketed(opts.annotator->value(g, v)) : std::string();
}

std::string_view phasePrefix(Phase p) {
  switch (p) {
    case Phase::Forward: return "";
    case Phase::Backward: return "bwd ";
    case Phase::Optimizer: return "opt ";
  }
  return "";
}

}  // namespace

std::string printValueName(std::string_view name) { return "%" + word(name); }

std::string printString(std::string_view s) { return quoted(s); }

std::string printType(const Value& v) {
  if (v.shapeKnown) return fmt::format("{}{}", dtypeName(v.dtype), shapeToString(v.shape));
  if (v.dtype != DType::Undefined) return std::string(dtypeName(v.dtype));
  return "";
}

std::string tensorHash(const Tensor& t) {
  int32_t dt = static_cast<int32_t>(t.dtype());
  uint64_t h = fnv1a64(&dt, sizeof dt);
  for (int64_t d : t.shape()) h = fnv1a64(&d, sizeof d, h);
  h = fnv1a64(t.raw(), t.nbytes(), h);
  return fmt::format("{:016x}", h);
}

std::string printNode(const Graph& g, const Node& n, const PrintOptions& opts) {
  // Annotations are asked by id: only for a node of g itself, not a copy.
  const bool ofGraph = !g.nodes.empty() && &n >= g.nodes.data() && &n < g.nodes.data() + g.nodes.size();
  const Annotator* annotator = ofGraph ? opts.annotator : nullptr;
  const NodeId id = ofGraph ? static_cast<NodeId>(&n - g.nodes.data()) : kNoNode;
  std::string out;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (i) out += ", ";
    out += valueRef(g, n.outputs[i]);
    if (n.outputs[i] != kNoValue) out += typeSuffix(g.values[n.outputs[i]]);
    if (annotator && n.outputs[i] != kNoValue) out += bracketed(annotator->value(g, n.outputs[i]));
  }
  if (!n.outputs.empty()) out += " = ";
  out += word(n.op);
  out += '(';
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    out += (i ? ", " : "") + valueRef(g, n.inputs[i]);
    if (annotator && n.inputs[i] != kNoValue) out += bracketed(annotator->input(g, id, static_cast<int>(i)));
  }
  out += ')';
  if (!n.attrs.empty()) {
    out += " {";
    bool first = true;
    for (const auto& [k, v] : n.attrs) {
      out += (first ? "" : ", ") + word(k) + "=" + attrText(v, opts);
      first = false;
    }
    out += '}';
  }
  if (opts.nodeNames) out += " @" + word(n.name);
  if (annotator) out += bracketed(annotator->node(g, id));
  return out;
}

std::string printGraph(const Graph& g, const PrintOptions& opts) {
  std::string out = fmt::format("graph {} opset {}\n", quoted(g.name), g.opset);
  for (ValueId v : g.inputs)
    out += fmt::format("  input {}{}{}\n", valueRef(g, v), typeSuffix(g.values[v]), valueAnnotation(g, v, opts));

  // Parameters and constants that no node produces, in id order; unused constants (left over
  // from folding) are skipped, parameters never are.
  std::vector<bool> live = g.liveValues();
  for (ValueId id = 0; id < static_cast<ValueId>(g.values.size()); ++id) {
    const Value& v = g.values[id];
    if (v.producer != kNoNode) continue;
    if (v.kind == ValueKind::Initializer) {
      out += fmt::format("  init {}{}", valueRef(g, id), typeSuffix(v));
      if (v.external)
        out += fmt::format(" external({}, offset={}, length={})", quoted(v.external->location),
                           v.external->offset, v.external->length);
      out += valueAnnotation(g, id, opts);
      if (v.data && opts.initializerData)
        out += " = " + tensorContents(*v.data, opts.maxInlineElements);
      out += '\n';
    } else if (v.kind == ValueKind::Constant && live[id]) {
      out += fmt::format("  const {}{}{}", valueRef(g, id), typeSuffix(v), valueAnnotation(g, id, opts));
      if (v.data) out += " = " + tensorContents(*v.data, opts.maxInlineElements);
      out += '\n';
    }
  }
  for (const Node& n : g.nodes) {
    if (n.dead) continue;
    out += fmt::format("  {}{}\n", phasePrefix(n.phase), printNode(g, n, opts));
  }
  for (ValueId v : g.outputs) out += fmt::format("  output {}\n", valueRef(g, v));
  return out;
}

}  // namespace fbl::ir
