#include "compiler/layout/index_map.h"

#include <algorithm>
#include <map>

#include "compiler/layout/range_analysis.h"
#include "compiler/layout/simplify.h"

namespace fbl::layout {

IndexMap::IndexMap(Shape domain, std::vector<Expr> outputs, Shape codomain)
    : domain_(std::move(domain)), codomain_(std::move(codomain)), outputs_(std::move(outputs)) {
  FBL_ASSERT(outputs_.size() == codomain_.size());
}

std::vector<Expr> IndexMap::vars(const Shape& domain) {
  std::vector<Expr> v;
  for (size_t d = 0; d < domain.size(); ++d) v.push_back(Expr::var(static_cast<int>(d), domain[d]));
  return v;
}

IndexMap IndexMap::identity(const Shape& shape) { return IndexMap(shape, vars(shape), shape); }

std::vector<int64_t> IndexMap::apply(std::span<const int64_t> index) const {
  std::vector<int64_t> out;
  out.reserve(outputs_.size());
  for (const Expr& e : outputs_) out.push_back(eval(e, index));
  return out;
}

IndexMap IndexMap::simplified() const {
  std::vector<Expr> outs;
  for (const Expr& e : outputs_) outs.push_back(simplify(e));
  return IndexMap(domain_, std::move(outs), codomain_);
}

int IndexMap::countDivMod() const {
  int n = 0;
  for (const Expr& e : outputs_) n += layout::countDivMod(e);
  return n;
}

bool operator==(const IndexMap& a, const IndexMap& b) {
  return a.domain_ == b.domain_ && a.codomain_ == b.codomain_ && a.outputs_ == b.outputs_;
}

std::string IndexMap::str() const {
  std::string s = ir::shapeToString(domain_) + " -> " + ir::shapeToString(codomain_) + ": (";
  for (size_t i = 0; i < outputs_.size(); ++i) s += (i ? ", " : "") + outputs_[i].str();
  return s + ")";
}

Result<IndexMap> compose(const IndexMap& outer, const IndexMap& inner) {
  if (inner.codomain() != outer.domain())
    return makeError("compose: inner map lands in {} but the outer map reads {}",
                     ir::shapeToString(inner.codomain()), ir::shapeToString(outer.domain()));
  std::vector<Expr> outs;
  for (const Expr& e : outer.outputs()) outs.push_back(substitute(e, inner.outputs()));
  return IndexMap(inner.domain(), std::move(outs), outer.codomain());
}

// ---- inverse by digit analysis -------------------------------------------------------------

namespace {

// A digit of variable `var`: (var / a) % b, holding `radix` values, times `coef` in output `out`.
struct Digit {
  int var = -1;
  int64_t a = 1;
  int64_t b = 0;  // 0: no modulo
  int64_t radix = 1;
  int64_t coef = 1;
  int out = 0;
};

bool asDigit(const Expr& atom, Digit& d) {
  Expr x = atom;
  d.a = 1;
  d.b = 0;
  if (x.kind() == ExprKind::Mod) {
    d.b = x.factor();
    x = x.operand();
  }
  if (x.kind() == ExprKind::Div) {
    d.a = x.factor();
    x = x.operand();
  }
  if (x.kind() != ExprKind::Var) return false;
  d.var = x.varIndex();
  Range r = rangeOf(atom);
  if (r.lo != 0) return false;
  d.radix = r.hi + 1;
  return true;
}

}  // namespace

Result<IndexMap> IndexMap::inverse() const {
  IndexMap s = simplified();
  std::vector<Digit> digits;
  std::vector<int64_t> base(outputs_.size(), 0);
  for (size_t o = 0; o < s.outputs_.size(); ++o) {
    const Expr& e = s.outputs_[o];
    std::vector<Expr> terms = e.kind() == ExprKind::Add ? e.terms() : std::vector<Expr>{e};
    for (const Expr& t : terms) {
      if (t.isConst()) { base[o] = t.value(); continue; }
      Digit d;
      d.out = static_cast<int>(o);
      Expr atom = t.kind() == ExprKind::Mul ? t.operand() : t;
      d.coef = t.kind() == ExprKind::Mul ? t.factor() : 1;
      if (!asDigit(atom, d) || d.coef <= 0)
        return makeError("inverse of {}: output {} term '{}' is not a digit of one index", str(), o, t.str());
      digits.push_back(d);
    }
  }
  // Every variable's digits must tile its mixed-radix representation exactly.
  std::vector<Expr> in = vars(codomain_);
  std::vector<Expr> outs;
  for (size_t v = 0; v < domain_.size(); ++v) {
    std::vector<Digit> mine;
    for (const Digit& d : digits)
      if (d.var == static_cast<int>(v)) mine.push_back(d);
    std::sort(mine.begin(), mine.end(), [](const Digit& x, const Digit& y) { return x.a < y.a; });
    int64_t next = 1;
    std::vector<Expr> parts;
    for (const Digit& d : mine) {
      if (d.a != next || next >= domain_[v])
        return makeError("inverse of {}: the digits of i{} overlap or leave a gap", str(), v);
      next = d.b == 0 ? domain_[v] : d.a * d.b;
      // The digit's value, read back out of its output coordinate.
      int64_t above = 0;  // coefficient of the next digit in the same output, 0 if none
      for (const Digit& o : digits)
        if (o.out == d.out && o.coef > d.coef && (above == 0 || o.coef < above)) above = o.coef;
      for (const Digit& o : digits)
        if (o.out == d.out && o.coef == d.coef && (o.var != d.var || o.a != d.a))
          return makeError("inverse of {}: two digits share coefficient {} in output {}", str(), d.coef, d.out);
      if (above != 0 && (above % d.coef != 0 || above < d.coef * d.radix))
        return makeError("inverse of {}: digits overlap in output {}", str(), d.out);
      Expr value = floorDiv(in[d.out] + (-base[d.out]), d.coef);
      if (above != 0) value = floorMod(value, above / d.coef);
      parts.push_back(value * d.a);
    }
    if (domain_[v] > 1 && next < domain_[v])
      return makeError("inverse of {}: i{} does not reach every output (not injective)", str(), v);
    outs.push_back(sum(parts));
  }
  return IndexMap(codomain_, std::move(outs), domain_).simplified();
}

}  // namespace fbl::layout
