// split-rows: the algorithm is in split_rows.h (steps 1-4).
#include "compiler/passes/split_rows.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/graph_edit.h"
#include "runtime/plan_file.h"

namespace fbl::passes {

namespace {

using ir::NodeId;
using ir::ValueId;

// The bytes `rows` rows of a [.. x cols] matrix take at `base` (its scales and padding included,
// as planfile::encodedBytes lays them out), or as they are where the base leaves them f32.
int64_t storedBytes(const quant::BaseWeights& base, int64_t rows, int64_t cols, ir::DType dtype) {
  if (base.bits == 32 || dtype != ir::DType::F32 || (base.bits != 16 && cols % base.group != 0))
    return rows * cols * static_cast<int64_t>(ir::dtypeSize(dtype));
  return planfile::encodedBytes(base.bits, base.group, rows, cols);
}

struct Readers {
  std::vector<NodeId> gathers, transposes, products;  // products: the MatMuls reading a transpose
};

// Step 1: the readers of `w` when all of them are of the kinds split-rows rewrites.
std::optional<Readers> readersOf(const ir::Graph& g, ValueId w, const std::vector<std::vector<NodeId>>& consumers) {
  Readers r;
  if (std::find(g.outputs.begin(), g.outputs.end(), w) != g.outputs.end()) return std::nullopt;
  for (NodeId id : consumers[w]) {
    const ir::Node& n = g.nodes[id];
    if (n.op == "Gather" && n.inputs[0] == w && n.input(1) != w && (n.attrInt("axis", 0) == 0 || n.attrInt("axis", 0) == -2)) {
      r.gathers.push_back(id);
    } else if (n.op == "Transpose" && n.attrInts("perm") == std::vector<int64_t>{1, 0}) {
      const ValueId t = n.outputs[0];
      if (std::find(g.outputs.begin(), g.outputs.end(), t) != g.outputs.end()) return std::nullopt;
      for (NodeId p : consumers[t]) {
        const ir::Node& m = g.nodes[p];
        if (m.op != "MatMul" || m.inputs[1] != t || m.inputs[0] == t) return std::nullopt;
        r.products.push_back(p);
      }
      r.transposes.push_back(id);
    } else {
      return std::nullopt;
    }
  }
  if (r.gathers.empty() && r.products.empty()) return std::nullopt;
  return r;
}

// Rows [row, row + rows) of `w`'s data, in memory or on disk.
void sliceData(const ir::Value& w, ir::Value& block, int64_t row, int64_t rows) {
  const int64_t cols = w.shape[1];
  const auto bytesPerRow = static_cast<int64_t>(cols * ir::dtypeSize(w.dtype));
  if (w.data) {
    ir::Tensor t(w.dtype, {rows, cols});
    std::memcpy(t.raw(), w.data->raw() + row * bytesPerRow, static_cast<size_t>(rows * bytesPerRow));
    block.data = std::make_shared<const ir::Tensor>(std::move(t));
  } else if (w.external) {
    ir::ExternalData e = *w.external;
    e.offset += row * bytesPerRow;
    e.length = rows * bytesPerRow;
    block.external = e;
  }
}

// A constant of `dtype` and `shape` holding `values`.
ValueId constant(ir::Graph& g, const std::string& hint, ir::DType dtype, ir::Shape shape, const std::vector<double>& values) {
  ir::Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return g.newConstant(hint, t);
}

}  // namespace

Result<bool> SplitRows::run(ir::Graph& g) {
  blocks_.clear();
  lost_.clear();
  split_.clear();
  if (maxBytes <= 0) return false;
  std::set<ValueId> trainable;
  if (!trainableGlobs.empty())
    if (auto t = autodiff::selectTrainables(g, trainableGlobs); t.ok()) trainable.insert(t->begin(), t->end());
  // The bounds every integer input has before any rewrite (step 4).
  std::map<ValueId, std::vector<analysis::InputBound>> boundsBefore;
  for (ValueId in : g.inputs)
    if (!ir::isFloat(g.values[in].dtype)) boundsBefore[in] = analysis::inputBounds(g, in);
  const auto consumers = g.consumers();
  ir::NodeInserter rw(g);
  const auto valueCount = static_cast<ValueId>(g.values.size());
  for (ValueId w = 0; w < valueCount; ++w) {
    const ir::Value wv = g.values[w];
    if (wv.kind != ir::ValueKind::Initializer || wv.shape.size() != 2 || !ir::isFloat(wv.dtype) || trainable.count(w)) continue;
    const int64_t rows = wv.shape[0], cols = wv.shape[1];
    if (storedBytes(base, rows, cols, wv.dtype) <= maxBytes) continue;
    const std::optional<Readers> readers = readersOf(g, w, consumers);
    if (!readers) continue;
    // Step 2: blocks of equal rows, as few as fit.
    int64_t fit = std::max<int64_t>(1, maxBytes * rows / storedBytes(base, rows, cols, wv.dtype));
    while (fit > 1 && storedBytes(base, fit, cols, wv.dtype) > maxBytes) --fit;
    const int64_t count = (rows + fit - 1) / fit;
    const int64_t each = (rows + count - 1) / count;
    std::vector<ValueId> block;
    std::vector<int64_t> first;
    for (int64_t r = 0; r < rows; r += each) {
      const int64_t n = std::min(each, rows - r);
      ir::Value b;
      b.name = g.uniqueName(fmt::format("{}.rows.{}-{}", wv.name, r, r + n));
      b.dtype = wv.dtype;
      b.shape = {n, cols};
      b.shapeKnown = true;
      b.kind = ir::ValueKind::Initializer;
      sliceData(wv, b, r, n);
      blocks_.push_back({b.name, wv.name, r, n});
      block.push_back(g.addValue(std::move(b)));
      first.push_back(r);
    }
    split_.push_back(fmt::format("{}: {} blocks of {} rows", wv.name, block.size(), each));
    // Step 3: the head's products, through each block's transpose.
    for (NodeId t : readers->transposes) {
      const ir::Node tn = g.nodes[t];
      std::vector<ValueId> parts;
      for (size_t k = 0; k < block.size(); ++k)
        parts.push_back(rw.one(t, "Transpose", {block[k]}, tn.name + "/rows" + std::to_string(k), wv.dtype,
                                {cols, g.values[block[k]].shape[0]}, tn.attrs));
      g.nodes[t].dead = true;
      for (NodeId p : consumers[tn.outputs[0]]) {
        const ir::Node pn = g.nodes[p];
        const ValueId out = pn.outputs[0];
        ir::Shape shape = g.values[out].shape;
        std::vector<ValueId> products;
        for (size_t k = 0; k < block.size(); ++k) {
          shape.back() = g.values[block[k]].shape[0];
          products.push_back(rw.one(p, "MatMul", {pn.inputs[0], parts[k]}, pn.name + "/rows" + std::to_string(k),
                                     g.values[out].dtype, shape, pn.attrs));
          chunks_.addWide(out, products.back());
        }
        rw.one(p, "Concat", products, pn.name + "/rows", g.values[out].dtype, g.values[out].shape,
                {{"axis", int64_t{-1}}}, out);
        g.nodes[p].dead = true;
      }
    }
    // Step 4: each embedding lookup from the block that holds the id.
    for (NodeId id : readers->gathers) {
      const ir::Node n = g.nodes[id];
      const ValueId ids = n.inputs[1], out = n.outputs[0];
      const ir::Value iv = g.values[ids];
      ir::Shape mask = iv.shape;
      mask.push_back(1);
      ValueId sum = ir::kNoValue;
      for (size_t k = 0; k < block.size(); ++k) {
        const std::string at = n.name + "/rows" + std::to_string(k);
        const int64_t lo = first[k], hi = first[k] + g.values[block[k]].shape[0];
        // One node at a time, so that the order (and the plan's digest) does not depend on the
        // order in which a compiler evaluates arguments.
        const ValueId ge = rw.one(id, "GreaterOrEqual", {ids, constant(g, at + "/lo", iv.dtype, {}, {double(lo)})},
                                   at + "/ge", ir::DType::Bool, iv.shape);
        const ValueId lt = rw.one(id, "Less", {ids, constant(g, at + "/hi", iv.dtype, {}, {double(hi)})}, at + "/lt",
                                   ir::DType::Bool, iv.shape);
        const ValueId inside = rw.one(id, "And", {ge, lt}, at + "/inside", ir::DType::Bool, iv.shape);
        const ValueId shifted = rw.one(id, "Sub", {ids, constant(g, at + "/first", iv.dtype, {}, {double(lo)})},
                                        at + "/local", iv.dtype, iv.shape);
        const ValueId local = rw.one(id, "Where", {inside, shifted, constant(g, at + "/zero", iv.dtype, {}, {0.0})},
                                      at + "/index", iv.dtype, iv.shape);
        const ValueId rowsOf = rw.one(id, "Gather", {block[k], local}, at, g.values[out].dtype, g.values[out].shape, n.attrs);
        const ValueId column = rw.one(id, "Unsqueeze", {inside, constant(g, at + "/axis", ir::DType::I64, {1}, {-1.0})},
                                       at + "/mask", ir::DType::Bool, mask);
        const ValueId kept = rw.one(id, "Where", {column, rowsOf, constant(g, at + "/none", g.values[out].dtype, {}, {0.0})},
                                     at + "/kept", g.values[out].dtype, g.values[out].shape);
        const bool last = k + 1 == block.size();
        sum = sum == ir::kNoValue ? kept
                                  : rw.one(id, "Add", {sum, kept}, at + "/sum", g.values[out].dtype, g.values[out].shape, {},
                                            last ? out : ir::kNoValue);
      }
      g.nodes[id].dead = true;
    }
  }
  if (blocks_.empty()) return false;
  rw.finish();
  // Step 4's bounds: those an input had that the rewritten graph no longer shows.
  for (const auto& [in, before] : boundsBefore) {
    const std::vector<analysis::InputBound> after = analysis::inputBounds(g, in);
    for (const analysis::InputBound& b : before)
      if (std::find(after.begin(), after.end(), b) == after.end()) lost_[in].push_back(b);
  }
  return true;
}

std::string SplitRows::summary() const {
  return fmt::format("{} matri{} in row blocks that fit max_alloc_bytes {} ({})", split_.size(),
                     split_.size() == 1 ? "x" : "ces", maxBytes, fmt::join(split_, "; "));
}

}  // namespace fbl::passes
