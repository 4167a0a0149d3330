// Gradient rules: one table row per forward op, tinygrad-style. A rule reads the forward node
// and the gradient of each of its outputs, and returns the gradient of each input it was asked
// for, emitting backward nodes through a GradBuilder.
//
// The builder knows every static shape, so each helper sets its output's dtype and shape as it
// emits (no inference pass afterwards), and it skips no-op steps: reducing a gradient to the
// shape it already has, reshaping to the same shape, transposing back through a forward
// Transpose (the gradient of `x @ W^T` reads W, not a transposed copy of it).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::autodiff {

using Attrs = std::map<std::string, ir::AttrValue>;

class GradBuilder {
 public:
  explicit GradBuilder(ir::Graph& g);

  ir::Graph& graph() { return g_; }
  // Copies: the value vector grows while rules emit, so references would dangle.
  ir::Shape shape(ir::ValueId v) const { return g_.values[v].shape; }
  ir::DType dtype(ir::ValueId v) const { return g_.values[v].dtype; }
  int64_t rank(ir::ValueId v) const { return static_cast<int64_t>(g_.values[v].shape.size()); }
  // The compile-time contents of a constant or initializer, nullptr when computed at run time.
  const ir::Tensor* constData(ir::ValueId v) const;

  // Names the nodes and values emitted next after this forward node.
  void setOrigin(const ir::Node& fwd);
  void setPhase(ir::Phase p) { phase_ = p; }

  // One node with one output of the given type.
  ir::ValueId emit(std::string_view op, std::vector<ir::ValueId> inputs, ir::DType dt,
                   ir::Shape shape, Attrs attrs = {});
  // Several outputs; an entry with DType::Undefined is left out (kNoValue).
  struct OutType {
    ir::DType dtype = ir::DType::Undefined;
    ir::Shape shape;
    std::string name;  // the value's name; empty: derived from the node's
  };
  std::vector<ir::ValueId> emitMulti(std::string_view op, std::vector<ir::ValueId> inputs,
                                     const std::vector<OutType>& outs, Attrs attrs = {});

  // Deduplicated constants: a 1-D i64 tensor (shapes, axes, perms) and a rank-0 float.
  ir::ValueId ints(const std::vector<int64_t>& v);
  ir::ValueId scalar(double v, ir::DType dt);

  // ONNX building blocks; elementwise ones broadcast.
  ir::ValueId add(ir::ValueId a, ir::ValueId b);
  ir::ValueId sub(ir::ValueId a, ir::ValueId b);
  ir::ValueId mul(ir::ValueId a, ir::ValueId b);
  ir::ValueId div(ir::ValueId a, ir::ValueId b);
  ir::ValueId neg(ir::ValueId a);
  ir::ValueId matmul(ir::ValueId a, ir::ValueId b);
  ir::ValueId transpose(ir::ValueId v, const std::vector<int64_t>& perm);
  ir::ValueId swapLastTwo(ir::ValueId v);  // the matrix transpose of a batch of matrices
  ir::ValueId reshape(ir::ValueId v, const ir::Shape& to);
  ir::ValueId expand(ir::ValueId v, const ir::Shape& to);
  // Sums a broadcast gradient back to the shape of the operand that was broadcast.
  ir::ValueId reduceSumTo(ir::ValueId v, const ir::Shape& to);

 private:
  ir::ValueId binary(std::string_view op, ir::ValueId a, ir::ValueId b);
  std::string nodeName(std::string_view op);

  ir::Graph& g_;
  ir::Phase phase_ = ir::Phase::Backward;
  std::string origin_;
  std::unordered_set<std::string> nodeNames_;
  std::map<std::vector<int64_t>, ir::ValueId> ints_;
  std::map<std::pair<double, int>, ir::ValueId> scalars_;
  // Transposes and reshapes of one value are shared by every rule that asks for them.
  std::map<std::pair<ir::ValueId, std::vector<int64_t>>, ir::ValueId> transposes_, reshapes_;
};

struct GradContext {
  GradBuilder& b;
  ir::Node fwd;                  // a copy: the node vector grows while rules emit
  std::vector<ir::ValueId> dy;   // per forward output; kNoValue when no gradient reaches it
  std::vector<bool> wants;       // per forward input: its gradient is needed

  ir::ValueId in(size_t i) const { return fwd.input(i); }
  ir::ValueId out(size_t i) const { return i < fwd.outputs.size() ? fwd.outputs[i] : ir::kNoValue; }
  // "model.onnx: node 'x' (Op): <msg>".
  Error fail(std::string_view msg) const;
};

// One gradient per forward input (kNoValue where none is wanted).
using GradFn = Result<std::vector<ir::ValueId>> (*)(GradContext&);

struct GradRule {
  std::string_view op;
  GradFn fn;
};

// nullptr when the op has no gradient rule.
const GradRule* findGradRule(std::string_view op);

// The per-area rows of the table.
std::vector<GradRule> mathGradRules();   // grad_rules_math.cc: arithmetic, MatMul, Gemm, Conv
std::vector<GradRule> shapeGradRules();  // grad_rules_shape.cc: movement ops, Gather, Where
std::vector<GradRule> nnGradRules();     // grad_rules_nn.cc: activations, norms, losses

}  // namespace fbl::autodiff
