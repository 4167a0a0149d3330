// Index expressions: the integer arithmetic a layout or a movement op turns into when an
// element's address is computed. Everything here is a value over a few variables, each an
// index in [0, extent), combined by
//
//   constants, n-ary sums, multiplication by a constant, floor division and floor modulo by a
//   positive constant.
//
// Nodes are immutable and shared (value semantics: copying an Expr copies a pointer). The
// builders (operator+, operator*, floorDiv, floorMod) keep a light normal form so that equal
// maps tend to compare equal without the simplifier:
//   - constants fold: (6 / 4) is 1, x * 1 is x, x / 1 is x, x % 1 is 0;
//   - sums are flat and sorted: (a + (b + 3)) + 2 is one Add of {a, b, 5}; like terms merge
//     (x*2 + x*3 is x*5); the constant is printed last;
//   - a product of a sum distributes ((x + y) * 4 is x*4 + y*4), nested products multiply.
// Division and modulo are floor-based (so -1 / 4 == -1 and -1 % 4 == 3); layouts only produce
// non-negative operands, and the OpenCL printer refuses anything else, since it emits unsigned
// arithmetic (DEPS.md pitfall 6: the device compiler folds udiv/urem but not sdiv/srem).
//
// Example: a [4, 8, 16] row-major tensor reshaped to [4, 128] reads element (b, f) at
//   ((b*128 + f) / 16 / 8) * 128 + ((b*128 + f) / 16 % 8) * 16 + (b*128 + f) % 16
// which simplify() (simplify.h) turns into b*128 + f.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/result.h"

namespace fbl::layout {

enum class ExprKind : uint8_t { Const, Var, Add, Mul, Div, Mod };

struct ExprNode;

class Expr {
 public:
  Expr();  // the constant 0
  static Expr constant(int64_t v);
  // A loop index in [0, extent) (extent 0: an empty dim). Variables are identified by `index`
  // (a map's input position), `extent` and `name`; the name defaults to "i<index>" and is what
  // the printers write.
  static Expr var(int index, int64_t extent, std::string name = "");

  ExprKind kind() const;
  bool isConst() const { return kind() == ExprKind::Const; }
  bool isConst(int64_t v) const { return isConst() && value() == v; }
  int64_t value() const;                   // Const
  int varIndex() const;                    // Var
  int64_t extent() const;                  // Var
  const std::string& name() const;         // Var
  int64_t factor() const;                  // Mul: the constant; Div, Mod: the divisor
  const Expr& operand() const;             // Mul, Div, Mod
  const std::vector<Expr>& terms() const;  // Add (at least two, constant last if any)
  size_t hash() const;

  // Structural equality and a total order (used to sort sums).
  friend bool operator==(const Expr& a, const Expr& b);
  friend bool operator!=(const Expr& a, const Expr& b) { return !(a == b); }
  friend bool operator<(const Expr& a, const Expr& b);

  // C syntax with the fewest parentheses ("i0 / 64 % 8 * 64 + i0 % 64"); parseExpr reads it.
  std::string str() const;

 private:
  explicit Expr(std::shared_ptr<const ExprNode> n) : n_(std::move(n)) {}
  friend struct ExprBuild;
  std::shared_ptr<const ExprNode> n_;
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator+(const Expr& a, int64_t c);
Expr operator*(const Expr& a, int64_t c);
Expr sum(const std::vector<Expr>& terms);
Expr floorDiv(const Expr& a, int64_t divisor);  // divisor > 0
Expr floorMod(const Expr& a, int64_t divisor);  // divisor > 0

int64_t floorDivInt(int64_t a, int64_t b);
int64_t floorModInt(int64_t a, int64_t b);

// Value at a point: vars[i] is the value of the variable with index i.
int64_t eval(const Expr& e, std::span<const int64_t> vars);
// Replaces every variable of index i by byIndex[i] (rebuilt through the builders).
Expr substitute(const Expr& e, std::span<const Expr> byIndex);
// Integer divisions and modulos as printed (a shared subtree counts once per occurrence).
int countDivMod(const Expr& e);
// All nodes as printed, for "did it get smaller" checks.
int countNodes(const Expr& e);
// Does variable `index` occur in e?
bool usesVar(const Expr& e, int index);

// e as constant + sum of coeffs[i] * variable i (no division or modulo left), when it is one.
struct AffineForm {
  std::vector<int64_t> coeffs;  // one per variable 0..vars-1
  int64_t constant = 0;
};
std::optional<AffineForm> affineForm(const Expr& e, size_t vars);

// OpenCL C with unsigned arithmetic: literals get a `u` suffix, negative constants and
// coefficients become subtractions. Fails when a division operand or the value itself may be
// negative or may not fit in 32 bits (range analysis decides).
Result<std::string> toOpenCL(const Expr& e);

// Reads the str() syntax: integers, identifiers naming `vars` (by name), + - * / % and
// parentheses; a right operand of *, / and % must be a constant expression.
Result<Expr> parseExpr(std::string_view text, std::span<const Expr> vars);

// The parse tree behind parseExpr, shared with the simplifier's rule patterns.
struct SyntaxNode {
  char op = 0;  // 0: leaf; '+', '-', '*', '/', '%'
  std::string ident;  // leaf: identifier, or empty for a number
  int64_t number = 0;
  std::vector<SyntaxNode> kids;
};
Result<SyntaxNode> parseSyntax(std::string_view text);

}  // namespace fbl::layout
