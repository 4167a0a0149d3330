// Plan building:
//  1. emit the launches of every live node in graph order (topological; forward, then backward,
//     then optimizer), resolving view outputs (Reshape, ...) to the storage of their input; a
//     MatMul with a fused epilogue is emitted where the epilogue's last node stood;
//  2. give every storage root a plan tensor with its role (input, weight, trainable, state,
//     constant, step, intermediate) and every node scratch a tensor of its own;
//  3. merge identical kernel sources into one kernel named k<i>_<op> in order of first use,
//     and concatenate them into one OpenCL program (one build per plan);
//  4. update parameters and optimizer state in place; record commits (updated -> current)
//     for any update that cannot be in place;
//  5. plan memory by liveness: persistent tensors live for the whole step, loss, gradients and
//     updated values until its end, everything else from first to last use;
//  6. record, per integer input, the bounds its index and label consumers need (the runtime
//     checks every input write against them).
// They run as named steps (plan_builder.h): select-kernels (1-2), batch-launches, merge-kernels
// (3's merge), bind-runtime (4, 6), add-transfers, plan-memory (5) and emit-program (3's
// program); `--dump-after STEP` prints the plan after one.
#include "compiler/plan/plan_builder.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/analysis/input_bounds.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/operand_layout.h"
#include "compiler/codegen/rtile_kernels.h"
#include "compiler/plan/kernel_source_rewrite.h"
#include "compiler/plan/launch_batching.h"
#include "compiler/plan/memory_planner.h"
#include "compiler/plan/plan_printer.h"
#include "compiler/autodiff/peft_adapter.h"

namespace fbl::plan {

namespace {

using planfile::Role;

const char* phaseName(ir::Phase p) {
  switch (p) {
    case ir::Phase::Forward: return "forward";
    case ir::Phase::Backward: return "backward";
    case ir::Phase::Optimizer: return "optimizer";
  }
  return "forward";
}

class Builder {
 public:
  Builder(const PlanInputs& in, const Profile& profile, const passes::PassOptions* options)
      : in_(in), g_(*in.graph), profile_(profile), options_(options) {
    root_.resize(g_.values.size());
    for (size_t v = 0; v < root_.size(); ++v) root_[v] = static_cast<ir::ValueId>(v);
    for (const auto& t : in.trainables) trainable_.insert(t.param);
    for (const auto& s : in.state) state_.insert(s.current);
    buffers_.insert(in.buffers.begin(), in.buffers.end());
  }

  Result<Plan> build(BuildStats* stats) {
    plan_.model = in_.model;
    plan_.profile = profile_.name;
    plan_.alignment = profile_.bufferAlignment;
    if (!profile_.buildOptions.empty()) plan_.buildOptions += " " + profile_.buildOptions;
    target_.workgroup = profile_.workgroupSize;
    target_.computeUnits = profile_.computeUnits;
    target_.matmul = profile_.matmul;
    target_.tuning = profile_.tuning;
    target_.textureL1s = profile_.textureL1s;
    target_.wave = profile_.waveSize;
    const std::map<std::string, std::function<Status()>> run = {
        {"select-kernels", [&] { return selectKernels(); }},
        {"batch-launches", [&] { return batchLaunches(); }},
        {"merge-kernels", [&] { return mergeKernels(); }},
        {"bind-runtime", [&] { return bindRuntime(); }},
        {"add-transfers", [&] { return addTransfersAndAdapter(); }},
        {"plan-memory", [&] { return placeTensors(stats); }},
        {"emit-program", [&] { return emitProgram(); }}};
    for (const PlanStep& step : planSteps()) {
      if (options_ && options_->disabled.count(step.name)) {
        if (!step.requiredBecause.empty())
          return makeError("--disable-pass {}: the plan cannot be built without it ({})", step.name,
                           step.requiredBecause);
        continue;
      }
      FBL_TRY(run.at(step.name)());
      dumpAfter(step.name);
    }
    if (stats) {
      for (size_t v = 0; v < root_.size(); ++v) {
        auto it = tensorOfRoot_.find(root_[v]);
        if (it != tensorOfRoot_.end()) stats->tensorOfValue[static_cast<ir::ValueId>(v)] = it->second;
      }
      stats->kernels = static_cast<int64_t>(kernelSources_.size());
      stats->launches = static_cast<int64_t>(plan_.launches.size());
    }
    return std::move(plan_);
  }

 private:
  // select-kernels (1-2): the launches of every live node, its tensors and scratch.
  Status selectKernels() {
    // A materialised value is copied in right before the first launch that reads it. The
    // lowering attaches the copy to the first consumer that asked for it, but an earlier node may
    // read the value as stored (its chain left to run op by op), or a fused kernel may move.
    std::map<ir::ValueId, const codegen::OperandLayout*> pendingCopies;
    if (in_.lowering)
      for (const NodeLowering& nl : in_.lowering->nodes)
        for (const auto& [v, from] : nl.materialise) pendingCopies[v] = &from;
    auto copyIn = [&](const ir::Node& reader, ir::ValueId v) -> Status {
      auto it = pendingCopies.find(v);
      if (it == pendingCopies.end()) return Status::success();
      const ir::Value& val = g_.values[v];
      FBL_ASSIGN(codegen::NodeCode copy,
                 codegen::emitLayoutCopy(g_, *it->second, val.dtype, layout::Layout::rowMajor(val.shape), target_));
      pendingCopies.erase(it);
      addLaunches(reader, copy, "conversion", {tensorOf(v)}, "/copy:" + val.name, {}, {});
      return Status::success();
    };
    // `slots`: how the reader's kernel reads each input; one read through another value's map, or
    // passed on in registers (`chained`), does not read the value itself.
    auto copyInReadsOf = [&](const ir::Node& reader, const std::vector<std::optional<codegen::OperandLayout>>* slots,
                             int chained) -> Status {
      for (size_t s = 0; s < reader.inputs.size(); ++s) {
        const ir::ValueId u = reader.inputs[s];
        if (u == ir::kNoValue || static_cast<int>(s) == chained) continue;
        if (slots && s < slots->size() && (*slots)[s] && (*slots)[s]->value != u) continue;
        FBL_TRY(copyIn(reader, u));
        FBL_TRY(copyIn(reader, root_[u]));
      }
      return Status::success();
    };
    // 1-3: launches and kernels.
    for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(g_.nodes.size()); ++id) {
      if (g_.nodes[id].dead) continue;
      const NodeLowering* nl = in_.lowering ? &in_.lowering->nodes[id] : nullptr;
      if (nl && (nl->skip || nl->deferred)) continue;
      // The last node of a fused epilogue emits its product's kernel here (fusion.h).
      ir::NodeId emitted = id;
      if (nl && nl->runs != ir::kNoNode) {
        emitted = nl->runs;
        nl = &in_.lowering->nodes[emitted];
      }
      const ir::Node& n = g_.nodes[emitted];
      std::string fusedOps;
      std::vector<std::string> fusedNodes;
      if (nl)
        for (const auto* list : {&nl->layouts.inlined, &nl->layouts.epilogue})
          for (const codegen::FusedOp& op : *list) {
            fusedOps += "+" + g_.nodes[op.node].op;
            fusedNodes.push_back(g_.nodes[op.node].name);
          }
      std::vector<ir::NodeId> covered{emitted};  // the nodes whose outputs the kernel writes
      if (nl)
        for (const codegen::FusedOp& op : nl->layouts.epilogue) covered.push_back(op.node);
      if (nl)
        for (const auto& [v, from] : nl->materialise) FBL_TRY(copyIn(n, v));
      FBL_TRY(copyInReadsOf(n, nl ? &nl->layouts.inputs : nullptr, -1));
      if (nl)
        for (const auto* list : {&nl->layouts.inlined, &nl->layouts.epilogue})
          for (const codegen::FusedOp& op : *list) FBL_TRY(copyInReadsOf(g_.nodes[op.node], &op.inputs, op.chained));
      FBL_ASSIGN(codegen::NodeCode code,
                 nl ? codegen::emitNode(g_, n, target_, nl->layouts) : codegen::emitNode(g_, n, target_));
      if (code.aliasOf != ir::kNoValue) {
        root_[n.outputs[0]] = root_[code.aliasOf];
        continue;
      }
      updateInPlace(n);
      std::vector<int32_t> scratch;
      for (size_t s = 0; s < code.scratch.size(); ++s) {
        const bool counts = code.scratch[s].counts;
        scratch.push_back(addTensor(fmt::format("{}.{}{}", n.name, counts ? "counts" : "scratch", s),
                                    code.scratch[s].dtype, code.scratch[s].shape, counts ? Role::Counter : Role::Scratch));
      }
      addLaunches(n, code, nl ? nl->kind : "compute", scratch, fusedOps, fusedNodes, covered);
    }
    return Status::success();
  }

  // merge-kernels (3's merge): each launch's kernel, identical sources as one.
  Status mergeKernels() {
    for (size_t i = 0; i < plan_.launches.size(); ++i) plan_.launches[i].kernel = kernelFor(specs_[i]);
    specs_.clear();
    return Status::success();
  }

  // bind-runtime (4, 6): inputs and their bounds, loss, step, trainables, state, commits, outputs.
  Status bindRuntime() {
    for (ir::ValueId v : g_.inputs)
      if (!runtimeWritten(v)) {
        plan_.inputs.push_back(tensorOf(v));
        addInputChecks(v);
      }
    // 4: commits and the names the runtime needs.
    if (in_.loss != ir::kNoValue) keep_.insert(plan_.loss = tensorOf(in_.loss));
    if (in_.step != ir::kNoValue) plan_.step = tensorOf(in_.step);
    if (in_.lr != ir::kNoValue) plan_.loop.lrTensor = tensorOf(in_.lr);
    if (in_.accumKeep != ir::kNoValue) plan_.loop.accumKeep = tensorOf(in_.accumKeep);
    for (ir::ValueId a : in_.accumulators) plan_.loop.accumulators.push_back(tensorOf(a));
    for (const auto& t : in_.trainables) {
      planfile::Trainable pt;
      pt.param = tensorOf(t.param);
      pt.grad = t.grad != ir::kNoValue ? tensorOf(t.grad) : -1;
      pt.adapterKey = autodiff::peftAdapterKey(g_.values[t.param].name);
      if (pt.grad >= 0) keep_.insert(pt.grad);
      // A gradient that reaches its trainable through a view (IA3's [out, 1] vector, flattened
      // in the forward pass) is stored by the tensor the view aliases, shaped as that product.
      // The bytes are the trainable's, row-major: the plan records them in the trainable's shape.
      if (pt.grad >= 0) {
        planfile::Tensor& gt = plan_.tensors[pt.grad];
        const planfile::Tensor& param = plan_.tensors[pt.param];
        if (gt.shape != param.shape && gt.dtype == param.dtype && !gt.image() && gt.layout == "row_major" &&
            ir::numElements(gt.shape) == ir::numElements(param.shape))
          gt.shape = param.shape;
      }
      plan_.trainables.push_back(pt);
      if (t.updated != ir::kNoValue) addCommit(t.updated, t.param);
    }
    for (const auto& s : in_.state) {
      plan_.state.push_back(tensorOf(s.current));
      if (s.updated != ir::kNoValue) addCommit(s.updated, s.current);
    }
    for (ir::ValueId b : in_.buffers) plan_.updatedBuffers.push_back(tensorOf(b));
    for (ir::ValueId v : in_.keep) keep_.insert(tensorOf(v));
    for (ir::ValueId v : in_.outputs) {
      plan_.outputs.push_back(tensorOf(v));
      keep_.insert(plan_.outputs.back());
    }
    return Status::success();
  }

  // add-transfers: the pack and unpack launches of host values, and the adapter's tensors.
  Status addTransfersAndAdapter() {
    FBL_TRY(addTransfers());
    plan_.adapterConfig = in_.adapterConfig;
    plan_.adapterRefusal = in_.adapterRefusal;
    for (const auto& [name, key] : in_.adapterFrozen) {
      const ir::ValueId v = g_.findValue(name);
      if (v == ir::kNoValue) return makeError("adapter tensor '{}' is not in the training graph", name);
      plan_.adapterFrozen.push_back({tensorOf(v), -1, key});
    }
    plan_.optimizer = {{"trainables", plan_.trainables.size()}, {"state_tensors", plan_.state.size()}};
    return Status::success();
  }

  // emit-program (3's program): the kernels' sources as one OpenCL program.
  Status emitProgram() {
    plan_.program = fmt::format("// fbl plan for {}: {} kernels, OpenCL C 1.2\n", in_.model, kernelSources_.size());
    for (const std::string& src : kernelSources_) plan_.program += "\n" + src;
    return Status::success();
  }

  // --dump-after STEP: the plan so far.
  void dumpAfter(const std::string& step) const {
    if (!options_ || (!options_->dumpAfter.count(step) && !options_->dumpAfter.count("all"))) return;
    const std::string text = fmt::format("// ---- plan after {} ----\n{}", step, printPlan(plan_));
    if (options_->sink) options_->sink(text);
    else std::fwrite(text.data(), 1, text.size(), stdout);
  }

  // The launches of `code` for node `n`; scratch arguments bind to `scratch` (the node's own
  // scratch tensors, or the value a layout copy materialises); `fused`: the nodes the kernel
  // computes besides `n`; `covered`: the nodes whose outputs it writes. Kernels are named once
  // batching has settled the launch list (batchLaunches).
  void addLaunches(const ir::Node& n, codegen::NodeCode& code, const std::string& kind,
                   const std::vector<int32_t>& scratch, const std::string& suffix,
                   const std::vector<std::string>& fused, const std::vector<ir::NodeId>& covered) {
    for (codegen::LaunchSpec& l : code.launches) {
      planfile::Launch pl;
      pl.phase = phaseName(n.phase);
      for (const codegen::ArgRef& a : l.args) pl.args.push_back(a.scratch ? scratch[a.index] : tensorOf(a.index));
      pl.global = l.global;
      pl.local = l.local;
      pl.node = n.name + suffix;
      pl.kind = kind;
      pl.fused = fused;
      LaunchAccess access;
      access.args = pl.args;
      for (int32_t a : pl.args)
        if (std::find(scratch.begin(), scratch.end(), a) != scratch.end() || isOutputTensor(a, covered))
          access.writes.push_back(a);
      if (!l.productParams.empty() && code.launches.size() == 1 && code.scratch.empty() && l.global.size() == 3)
        access.batchKey = batchKey(l, pl.phase);
      plan_.launches.push_back(std::move(pl));
      access_.push_back(std::move(access));
      specs_.push_back(std::move(l));
    }
  }

  // Is tensor `t` an output of one of `covered`?
  bool isOutputTensor(int32_t t, const std::vector<ir::NodeId>& covered) const {
    for (ir::NodeId c : covered)
      for (ir::ValueId v : g_.nodes[c].outputs) {
        if (v == ir::kNoValue) continue;
        auto it = tensorOfRoot_.find(root_[v]);
        if (it != tensorOfRoot_.end() && it->second == t) return true;
      }
    return false;
  }

  // Launches of one narrow-product source, phase and work sizes may run as one.
  std::string batchKey(const codegen::LaunchSpec& l, const std::string& phase) {
    auto it = sourceIds_.emplace(l.source, static_cast<int64_t>(sourceIds_.size())).first;
    return fmt::format("{}{}|{}|{}|{}", it->second, l.entry, phase, fmt::join(l.global, "x"), fmt::join(l.local, "x"));
  }

  // Independent launches of one narrow-product kernel run as one launch (launch_batching.h), up
  // to the profile's matmul.narrow.batch_products, tiled for the launch (LaunchSpec::tiledForBatch).
  Status batchLaunches() {
    BatchLimits limits;
    limits.maxProducts = profile_.matmul.narrow.batchProducts;
    limits.maxArgs = kMaxBatchedArgs;
    std::vector<int64_t> transient(plan_.tensors.size(), 0);
    for (size_t t = 0; t < transient.size(); ++t) {
      const planfile::Tensor& pt = plan_.tensors[t];
      if (pt.role != Role::Intermediate && pt.role != Role::Scratch) continue;
      // An image's bytes are its texels (Tensor::bytes is 0: it lives outside the arena).
      transient[t] = pt.image() ? pt.imageWidth * pt.imageHeight * 16 : pt.bytes;
    }
    const auto order = batchIndependentLaunches(access_, transient, limits);
    access_.clear();
    if (order.size() == plan_.launches.size()) return Status::success();
    std::vector<planfile::Launch> launches;
    std::vector<codegen::LaunchSpec> specs;
    for (const std::vector<size_t>& item : order) {
      planfile::Launch& l = plan_.launches[item[0]];
      codegen::LaunchSpec& spec = specs_[item[0]];
      if (item.size() > 1) {
        const auto products = static_cast<int64_t>(item.size());
        // Every launch of the group had this source and these sizes, so one re-tiling serves all.
        if (spec.tiledForBatch) {
          FBL_ASSIGN(spec, spec.tiledForBatch(products));
          l.global = spec.global;
          l.local = spec.local;
        }
        spec.source += codegen::narrowBatchEntry("{{NAME}}", spec.productParams, products, spec.global[2]);
        spec.entry += codegen::narrowBatchEntryName(products);
        l.global[2] *= products;
        for (size_t k = 1; k < item.size(); ++k) {
          const planfile::Launch& other = plan_.launches[item[k]];
          l.args.insert(l.args.end(), other.args.begin(), other.args.end());
          l.node += "+" + other.node;
          l.fused.push_back(other.node);
          l.fused.insert(l.fused.end(), other.fused.begin(), other.fused.end());
        }
      }
      launches.push_back(std::move(l));
      specs.push_back(std::move(spec));
    }
    plan_.launches = std::move(launches);
    specs_ = std::move(specs);
    return Status::success();
  }

  // What the runtime checks of integer input `v` before any launch (analysis/input_bounds.h).
  void addInputChecks(ir::ValueId v) {
    auto lost = in_.lostInputBounds.find(v);
    const std::vector<analysis::InputBound> none;
    for (planfile::InputCheck& c : analysis::inputChecks(g_, v, plan_.inputs.back(), lost == in_.lostInputBounds.end() ? none : lost->second))
      plan_.inputChecks.push_back(std::move(c));
  }

  // Pack and unpack launches for every host tensor stored in another layout, through one
  // row-major staging tensor of at most PlanInputs::stagingBytes (less where a pool is smaller): a tensor
  // larger than that moves a chunk of whole rows at a time, its first row in a one-element
  // tensor the runtime writes before each launch.
  Status addTransfers() {
    if (packed_.empty()) return Status::success();
    const int64_t bound = std::max<int64_t>(1, in_.stagingBytes);
    const int64_t budget = profile_.maxAllocBytes > 0 ? std::min(bound, profile_.maxAllocBytes) : bound;
    int64_t staging = 0;
    for (const auto& [t, l] : packed_) {
      planfile::Tensor& pt = plan_.tensors[t];
      const int64_t rows = planfile::transferRows(pt.shape);
      const int64_t rowBytes = planfile::transferRowBytes(pt.shape, pt.dtype);
      // Whole blocks of 4 rows (an image work-item's) unless the tensor fits at once.
      int64_t chunk = budget / std::max<int64_t>(1, rowBytes);
      if (chunk < rows) chunk = std::max<int64_t>(4, chunk / 4 * 4);
      pt.transferRows = std::max<int64_t>(1, std::min(chunk, rows));
      staging = std::max(staging, pt.transferRows * rowBytes);
    }
    plan_.staging = addTensor("fbl.staging", ir::DType::U8, {staging}, Role::Scratch);
    plan_.transferFirstRow = addTensor("fbl.transfer_first_row", ir::DType::I64, {1}, Role::Scratch);
    for (const auto& [t, l] : packed_) {
      planfile::Tensor& pt = plan_.tensors[t];
      const std::optional<ir::DType> dt = ir::dtypeFromName(pt.dtype);
      FBL_ASSERT(dt.has_value());
      for (const bool unpack : {false, true}) {
        FBL_ASSIGN(codegen::LaunchSpec spec, codegen::emitTransfer(pt.name, l, *dt, unpack, pt.transferRows, target_));
        planfile::Launch pl;
        pl.phase = unpack ? "unpack" : "pack";
        pl.kernel = kernelFor(spec);
        pl.args = unpack ? std::vector<int32_t>{t, plan_.staging, plan_.transferFirstRow}
                         : std::vector<int32_t>{plan_.staging, t, plan_.transferFirstRow};
        pl.global = spec.global;
        pl.local = spec.local;
        pl.node = pt.name + (unpack ? "/unpack" : "/pack");
        pl.kind = "conversion";
        (unpack ? pt.unpack : pt.pack) = static_cast<int32_t>(plan_.transfers.size());
        plan_.transfers.push_back(std::move(pl));
      }
    }
    return Status::success();
  }

  // Optimizer updates are elementwise (each work-item reads p[i], m[i], v[i] before writing
  // them), so they write the parameter and its state in place when nothing later reads the old
  // values: no second copy of the trainables and no commit copies. The cross-entropy's gradient
  // writes over its scores the same way (a work-group reads its row whole, for the log-sum-exp,
  // before any work-item writes it): the logits and their gradient, [tokens x vocab] each, are
  // then one tensor.
  void updateInPlace(const ir::Node& n) {
    std::vector<std::pair<size_t, size_t>> pairs;  // (output, input)
    const bool scores = n.op == "fbl.SoftmaxCrossEntropyLossGrad";
    if (n.op == "fbl.AdamW") pairs = {{0, 0}, {1, 2}, {2, 3}};
    else if (n.op == "fbl.SGD") pairs = {{0, 0}, {1, 2}};
    else if (scores) pairs = {{0, 1}};
    for (const auto& [o, i] : pairs) {
      if (o >= n.outputs.size() || i >= n.inputs.size() || n.outputs[o] == ir::kNoValue) continue;
      if (readLater(n, n.inputs[i])) continue;
      if (scores && !transientRowMajor(n.inputs[i], n.outputs[o])) continue;
      root_[n.outputs[o]] = root_[n.inputs[i]];
    }
  }

  // `over` may take `v`'s tensor: `v` is computed by a node, the plan keeps neither it nor
  // anything sharing its tensor, and both are row-major buffers of the same bytes.
  bool transientRowMajor(ir::ValueId v, ir::ValueId over) const {
    const ir::Value& x = g_.values[root_[v]];
    if (x.producer == ir::kNoNode || x.kind != ir::ValueKind::Intermediate) return false;
    for (const auto* list : {&in_.keep, &in_.outputs, &g_.outputs})
      for (ir::ValueId k : *list)
        if (k != ir::kNoValue && root_[k] == root_[v]) return false;
    if (in_.lowering && (in_.lowering->storage.count(root_[v]) || in_.lowering->storage.count(over))) return false;
    return ir::numElements(x.shape) * ir::dtypeSize(x.dtype) ==
           ir::numElements(g_.values[over].shape) * ir::dtypeSize(g_.values[over].dtype);
  }

  bool readLater(const ir::Node& n, ir::ValueId v) const {
    bool after = false;
    for (const ir::Node& m : g_.nodes) {
      if (&m == &n) { after = true; continue; }
      if (!after || m.dead) continue;
      for (ir::ValueId in : m.inputs)
        if (in != ir::kNoValue && root_[in] == root_[v]) return true;
    }
    return false;
  }

  void addCommit(ir::ValueId from, ir::ValueId to) {
    const int32_t src = tensorOf(from), dst = tensorOf(to);
    if (src == dst) return;
    plan_.commits.push_back({src, dst});
    keep_.insert(src);
  }

  // The scalars the runtime writes each step: the step number and the training loop's.
  bool runtimeWritten(ir::ValueId v) const {
    return v != ir::kNoValue && (v == in_.step || v == in_.lr || v == in_.accumKeep);
  }

  int32_t addTensor(std::string name, ir::DType dt, const ir::Shape& shape, Role role) {
    planfile::Tensor t;
    t.name = std::move(name);
    t.dtype = std::string(ir::dtypeName(dt));
    t.shape = shape;
    t.role = role;
    t.bytes = ir::numElements(shape) * static_cast<int64_t>(ir::dtypeSize(dt));
    plan_.tensors.push_back(std::move(t));
    return static_cast<int32_t>(plan_.tensors.size() - 1);
  }

  Role roleOf(ir::ValueId v) const {
    const ir::Value& val = g_.values[v];
    if (runtimeWritten(v)) return Role::Step;
    if (trainable_.count(v)) return Role::Trainable;
    if (state_.count(v)) return Role::State;
    switch (val.kind) {
      case ir::ValueKind::Input: return Role::Input;
      case ir::ValueKind::Initializer: return Role::Weight;
      case ir::ValueKind::Constant: return Role::Constant;
      case ir::ValueKind::Intermediate: return Role::Intermediate;
    }
    return Role::Intermediate;
  }

  int32_t tensorOf(ir::ValueId v) {
    const ir::ValueId r = root_[v];
    auto it = tensorOfRoot_.find(r);
    if (it != tensorOfRoot_.end()) return it->second;
    const ir::Value& val = g_.values[r];
    const Role role = roleOf(r);
    const int32_t id = addTensor(val.name, val.dtype, val.shape, role);
    planfile::Tensor& t = plan_.tensors[id];
    // An updated buffer starts from the model's value, which the weights file holds.
    if (role == Role::Weight || role == Role::Trainable || buffers_.count(r)) t.source = val.name;
    if (in_.lowering) {
      // Stored in another layout (layout_lowering.h, step 4): the padded tile-major buffer, or
      // an image object of its own extent.
      auto st = in_.lowering->storage.find(r);
      if (st != in_.lowering->storage.end()) {
        t.layout = in_.lowering->storageNote.at(r);
        if (st->second.storage() == layout::Storage::Image2D) {
          t.storage = "image";
          t.bytes = 0;
          t.imageWidth = st->second.imageWidth();
          t.imageHeight = st->second.imageHeight();
        } else if (const layout::Encoding& e = st->second.encoding(); !e.plain()) {
          // A frozen weight stored narrower: the weights file holds these bytes, copied as they are.
          t.encoding = planfile::encodingName(e.bits);
          t.groupSize = e.group;
          t.groupAxis = e.axis;
          t.bytes = planfile::encodedBytes(e.bits, e.group, e.rows, e.cols);
        } else {
          t.bytes = st->second.bufferSize() * static_cast<int64_t>(ir::dtypeSize(val.dtype));
        }
        const bool hostWritten = role == Role::Weight || role == Role::Trainable || role == Role::State;
        if (hostWritten && t.encoding.empty()) packed_.emplace_back(id, st->second);
      }
    }
    if (role == Role::Constant && val.data) {
      // Constants sit in the blob at 16-byte boundaries, in order of first use.
      while (plan_.blob.size() % 16 != 0) plan_.blob.push_back(0);
      t.constOffset = static_cast<int64_t>(plan_.blob.size());
      const auto* p = reinterpret_cast<const unsigned char*>(val.data->raw());
      plan_.blob.insert(plan_.blob.end(), p, p + val.data->nbytes());
    }
    tensorOfRoot_[r] = id;
    return id;
  }

  // Launches share a kernel entry when they share its source and work sizes: a plan gives each
  // kernel one work size (kernel_work). A source that leaves a grid dimension unguarded (a batch)
  // can serve launches of other sizes, so each other size gets a copy of the source of its own.
  int32_t kernelFor(const codegen::LaunchSpec& l) {
    const std::pair<std::vector<int64_t>, std::vector<int64_t>> work{l.global, l.local};
    for (int copy = 0;; ++copy) {
      const std::string key = copy == 0 ? l.source : fmt::format("{}\n// work sizes #{}", l.source, copy);
      auto it = kernelBase_.find(key);
      std::string base;
      if (it == kernelBase_.end()) {
        base = fmt::format("k{}_{}", kernelSources_.size(), l.tag);
        kernelBase_[key] = base;
        kernelSources_.push_back(planKernelSource(l.source, base));
      } else {
        base = it->second;
      }
      const std::string entry = base + l.entry;
      auto e = entryIndex_.find(entry);
      if (e == entryIndex_.end()) {
        plan_.kernelNames.push_back(entry);
        entryWork_[entry] = work;
        return entryIndex_[entry] = static_cast<int32_t>(plan_.kernelNames.size() - 1);
      }
      if (entryWork_.at(entry) == work) return e->second;
    }
  }

  // plan-memory (5): offsets by liveness; `keep_` lives to the end of the step.
  Status placeTensors(BuildStats* stats) {
    const int64_t end = static_cast<int64_t>(plan_.launches.size());
    std::vector<Interval> iv(plan_.tensors.size());
    for (size_t i = 0; i < iv.size(); ++i) {
      const Role r = plan_.tensors[i].role;
      iv[i].bytes = plan_.tensors[i].bytes;
      iv[i].persistent = r != Role::Intermediate && r != Role::Scratch;
      iv[i].first = end;
      iv[i].last = -1;
    }
    for (int64_t li = 0; li < end; ++li)
      for (int32_t a : plan_.launches[li].args) {
        iv[a].first = std::min(iv[a].first, li);
        iv[a].last = std::max(iv[a].last, li);
      }
    for (int32_t k : keep_) iv[k].last = end;
    // Transfers run between steps, when only persistent and kept tensors hold bytes.
    for (int32_t t : {plan_.staging, plan_.transferFirstRow})
      if (t >= 0) iv[t].first = iv[t].last = end;
    for (auto& t : iv)
      if (t.first > t.last) t.first = t.last = 0;
    // Pools as large as the profile's device allocates at once. A tensor larger than that
    // leaves the arena in one pool, which compile refuses (memory_report.h names the tensor).
    const ArenaPlacement pl = planMemory(iv, plan_.alignment, profile_.maxAllocBytes);
    for (size_t i = 0; i < iv.size(); ++i) plan_.tensors[i].offset = plan_.tensors[i].image() ? 0 : pl.offsets[i];
    plan_.arenaBytes = pl.peakBytes;
    plan_.poolBytes = pl.poolBytes;
    const int64_t imageBytes = planImages(iv);
    if (stats) {
      stats->persistentBytes = pl.persistentBytes;
      stats->transientBytes = pl.peakBytes - pl.persistentBytes;
      stats->imageBytes = imageBytes;
    }
    return Status::success();
  }

  // Image objects: no device here can put an image over the arena (cl_khr_image2d_from_buffer),
  // so images are their own allocations. Tensors of equal extent whose lifetimes do not overlap
  // share one (first fit in order of first use); persistent ones keep theirs. Returns the bytes
  // of all image objects.
  int64_t planImages(const std::vector<Interval>& iv) {
    std::vector<int32_t> order;
    for (size_t i = 0; i < plan_.tensors.size(); ++i)
      if (plan_.tensors[i].image()) order.push_back(static_cast<int32_t>(i));
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return iv[a].first < iv[b].first; });
    std::vector<int64_t> busyUntil;  // per slot: the last launch of its latest tensor (INT64_MAX: persistent)
    for (int32_t t : order) {
      planfile::Tensor& pt = plan_.tensors[t];
      int32_t slot = -1;
      for (size_t s = 0; s < plan_.imageSlots.size() && slot < 0 && !iv[t].persistent; ++s)
        if (plan_.imageSlots[s][0] == pt.imageWidth && plan_.imageSlots[s][1] == pt.imageHeight &&
            busyUntil[s] < iv[t].first)
          slot = static_cast<int32_t>(s);
      if (slot < 0) {
        slot = static_cast<int32_t>(plan_.imageSlots.size());
        plan_.imageSlots.push_back({pt.imageWidth, pt.imageHeight});
        busyUntil.push_back(0);
      }
      busyUntil[slot] = iv[t].persistent ? std::numeric_limits<int64_t>::max() : iv[t].last;
      pt.imageSlot = slot;
    }
    return plan_.imageBytes();
  }

  const PlanInputs& in_;
  const ir::Graph& g_;
  const Profile& profile_;
  Plan plan_;
  std::vector<ir::ValueId> root_;
  std::set<ir::ValueId> trainable_, state_, buffers_;
  std::map<ir::ValueId, int32_t> tensorOfRoot_;
  std::map<std::string, std::string> kernelBase_;
  std::map<std::string, int32_t> entryIndex_;
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<int64_t>>> entryWork_;  // global, local
  const passes::PassOptions* options_;
  codegen::Target target_;
  std::set<int32_t> keep_;  // tensors whose bytes survive the step (bind-runtime's, for plan-memory)
  std::vector<std::string> kernelSources_;
  std::vector<std::pair<int32_t, layout::Layout>> packed_;  // host tensors in another layout
  // Per launch while the list is built: its kernel, and what batching needs of it.
  std::vector<codegen::LaunchSpec> specs_;
  std::vector<LaunchAccess> access_;
  std::map<std::string, int64_t> sourceIds_;
};

}  // namespace

const std::vector<PlanStep>& planSteps() {
  static const std::vector<PlanStep> steps = {
      {"select-kernels", "every launch, tensor and kernel source comes from it"},
      {"batch-launches", ""},
      {"merge-kernels", "launches name their kernels here"},
      {"bind-runtime", "the runtime finds the plan's inputs, loss, trainables and outputs through it"},
      {"add-transfers", "host values stored in another layout are packed and unpacked by its launches"},
      {"plan-memory", "every tensor needs an offset in the arena or an image"},
      {"emit-program", "the kernels need their program"}};
  return steps;
}

Result<Plan> buildPlan(const PlanInputs& in, const Profile& profile, BuildStats* stats,
                       const passes::PassOptions* options) {
  FBL_ASSERT(in.graph != nullptr);
  return Builder(in, profile, options).build(stats);
}

PlanInputs trainingInputs(const autodiff::TrainingGraph& tg, std::string model) {
  PlanInputs in;
  in.graph = &tg.graph;
  in.loss = tg.loss;
  in.step = tg.step;
  in.lr = tg.lr;
  in.accumKeep = tg.accumKeep;
  in.accumulators = tg.accumulators;
  in.trainables = tg.trainables;
  in.state = tg.state;
  in.buffers = tg.buffers;
  in.model = std::move(model);
  return in;
}

}  // namespace fbl::plan
