#include "compiler/onnx/sequence_ops.h"

#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "compiler/onnx/proto_tensor.h"

namespace fbl::onnx {

namespace {

using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::NodeProto;

bool isSequenceOp(const std::string& op) {
  return op == "SplitToSequence" || op == "SequenceConstruct" || op == "SequenceAt" || op == "ConcatFromSequence" ||
         op == "SequenceLength" || op == "SequenceEmpty" || op == "SequenceInsert" || op == "SequenceErase" ||
         op == "SequenceMap";
}

int64_t intAttr(const NodeProto& n, const std::string& name, int64_t dflt) {
  for (const AttributeProto& a : n.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

// A sequence: a split of `x` (step 1) or the tensors of a construct.
struct Sequence {
  bool split = false;
  std::string x;
  int64_t axis = 0;
  std::vector<int64_t> sizes;  // the parts' sizes when known
  int64_t size = 0;            // a scalar split's part size (sizes empty)
  bool squeeze = false;
  std::vector<std::string> tensors;  // a construct's

  std::optional<int64_t> count() const {
    if (!split) return static_cast<int64_t>(tensors.size());
    if (!sizes.empty()) return static_cast<int64_t>(sizes.size());
    return std::nullopt;
  }
};

class Rewriter {
 public:
  Rewriter(GraphProto* g, const std::string& file) : g_(g), file_(file) {}

  Status run() {
    bool any = false;
    for (const NodeProto& n : g_->node()) any = any || isSequenceOp(n.op_type());
    if (!any) return Status::success();
    for (const NodeProto& n : g_->node()) {
      for (const std::string& o : n.output()) names_.insert(o);
      names_.insert(n.name());
      if (n.op_type() == "Constant" && n.output_size() == 1) constants_[n.output(0)] = &n;
    }
    for (const auto& t : g_->initializer()) {
      initializers_[t.name()] = &t;
      names_.insert(t.name());
    }
    for (const auto& i : g_->input()) names_.insert(i.name());
    // 1. Records first, so that readers may come before their producer in the file.
    for (const NodeProto& n : g_->node())
      if (n.op_type() == "SplitToSequence" || n.op_type() == "SequenceConstruct") FBL_TRY(record(n));
    google::protobuf::RepeatedPtrField<NodeProto> out;
    for (const NodeProto& n : g_->node()) {
      const std::string& op = n.op_type();
      if (op == "SplitToSequence" || op == "SequenceConstruct") continue;
      if (op == "SequenceAt" || op == "ConcatFromSequence" || op == "SequenceLength") {
        FBL_TRY(rewrite(n, &out));
        continue;
      }
      if (isSequenceOp(op))
        return makeError("{}: node '{}': op {} is not supported (sequences are rewritten to tensors only when "
                         "they come from SplitToSequence or SequenceConstruct)", file_, n.name(), op);
      for (const std::string& in : n.input())
        if (seqs_.count(in))
          return makeError("{}: node '{}' ({}) reads the sequence '{}'; fbl indexes (SequenceAt), concatenates "
                           "(ConcatFromSequence) or counts (SequenceLength) sequences, nothing else",
                           file_, n.name(), op, in);
      *out.Add() = n;
    }
    for (const auto& o : g_->output())
      if (seqs_.count(o.name()))
        return makeError("{}: the graph outputs the sequence '{}', which fbl cannot return", file_, o.name());
    g_->mutable_node()->Swap(&out);
    return Status::success();
  }

 private:
  Error fail(const NodeProto& n, const std::string& msg) const {
    return makeError("{}: node '{}' ({}): {}", file_, n.name(), n.op_type(), msg);
  }

  // The integers of a constant input (a Constant node or an initializer), or nullopt.
  Result<std::optional<std::vector<int64_t>>> constInts(const std::string& name) {
    const ::onnx::TensorProto* t = nullptr;
    if (auto it = initializers_.find(name); it != initializers_.end()) t = it->second;
    if (auto it = constants_.find(name); it != constants_.end())
      for (const AttributeProto& a : it->second->attribute()) {
        if (a.name() == "value_int") return std::optional<std::vector<int64_t>>(std::vector<int64_t>{a.i()});
        if (a.name() == "value_ints")
          return std::optional<std::vector<int64_t>>(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
        if (a.name() == "value") t = &a.t();
      }
    if (!t || t->data_location() == ::onnx::TensorProto::EXTERNAL) return std::optional<std::vector<int64_t>>();
    FBL_ASSIGN(ir::Tensor v, tensorFromProto(*t, file_));
    if (v.dtype() != ir::DType::I64 && v.dtype() != ir::DType::I32) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(v.toInt64s());
  }

  Status record(const NodeProto& n) {
    if (n.output_size() != 1) return fail(n, "expected one output");
    Sequence s;
    if (n.op_type() == "SequenceConstruct") {
      s.tensors.assign(n.input().begin(), n.input().end());
    } else {
      if (n.input_size() < 1) return fail(n, "expected an input");
      s.split = true;
      s.x = n.input(0);
      s.axis = intAttr(n, "axis", 0);
      const bool hasSplit = n.input_size() > 1 && !n.input(1).empty();
      if (!hasSplit) {
        s.size = 1;
        s.squeeze = intAttr(n, "keepdims", 1) == 0;
      } else {
        FBL_ASSIGN(auto split, constInts(n.input(1)));
        if (!split) return fail(n, "the split '" + n.input(1) + "' must be a constant");
        // A 1-D split lists the sizes; a scalar (rank 0, one value) is the size of every part.
        bool scalar = split->size() == 1 && isScalarConstant(n.input(1));
        if (scalar) s.size = (*split)[0];
        else s.sizes = *split;
        if (scalar && s.size < 1) return fail(n, fmt::format("split size {} is not positive", s.size));
      }
    }
    seqs_[n.output(0)] = std::move(s);
    return Status::success();
  }

  bool isScalarConstant(const std::string& name) const {
    if (auto it = initializers_.find(name); it != initializers_.end()) return it->second->dims_size() == 0;
    if (auto it = constants_.find(name); it != constants_.end())
      for (const AttributeProto& a : it->second->attribute()) {
        if (a.name() == "value_int") return true;
        if (a.name() == "value") return a.t().dims_size() == 0;
      }
    return false;
  }

  std::string fresh(const std::string& hint) {
    std::string name = hint;
    for (int i = 1; names_.count(name); ++i) name = hint + "_" + std::to_string(i);
    names_.insert(name);
    return name;
  }

  // A new Constant node holding `v` (1-D i64, or a scalar), before the node being rewritten.
  std::string constant(const std::string& hint, const std::vector<int64_t>& v, bool scalar,
                       google::protobuf::RepeatedPtrField<NodeProto>* out) {
    NodeProto* c = out->Add();
    c->set_op_type("Constant");
    c->set_name(fresh(hint));
    c->add_output(c->name());
    AttributeProto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(AttributeProto::TENSOR);
    const ir::Tensor t = scalar ? ir::Tensor::scalar<int64_t>(v[0]) : ir::Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
    tensorToProto(t, c->name(), a->mutable_t());
    return c->output(0);
  }

  NodeProto* node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                  const std::string& output, google::protobuf::RepeatedPtrField<NodeProto>* out) {
    NodeProto* n = out->Add();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : inputs) n->add_input(i);
    n->add_output(output);
    return n;
  }

  static void setIntAttr(NodeProto* n, const std::string& name, int64_t v) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INT);
    a->set_i(v);
  }

  // Part p of split s (step 2) into `output`, by a node named `name`; `base` copies the
  // rewritten node (its name, output and unknown fields) when it is the node that stays.
  Status part(const NodeProto& at, const Sequence& s, int64_t p, const std::string& name, const std::string& output,
              const NodeProto* base, google::protobuf::RepeatedPtrField<NodeProto>* out) {
    const std::optional<int64_t> count = s.count();
    if (p < 0) {
      if (!count) return fail(at, fmt::format("position {} counts from the end of a split whose part count depends "
                                              "on the shape of '{}'; index it from the front", p, s.x));
      p += *count;
    }
    if (p < 0 || (count && p >= *count))
      return fail(at, fmt::format("position {} is outside a sequence of {} parts", p, count.value_or(0)));
    int64_t start = 0, len = s.size;
    if (!s.sizes.empty()) {
      for (int64_t k = 0; k < p; ++k) start += s.sizes[k];
      len = s.sizes[p];
    } else {
      start = p * s.size;
    }
    const std::string starts = constant(name + "/starts", {start}, false, out);
    const std::string ends = constant(name + "/ends", {start + len}, false, out);
    const std::string axes = constant(name + "/axes", {s.axis}, false, out);
    const std::string sliced = s.squeeze ? fresh(output + "/unsqueezed") : output;
    NodeProto* slice = out->Add();
    if (base && !s.squeeze) *slice = *base;
    slice->set_op_type("Slice");
    slice->clear_attribute();
    slice->clear_input();
    slice->clear_output();
    slice->set_name(base && !s.squeeze ? base->name() : fresh(name + "/slice"));
    for (const std::string& i : {s.x, starts, ends, axes}) slice->add_input(i);
    slice->add_output(sliced);
    if (!s.squeeze) return Status::success();
    NodeProto* sq = out->Add();
    if (base) *sq = *base;
    sq->set_op_type("Squeeze");
    sq->clear_attribute();
    sq->clear_input();
    sq->clear_output();
    sq->set_name(base ? base->name() : fresh(name + "/squeeze"));
    sq->add_input(sliced);
    sq->add_input(axes);
    sq->add_output(output);
    return Status::success();
  }

  // The node `n` turned into `op` over `inputs`, keeping its name, output and unknown fields.
  NodeProto* retyped(const NodeProto& n, const std::string& op, const std::vector<std::string>& inputs,
                     google::protobuf::RepeatedPtrField<NodeProto>* out) {
    NodeProto* r = out->Add();
    *r = n;
    r->set_op_type(op);
    r->clear_attribute();
    r->clear_input();
    for (const std::string& i : inputs) r->add_input(i);
    return r;
  }

  Status rewrite(const NodeProto& n, google::protobuf::RepeatedPtrField<NodeProto>* out) {
    if (n.input_size() < 1 || n.output_size() != 1) return fail(n, "expected a sequence input and one output");
    auto it = seqs_.find(n.input(0));
    if (it == seqs_.end())
      return fail(n, "its sequence '" + n.input(0) + "' does not come from SplitToSequence or SequenceConstruct");
    const Sequence& s = it->second;
    const std::string& op = n.op_type();
    if (op == "SequenceLength") {
      const auto count = s.count();
      if (!count) return fail(n, "the part count of this split depends on the shape of '" + s.x + "'");
      NodeProto* c = retyped(n, "Constant", {}, out);
      AttributeProto* a = c->add_attribute();
      a->set_name("value");
      a->set_type(AttributeProto::TENSOR);
      tensorToProto(ir::Tensor::scalar<int64_t>(*count), n.output(0), a->mutable_t());
      return Status::success();
    }
    if (op == "SequenceAt") {
      if (n.input_size() < 2) return fail(n, "expected a position input");
      FBL_ASSIGN(auto pos, constInts(n.input(1)));
      if (!pos || pos->size() != 1) return fail(n, "the position '" + n.input(1) + "' must be a constant scalar");
      if (!s.split) {
        int64_t p = (*pos)[0];
        const int64_t count = static_cast<int64_t>(s.tensors.size());
        if (p < 0) p += count;
        if (p < 0 || p >= count) return fail(n, fmt::format("position {} is outside a sequence of {}", (*pos)[0], count));
        retyped(n, "Identity", {s.tensors[p]}, out);
        return Status::success();
      }
      return part(n, s, (*pos)[0], n.name(), n.output(0), &n, out);
    }
    // ConcatFromSequence.
    const int64_t axis = intAttr(n, "axis", 0);
    const bool newAxis = intAttr(n, "new_axis", 0) != 0;
    if (!s.split) {
      std::vector<std::string> parts = s.tensors;
      if (newAxis) {
        const std::string axes = constant(n.name() + "/axes", {axis}, false, out);
        for (size_t k = 0; k < parts.size(); ++k) {
          const std::string u = fresh(n.output(0) + "/part" + std::to_string(k));
          node("Unsqueeze", fresh(n.name() + "/unsqueeze" + std::to_string(k)), {parts[k], axes}, u, out);
          parts[k] = u;
        }
      }
      setIntAttr(retyped(n, "Concat", parts, out), "axis", axis);
      return Status::success();
    }
    // Joined back where it was cut: the parts in order are x itself (axes compared as written:
    // x's rank is not known here). Otherwise each part, then the Concat.
    if (axis == s.axis && newAxis == s.squeeze) {
      retyped(n, "Identity", {s.x}, out);
      return Status::success();
    }
    const auto count = s.count();
    if (!count) return fail(n, "concatenating a split along another axis needs its part count, which depends on the "
                               "shape of '" + s.x + "'");
    std::vector<std::string> parts;
    const std::string axes = newAxis ? constant(n.name() + "/new_axes", {axis}, false, out) : "";
    for (int64_t k = 0; k < *count; ++k) {
      std::string p = fresh(n.output(0) + "/part" + std::to_string(k));
      FBL_TRY(part(n, s, k, n.name() + "/part" + std::to_string(k), p, nullptr, out));
      if (newAxis) {
        const std::string u = fresh(p + "/unsqueezed");
        node("Unsqueeze", fresh(n.name() + "/unsqueeze" + std::to_string(k)), {p, axes}, u, out);
        p = u;
      }
      parts.push_back(p);
    }
    setIntAttr(retyped(n, "Concat", parts, out), "axis", axis);
    return Status::success();
  }

  GraphProto* g_;
  const std::string& file_;
  std::set<std::string> names_;
  std::map<std::string, const NodeProto*> constants_;
  std::map<std::string, const ::onnx::TensorProto*> initializers_;
  std::map<std::string, Sequence> seqs_;
};

}  // namespace

Status rewriteSequenceOps(GraphProto* g, const std::string& file) { return Rewriter(g, file).run(); }

}  // namespace fbl::onnx
