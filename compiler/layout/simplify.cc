#include "compiler/layout/simplify.h"

#include <array>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

#include "compiler/layout/range_analysis.h"

namespace fbl::layout {
namespace {

// ---- patterns -------------------------------------------------------------------------------

struct Pat {
  enum Kind { Wild, CWild, Lit, Add, Mul, Div, Mod } kind = Lit;
  int slot = 0;         // Wild: x y z -> 0 1 2; CWild: a..f -> 0..5
  int64_t lit = 0;
  std::vector<Pat> kids;  // Add: terms; Mul/Div/Mod: {operand, constant}
};

struct Binding {
  std::array<std::optional<Expr>, 3> x;
  std::array<std::optional<int64_t>, 6> c;
  // Condition helpers, named like the pattern letters.
  const Expr& X() const { return *x[0]; }
  const Expr& Y() const { return *x[1]; }
  int64_t A() const { return *c[0]; }
  int64_t B() const { return *c[1]; }
  int64_t C() const { return *c[2]; }
  int64_t D() const { return *c[3]; }
  int64_t E() const { return *c[4]; }
  int64_t F() const { return *c[5]; }
};

using Cont = std::function<bool(const Binding&)>;

Pat toPat(const SyntaxNode& n) {
  Pat p;
  if (n.op == 0) {
    if (n.ident.empty()) { p.kind = Pat::Lit; p.lit = n.number; return p; }
    char ch = n.ident[0];
    FBL_ASSERT(n.ident.size() == 1 && ((ch >= 'x' && ch <= 'z') || (ch >= 'a' && ch <= 'f')));
    p.kind = ch >= 'x' ? Pat::Wild : Pat::CWild;
    p.slot = ch >= 'x' ? ch - 'x' : ch - 'a';
    return p;
  }
  if (n.op == '+') {
    p.kind = Pat::Add;
    for (const SyntaxNode& k : n.kids) {
      Pat kp = toPat(k);
      if (kp.kind == Pat::Add) p.kids.insert(p.kids.end(), kp.kids.begin(), kp.kids.end());
      else p.kids.push_back(std::move(kp));
    }
    return p;
  }
  p.kind = n.op == '*' ? Pat::Mul : n.op == '/' ? Pat::Div : Pat::Mod;
  FBL_ASSERT(n.op == '*' || n.op == '/' || n.op == '%');
  p.kids = {toPat(n.kids[0]), toPat(n.kids[1])};
  return p;
}

bool matchConst(const Pat& p, int64_t v, const Binding& m, const Cont& k) {
  if (p.kind == Pat::Lit) return p.lit == v && k(m);
  FBL_ASSERT(p.kind == Pat::CWild);
  if (m.c[p.slot]) return *m.c[p.slot] == v && k(m);
  Binding b = m;
  b.c[p.slot] = v;
  return k(b);
}

bool match(const Pat& p, const Expr& e, const Binding& m, bool units, const Cont& k);

// Explicit pattern terms take distinct subject terms; a trailing wildcard takes the rest.
bool matchTerms(const std::vector<Pat>& pats, size_t pi, const std::vector<Expr>& terms,
                std::vector<bool>& used, const Binding& m, const Cont& k) {
  bool restWild = pats.back().kind == Pat::Wild;
  size_t explicitCount = restWild ? pats.size() - 1 : pats.size();
  if (pi == explicitCount) {
    std::vector<Expr> rest;
    for (size_t i = 0; i < terms.size(); ++i)
      if (!used[i]) rest.push_back(terms[i]);
    if (!restWild) return rest.empty() && k(m);
    return match(pats.back(), sum(rest), m, false, k);
  }
  for (size_t i = 0; i < terms.size(); ++i) {
    if (used[i]) continue;
    used[i] = true;
    bool ok = match(pats[pi], terms[i], m, true, [&](const Binding& b) {
      return matchTerms(pats, pi + 1, terms, used, b, k);
    });
    used[i] = false;
    if (ok) return true;
  }
  return false;
}

// `x + y` alone: x is every term divisible by some divisor present among the terms.
bool matchSplit(const Pat& p, const std::vector<Expr>& terms, const Binding& m, const Cont& k) {
  std::set<int64_t> divisors;
  for (const Expr& t : terms)
    if (knownDivisor(t) > 1) divisors.insert(knownDivisor(t));
  for (int64_t g : divisors) {
    std::vector<Expr> big, small;
    for (const Expr& t : terms) (provablyDivisible(t, g) ? big : small).push_back(t);
    if (big.empty() || small.empty()) continue;
    if (match(p.kids[0], sum(big), m, false, [&](const Binding& b) {
          return match(p.kids[1], sum(small), b, false, k);
        }))
      return true;
  }
  return false;
}

bool match(const Pat& p, const Expr& e, const Binding& m, bool units, const Cont& k) {
  switch (p.kind) {
    case Pat::Wild: {
      if (m.x[p.slot]) return *m.x[p.slot] == e && k(m);
      Binding b = m;
      b.x[p.slot] = e;
      return k(b);
    }
    case Pat::CWild:
    case Pat::Lit: return e.isConst() && matchConst(p, e.value(), m, k);
    case Pat::Add: {
      std::vector<Expr> terms = e.kind() == ExprKind::Add ? e.terms() : std::vector<Expr>{e};
      bool allWild = true;
      for (const Pat& t : p.kids) allWild = allWild && t.kind == Pat::Wild;
      if (allWild && p.kids.size() == 2) return matchSplit(p, terms, m, k);
      std::vector<bool> used(terms.size(), false);
      return matchTerms(p.kids, 0, terms, used, m, k);
    }
    case Pat::Mul:
    case Pat::Div:
    case Pat::Mod: {
      ExprKind want = p.kind == Pat::Mul ? ExprKind::Mul : p.kind == Pat::Div ? ExprKind::Div : ExprKind::Mod;
      if (e.kind() == want &&
          match(p.kids[0], e.operand(), m, units, [&](const Binding& b) {
            return matchConst(p.kids[1], e.factor(), b, k);
          }))
        return true;
      // The unit forms: a term t is t * 1 and t / 1 (never t % 1, which is 0).
      if (units && p.kind != Pat::Mod && e.kind() != want)
        return matchConst(p.kids[1], 1, m, [&](const Binding& b) { return match(p.kids[0], e, b, units, k); });
      return false;
    }
  }
  return false;
}

// Builds the rewrite; constant sub-patterns such as (a / b) fold through the builders.
Expr instantiate(const Pat& p, const Binding& m) {
  switch (p.kind) {
    case Pat::Wild: return *m.x[p.slot];
    case Pat::CWild: return Expr::constant(*m.c[p.slot]);
    case Pat::Lit: return Expr::constant(p.lit);
    case Pat::Add: {
      std::vector<Expr> terms;
      for (const Pat& t : p.kids) terms.push_back(instantiate(t, m));
      return sum(terms);
    }
    default: break;
  }
  Expr l = instantiate(p.kids[0], m), r = instantiate(p.kids[1], m);
  if (p.kind == Pat::Mul) {
    if (l.isConst()) std::swap(l, r);
    FBL_ASSERT(r.isConst());
    return l * r.value();
  }
  FBL_ASSERT(r.isConst() && r.value() > 0);
  return p.kind == Pat::Div ? floorDiv(l, r.value()) : floorMod(l, r.value());
}

// ---- the rule table -------------------------------------------------------------------------

// A side condition may bind further constants for the rewrite (e.g. c = divisor(x)).
using Cond = bool (*)(Binding&);

struct Rule {
  const char* name;
  const char* pattern;
  const char* rewrite;
  const char* condition;  // the side condition as documented
  Cond holds;
};

bool in(const Expr& e, int64_t lo, int64_t hi) { return rangeOf(e).within(lo, hi); }
int64_t g(const Expr& e) { return knownDivisor(e); }
bool divides(int64_t d, int64_t n) { return d != 0 && n % d == 0; }

// clang-format off
const Rule kRules[] = {
  // name               pattern                               rewrite                      side condition
  {"mod-small",         "x % a",                              "x",                         "0 <= x < a",                 [](Binding& m) { return in(m.X(), 0, m.A()); }},
  {"div-of-mul",        "x * a / b",                          "x * (a / b)",               "a % b == 0",                 [](Binding& m) { return m.A() % m.B() == 0; }},
  {"div-of-mul-known",  "x * a / b",                          "x / c * (a * c / b)",       "c = divisor(x) > 1, a*c % b == 0", [](Binding& m) { m.c[2] = g(m.X()); return m.C() > 1 && m.A() * m.C() % m.B() == 0; }},
  {"div-of-mul-coarse", "x * a / b",                          "x / (b / a)",               "a > 0, b % a == 0",          [](Binding& m) { return m.A() > 0 && m.B() % m.A() == 0; }},
  {"mod-of-mul",        "x * a % b",                          "0",                         "a % b == 0",                 [](Binding& m) { return m.A() % m.B() == 0; }},
  {"mod-of-mul-coarse", "x * a % b",                          "x % (b / a) * a",           "a > 0, b % a == 0",          [](Binding& m) { return m.A() > 0 && m.B() % m.A() == 0; }},
  {"div-of-div",        "x / a / b",                          "x / (a * b)",               "true",                       [](Binding&) { return true; }},
  {"mod-of-mod",        "x % a % b",                          "x % b",                     "a % b == 0",                 [](Binding& m) { return m.A() % m.B() == 0; }},
  {"div-of-mod",        "x % a / b",                          "x / b % (a / b)",           "a % b == 0",                 [](Binding& m) { return m.A() % m.B() == 0; }},
  {"div-split",         "(x + y) / a",                        "x / a + y / a",             "x % a == 0 (known divisor)", [](Binding& m) { return provablyDivisible(m.X(), m.A()); }},
  {"mod-split",         "(x + y) % a",                        "y % a",                     "x % a == 0 (known divisor)", [](Binding& m) { return provablyDivisible(m.X(), m.A()); }},
  {"div-drop-small",    "(x + y) / a",                        "x / a",                     "g = divisor(x), a % g == 0, 0 <= y < g", [](Binding& m) { return divides(g(m.X()), m.A()) && in(m.Y(), 0, g(m.X())); }},
  {"mod-drop-small",    "(x + y) % a",                        "x % a + y",                 "g = divisor(x), a % g == 0, 0 <= y < g", [](Binding& m) { return divides(g(m.X()), m.A()) && in(m.Y(), 0, g(m.X())); }},
  {"merge-div",         "x / a % b * c + x / d * e + z",      "x / a * c + z",             "d == a*b, e == c*b",         [](Binding& m) { return m.D() == m.A() * m.B() && m.E() == m.C() * m.B(); }},
  {"merge-mod",         "x / a % b * c + x / d % e * f + z",  "x / a % (b * e) * c + z",   "d == a*b, f == c*b",         [](Binding& m) { return m.D() == m.A() * m.B() && m.F() == m.C() * m.B(); }},
};
// clang-format on

struct CompiledRule {
  const Rule* rule;
  Pat lhs, rhs;
  ExprKind root;
};

const std::vector<CompiledRule>& compiledRules() {
  static const std::vector<CompiledRule> rules = [] {
    std::vector<CompiledRule> out;
    for (const Rule& r : kRules) {
      auto lhs = parseSyntax(r.pattern);
      auto rhs = parseSyntax(r.rewrite);
      FBL_ASSERT(lhs.ok() && rhs.ok());
      Pat l = toPat(*lhs);
      ExprKind root = l.kind == Pat::Add ? ExprKind::Add : l.kind == Pat::Div ? ExprKind::Div : ExprKind::Mod;
      FBL_ASSERT(l.kind == Pat::Add || l.kind == Pat::Div || l.kind == Pat::Mod);
      out.push_back({&r, std::move(l), toPat(*rhs), root});
    }
    return out;
  }();
  return rules;
}

std::optional<Expr> tryRule(const CompiledRule& r, const Expr& e) {
  if (e.kind() != r.root) return std::nullopt;
  std::optional<Expr> result;
  match(r.lhs, e, Binding{}, false, [&](const Binding& matched) {
    Binding b = matched;
    if (!r.rule->holds(b)) return false;
    Expr out = instantiate(r.rhs, b);
    if (out == e) return false;  // no progress: keep looking
    result = out;
    return true;
  });
  return result;
}

struct ExprHash {
  size_t operator()(const Expr& e) const { return e.hash(); }
};

struct Simplifier {
  SimplifyStats* stats = nullptr;
  int budget = 20000;
  bool ranOut = false;
  std::unordered_map<Expr, Expr, ExprHash> memo;

  Expr run(const Expr& e) {
    if (e.kind() == ExprKind::Const) return e;
    if (auto it = memo.find(e); it != memo.end()) return it->second;
    Expr out = rewrite(rebuild(e));
    memo.emplace(e, out);
    return out;
  }

  Expr rebuild(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::Const:
      case ExprKind::Var: return e;
      case ExprKind::Add: {
        std::vector<Expr> terms;
        for (const Expr& t : e.terms()) terms.push_back(run(t));
        return sum(terms);
      }
      case ExprKind::Mul: return run(e.operand()) * e.factor();
      case ExprKind::Div: return floorDiv(run(e.operand()), e.factor());
      case ExprKind::Mod: return floorMod(run(e.operand()), e.factor());
    }
    return e;
  }

  Expr rewrite(const Expr& e) {
    Range r = rangeOf(e);
    if (r.isPoint()) return Expr::constant(r.lo);
    if (budget <= 0) {
      ranOut = true;
      if (stats) stats->budgetExhausted++;
      return e;
    }
    // A rewrite whose fully simplified result costs more divisions and modulos than the node
    // it replaces is dropped in favour of the next rule: every rule is an identity, but not
    // every identity pays off in every context.
    const int cost = countDivMod(e);
    for (const CompiledRule& rule : compiledRules()) {
      std::optional<Expr> out = tryRule(rule, e);
      if (!out) continue;
      --budget;
      Expr result = run(*out);
      if (countDivMod(result) > cost) continue;
      if (stats) stats->fired[rule.rule->name]++;
      return result;
    }
    return e;
  }
};

}  // namespace

Expr simplify(const Expr& e, SimplifyStats* stats) {
  // A compile asks for the same expressions again and again (every layer has the same layouts
  // and shapes), so whole results are kept across calls. Only those that did not run out of
  // budget: those are a function of `e` alone. Calls that count rule firings always run.
  constexpr size_t kMaxRemembered = size_t{1} << 16;
  thread_local std::unordered_map<Expr, Expr, ExprHash> remembered;
  if (!stats)
    if (auto it = remembered.find(e); it != remembered.end()) return it->second;
  Simplifier s;
  s.stats = stats;
  Expr out = s.run(e);
  if (!s.ranOut) {
    if (remembered.size() >= kMaxRemembered) remembered.clear();
    remembered.emplace(e, out);
  }
  return out;
}

std::vector<RuleInfo> simplifierRules() {
  std::vector<RuleInfo> out;
  for (const Rule& r : kRules) out.push_back({r.name, r.pattern, r.rewrite, r.condition});
  return out;
}

Result<Expr> applyRuleAtRoot(const std::string& name, const Expr& e) {
  for (const CompiledRule& r : compiledRules()) {
    if (name != r.rule->name) continue;
    if (auto out = tryRule(r, e)) return *out;
    return makeError("rule {} does not apply to {}", name, e.str());
  }
  return makeError("no rule named {}", name);
}

}  // namespace fbl::layout
