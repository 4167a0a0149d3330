#include "compiler/layout/index_expr.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>

#include "compiler/layout/range_analysis.h"

namespace fbl::layout {

struct ExprNode {
  ExprKind kind = ExprKind::Const;
  int64_t c = 0;  // Const: value; Var: extent; Mul: factor; Div, Mod: divisor
  int var = -1;
  std::string name;
  std::vector<Expr> kids;
  size_t hash = 0;
  Range range;
  int64_t divisor = 1;
};

// The only place nodes are made: computes the hash and the cached range-analysis facts.
struct ExprBuild {
  static Expr make(ExprKind kind, int64_t c, int var, std::string name, std::vector<Expr> kids) {
    auto n = std::make_shared<ExprNode>();
    n->kind = kind;
    n->c = c;
    n->var = var;
    n->name = std::move(name);
    n->kids = std::move(kids);
    size_t h = static_cast<size_t>(kind) * 0x9e3779b97f4a7c15ull ^ std::hash<int64_t>()(c) ^
               (std::hash<int>()(var) << 7) ^ (std::hash<std::string>()(n->name) << 3);
    for (const Expr& k : n->kids) h = h * 1000003u ^ k.hash();
    n->hash = h;
    switch (kind) {
      case ExprKind::Const: n->range = {c, c}; n->divisor = c < 0 ? -c : c; break;
      case ExprKind::Var: n->range = {0, c > 1 ? c - 1 : 0}; n->divisor = c <= 1 ? 0 : 1; break;
      case ExprKind::Add:
        n->range = {0, 0};
        n->divisor = 0;
        for (const Expr& k : n->kids) {
          n->range = rangeOfSum(n->range, rangeOf(k));
          n->divisor = divisorOfSum(n->divisor, knownDivisor(k));
        }
        break;
      case ExprKind::Mul:
        n->range = rangeOfMul(rangeOf(n->kids[0]), c);
        n->divisor = divisorOfMul(knownDivisor(n->kids[0]), c);
        break;
      case ExprKind::Div: n->range = rangeOfDiv(rangeOf(n->kids[0]), c); n->divisor = 1; break;
      case ExprKind::Mod:
        n->range = rangeOfMod(rangeOf(n->kids[0]), c);
        n->divisor = divisorOfMod(knownDivisor(n->kids[0]), c);
        break;
    }
    return Expr(std::move(n));
  }
  static const ExprNode& node(const Expr& e) { return *e.n_; }
};

namespace {
const ExprNode& N(const Expr& e) { return ExprBuild::node(e); }
}  // namespace

Range rangeOf(const Expr& e) { return N(e).range; }
int64_t knownDivisor(const Expr& e) { return N(e).divisor; }

int64_t floorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floorModInt(int64_t a, int64_t b) { return a - floorDivInt(a, b) * b; }

Expr::Expr() : Expr(constant(0)) {}
Expr Expr::constant(int64_t v) { return ExprBuild::make(ExprKind::Const, v, -1, "", {}); }
Expr Expr::var(int index, int64_t extent, std::string name) {
  // Extent 0 (an empty tensor's dim) is allowed: nothing is ever evaluated there.
  FBL_ASSERT(index >= 0 && extent >= 0);
  if (name.empty()) name = "i" + std::to_string(index);
  return ExprBuild::make(ExprKind::Var, extent, index, std::move(name), {});
}

ExprKind Expr::kind() const { return n_->kind; }
int64_t Expr::value() const { FBL_ASSERT(kind() == ExprKind::Const); return n_->c; }
int Expr::varIndex() const { FBL_ASSERT(kind() == ExprKind::Var); return n_->var; }
int64_t Expr::extent() const { FBL_ASSERT(kind() == ExprKind::Var); return n_->c; }
const std::string& Expr::name() const { return n_->name; }
int64_t Expr::factor() const {
  FBL_ASSERT(kind() == ExprKind::Mul || kind() == ExprKind::Div || kind() == ExprKind::Mod);
  return n_->c;
}
const Expr& Expr::operand() const { FBL_ASSERT(n_->kids.size() == 1); return n_->kids[0]; }
const std::vector<Expr>& Expr::terms() const { FBL_ASSERT(kind() == ExprKind::Add); return n_->kids; }
size_t Expr::hash() const { return n_->hash; }

bool operator==(const Expr& a, const Expr& b) {
  if (a.n_ == b.n_) return true;
  const ExprNode &x = *a.n_, &y = *b.n_;
  return x.hash == y.hash && x.kind == y.kind && x.c == y.c && x.var == y.var &&
         x.name == y.name && x.kids == y.kids;
}

bool operator<(const Expr& a, const Expr& b) {
  const ExprNode &x = *a.n_, &y = *b.n_;
  if (x.kind != y.kind) return x.kind < y.kind;
  if (x.c != y.c) return x.c < y.c;
  if (x.var != y.var) return x.var < y.var;
  if (x.name != y.name) return x.name < y.name;
  return std::lexicographical_compare(x.kids.begin(), x.kids.end(), y.kids.begin(), y.kids.end());
}

// ---- builders -------------------------------------------------------------------------------

namespace {

// A term is atom * coefficient, the atom being neither a sum, a product nor a constant.
std::pair<Expr, int64_t> splitTerm(const Expr& t) {
  if (t.kind() == ExprKind::Mul) return {t.operand(), t.factor()};
  return {t, 1};
}

Expr makeTerm(const Expr& atom, int64_t coef) {
  return coef == 1 ? atom : ExprBuild::make(ExprKind::Mul, coef, -1, "", {atom});
}

}  // namespace

Expr sum(const std::vector<Expr>& input) {
  std::vector<Expr> flat;
  for (const Expr& t : input) {
    if (t.kind() == ExprKind::Add) flat.insert(flat.end(), t.terms().begin(), t.terms().end());
    else flat.push_back(t);
  }
  int64_t constant = 0;
  std::map<Expr, int64_t> coefs;  // ordered: like terms merge deterministically
  for (const Expr& t : flat) {
    if (t.isConst()) { constant += t.value(); continue; }
    auto [atom, coef] = splitTerm(t);
    coefs[atom] += coef;
  }
  std::vector<std::pair<Expr, int64_t>> terms;
  for (auto& [atom, coef] : coefs)
    if (coef != 0) terms.push_back({atom, coef});
  // Largest coefficient first reads like a row-major offset: b*1536 + s*64 + d.
  std::stable_sort(terms.begin(), terms.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<Expr> kids;
  for (auto& [atom, coef] : terms) kids.push_back(makeTerm(atom, coef));
  if (constant != 0 || kids.empty()) kids.push_back(Expr::constant(constant));
  if (kids.size() == 1) return kids[0];
  return ExprBuild::make(ExprKind::Add, 0, -1, "", std::move(kids));
}

Expr operator+(const Expr& a, const Expr& b) { return sum({a, b}); }
Expr operator+(const Expr& a, int64_t c) { return sum({a, Expr::constant(c)}); }

Expr operator*(const Expr& a, int64_t c) {
  if (c == 0) return Expr::constant(0);
  if (a.isConst()) return Expr::constant(a.value() * c);
  if (c == 1) return a;
  if (a.kind() == ExprKind::Mul) return a.operand() * (a.factor() * c);
  if (a.kind() == ExprKind::Add) {
    std::vector<Expr> scaled;
    for (const Expr& t : a.terms()) scaled.push_back(t * c);
    return sum(scaled);
  }
  return makeTerm(a, c);
}

Expr floorDiv(const Expr& a, int64_t d) {
  FBL_ASSERT(d > 0);
  if (d == 1) return a;
  if (a.isConst()) return Expr::constant(floorDivInt(a.value(), d));
  return ExprBuild::make(ExprKind::Div, d, -1, "", {a});
}

Expr floorMod(const Expr& a, int64_t d) {
  FBL_ASSERT(d > 0);
  if (d == 1) return Expr::constant(0);
  if (a.isConst()) return Expr::constant(floorModInt(a.value(), d));
  return ExprBuild::make(ExprKind::Mod, d, -1, "", {a});
}

// ---- walks ----------------------------------------------------------------------------------

int64_t eval(const Expr& e, std::span<const int64_t> vars) {
  const ExprNode& n = N(e);
  switch (n.kind) {
    case ExprKind::Const: return n.c;
    case ExprKind::Var: FBL_ASSERT(n.var < static_cast<int>(vars.size())); return vars[n.var];
    case ExprKind::Add: {
      int64_t s = 0;
      for (const Expr& k : n.kids) s += eval(k, vars);
      return s;
    }
    case ExprKind::Mul: return eval(n.kids[0], vars) * n.c;
    case ExprKind::Div: return floorDivInt(eval(n.kids[0], vars), n.c);
    case ExprKind::Mod: return floorModInt(eval(n.kids[0], vars), n.c);
  }
  return 0;
}

Expr substitute(const Expr& e, std::span<const Expr> byIndex) {
  const ExprNode& n = N(e);
  switch (n.kind) {
    case ExprKind::Const: return e;
    case ExprKind::Var: FBL_ASSERT(n.var < static_cast<int>(byIndex.size())); return byIndex[n.var];
    case ExprKind::Add: {
      std::vector<Expr> kids;
      for (const Expr& k : n.kids) kids.push_back(substitute(k, byIndex));
      return sum(kids);
    }
    case ExprKind::Mul: return substitute(n.kids[0], byIndex) * n.c;
    case ExprKind::Div: return floorDiv(substitute(n.kids[0], byIndex), n.c);
    case ExprKind::Mod: return floorMod(substitute(n.kids[0], byIndex), n.c);
  }
  return e;
}

int countDivMod(const Expr& e) {
  int own = (e.kind() == ExprKind::Div || e.kind() == ExprKind::Mod) ? 1 : 0;
  for (const Expr& k : N(e).kids) own += countDivMod(k);
  return own;
}

int countNodes(const Expr& e) {
  int own = 1;
  for (const Expr& k : N(e).kids) own += countNodes(k);
  return own;
}

bool usesVar(const Expr& e, int index) {
  if (e.kind() == ExprKind::Var) return e.varIndex() == index;
  for (const Expr& k : N(e).kids)
    if (usesVar(k, index)) return true;
  return false;
}

std::optional<AffineForm> affineForm(const Expr& e, size_t vars) {
  AffineForm f{std::vector<int64_t>(vars, 0), 0};
  // The builders keep sums flat, so an affine expression is a sum of constants, variables and
  // constant multiples of variables.
  const std::vector<Expr> terms = e.kind() == ExprKind::Add ? e.terms() : std::vector<Expr>{e};
  for (const Expr& t : terms) {
    const Expr* v = t.kind() == ExprKind::Var ? &t : t.kind() == ExprKind::Mul ? &t.operand() : nullptr;
    if (t.isConst()) {
      f.constant += t.value();
    } else if (v && v->kind() == ExprKind::Var && static_cast<size_t>(v->varIndex()) < vars) {
      f.coeffs[static_cast<size_t>(v->varIndex())] += t.kind() == ExprKind::Mul ? t.factor() : 1;
    } else {
      return std::nullopt;
    }
  }
  return f;
}

// ---- printers -------------------------------------------------------------------------------

namespace {

struct Printer {
  bool opencl = false;

  std::string lit(int64_t v) const { return std::to_string(v) + (opencl ? "u" : ""); }

  // prec: 1 inside a sum, 2 as the left operand of * / %.
  std::string print(const Expr& e, int prec) const {
    const ExprNode& n = N(e);
    switch (n.kind) {
      case ExprKind::Const: return (n.c < 0 && prec > 1) ? "(" + lit(n.c) + ")" : lit(n.c);
      case ExprKind::Var: return n.name;
      case ExprKind::Add: {
        std::string s = printSum(e);
        return prec > 1 ? "(" + s + ")" : s;
      }
      case ExprKind::Mul: {
        std::string s = print(n.kids[0], 2) + " * " + (n.c < 0 ? "(" + lit(n.c) + ")" : lit(n.c));
        return s;
      }
      case ExprKind::Div: return print(n.kids[0], 2) + " / " + lit(n.c);
      case ExprKind::Mod: return print(n.kids[0], 2) + " % " + lit(n.c);
    }
    return "";
  }

  // Negative terms print as subtractions after every positive one, so unsigned code never
  // goes below zero before the sum is complete (the builders put the constant last).
  std::string printSum(const Expr& e) const {
    std::vector<std::string> plus, minus;
    for (const Expr& t : e.terms()) {
      auto [atom, coef] = splitTerm(t);
      if (t.isConst()) {
        (t.value() < 0 ? minus : plus).push_back(lit(t.value() < 0 ? -t.value() : t.value()));
      } else if (coef < 0) {
        minus.push_back(coef == -1 ? print(atom, 2) : print(atom, 2) + " * " + lit(-coef));
      } else {
        plus.push_back(print(t, 1));
      }
    }
    std::string s = plus.empty() ? lit(0) : plus[0];
    for (size_t i = 1; i < plus.size(); ++i) s += " + " + plus[i];
    for (const std::string& m : minus) s += " - " + m;
    return s;
  }
};

constexpr int64_t kUintLimit = int64_t{1} << 32;

Status checkUnsigned(const Expr& e) {
  bool divides = e.kind() == ExprKind::Div || e.kind() == ExprKind::Mod;
  if (divides) {
    Range o = rangeOf(e.operand());
    if (o.lo < 0 || o.hi >= kUintLimit)
      return makeError("index expression '{}': operand of / or % may be outside [0, 2^32)", e.str());
  }
  for (const Expr& k : N(e).kids) FBL_TRY(checkUnsigned(k));
  return Status::success();
}

}  // namespace

std::string Expr::str() const { return Printer{false}.print(*this, 1); }

Result<std::string> toOpenCL(const Expr& e) {
  Range r = rangeOf(e);
  if (r.lo < 0 || r.hi >= kUintLimit)
    return makeError("index expression '{}' has range [{}, {}], not inside uint", e.str(), r.lo, r.hi);
  FBL_TRY(checkUnsigned(e));
  return Printer{true}.print(e, 1);
}

// ---- parser ---------------------------------------------------------------------------------

namespace {

struct SyntaxParser {
  std::string_view s;
  size_t p = 0;
  std::string err;

  void skip() { while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p; }
  bool eat(char c) {
    skip();
    if (p < s.size() && s[p] == c) { ++p; return true; }
    return false;
  }
  bool fail(std::string m) {
    if (err.empty()) err = m + " at column " + std::to_string(p + 1) + " of '" + std::string(s) + "'";
    return false;
  }

  bool sumExpr(SyntaxNode& out) {
    if (!product(out)) return false;
    for (;;) {
      skip();
      if (p >= s.size() || (s[p] != '+' && s[p] != '-')) return true;
      char op = s[p++];
      SyntaxNode rhs;
      if (!product(rhs)) return false;
      out = SyntaxNode{op, "", 0, {std::move(out), std::move(rhs)}};
    }
  }
  bool product(SyntaxNode& out) {
    if (!unary(out)) return false;
    for (;;) {
      skip();
      if (p >= s.size() || (s[p] != '*' && s[p] != '/' && s[p] != '%')) return true;
      char op = s[p++];
      SyntaxNode rhs;
      if (!unary(rhs)) return false;
      out = SyntaxNode{op, "", 0, {std::move(out), std::move(rhs)}};
    }
  }
  bool unary(SyntaxNode& out) {
    if (eat('-')) {
      SyntaxNode x;
      if (!unary(x)) return false;
      out = SyntaxNode{'-', "", 0, {SyntaxNode{}, std::move(x)}};
      return true;
    }
    return atom(out);
  }
  bool atom(SyntaxNode& out) {
    skip();
    if (eat('(')) {
      if (!sumExpr(out)) return false;
      return eat(')') || fail("expected ')'");
    }
    if (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) {
      int64_t v = 0;
      while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) v = v * 10 + (s[p++] - '0');
      if (p < s.size() && s[p] == 'u') ++p;  // accepts the OpenCL printer's literals
      out = SyntaxNode{0, "", v, {}};
      return true;
    }
    if (p < s.size() && (std::isalpha(static_cast<unsigned char>(s[p])) || s[p] == '_')) {
      size_t b = p;
      while (p < s.size() && (std::isalnum(static_cast<unsigned char>(s[p])) || s[p] == '_')) ++p;
      out = SyntaxNode{0, std::string(s.substr(b, p - b)), 0, {}};
      return true;
    }
    return fail("expected a number, a name or '('");
  }
};

Result<Expr> build(const SyntaxNode& n, std::span<const Expr> vars) {
  if (n.op == 0) {
    if (n.ident.empty()) return Expr::constant(n.number);
    for (const Expr& v : vars)
      if (v.name() == n.ident) return v;
    return makeError("index expression: unknown variable '{}'", n.ident);
  }
  FBL_ASSIGN(Expr a, build(n.kids[0], vars));
  FBL_ASSIGN(Expr b, build(n.kids[1], vars));
  switch (n.op) {
    case '+': return a + b;
    case '-': return a + b * -1;
  }
  if (n.op == '*' && a.isConst()) std::swap(a, b);
  if (!b.isConst()) return makeError("index expression: the right operand of '{}' must be a constant", n.op);
  if (n.op == '*') return a * b.value();
  if (b.value() <= 0) return makeError("index expression: divisor {} is not positive", b.value());
  return n.op == '/' ? floorDiv(a, b.value()) : floorMod(a, b.value());
}

}  // namespace

Result<SyntaxNode> parseSyntax(std::string_view text) {
  SyntaxParser ps;
  ps.s = text;
  SyntaxNode root;
  if (!ps.sumExpr(root)) return Error{ps.err};
  ps.skip();
  if (ps.p != text.size()) {
    ps.fail("unexpected text");
    return Error{ps.err};
  }
  return root;
}

Result<Expr> parseExpr(std::string_view text, std::span<const Expr> vars) {
  FBL_ASSIGN(SyntaxNode root, parseSyntax(text));
  return build(root, vars);
}

}  // namespace fbl::layout
