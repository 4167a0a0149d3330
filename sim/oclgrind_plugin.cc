// The Oclgrind plugin of `fbl-bench cache`: it hands every global-memory access of every
// work-item to sim::LaunchSimulator and appends one JSON line per launch to a file.
//
//  1. FBL_CACHE_SIM_MODEL names a JSON list of resolved memory models (sim/memory_model.h):
//     one run feeds the same accesses to each, so several GPUs cost one Oclgrind execution.
//     FBL_CACHE_SIM_OUT names the file that gets a line per kernel launch, with one counter
//     object per model (appended, so several contexts and processes can share it).
//  2. Buffers get flat addresses of their own (Oclgrind's addresses are a buffer index in the
//     top bits plus an offset); image arguments are found at kernelBegin from the kernel's
//     argument values and classified by address range.
//  3. Work-group begin/barrier/complete and each access go to the simulator; executed FP
//     instructions are counted for the roofline (add, sub, mul, div: 1 a lane element; fma,
//     mad and fmuladd: 2).
// isThreadSafe() is false: Oclgrind then runs work-groups one at a time, in order, which the
// simulator's compute-unit rounds rely on.
//
// Built with -fno-rtti (Oclgrind is), so that the Plugin typeinfo resolves.
#include <oclgrind/Context.h>
#include <oclgrind/Kernel.h>
#include <oclgrind/KernelInvocation.h>
#include <oclgrind/Memory.h>
#include <oclgrind/Plugin.h>
#include <oclgrind/WorkGroup.h>
#include <oclgrind/WorkItem.h>

#include <llvm/IR/Argument.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_map>

#include "sim/launch_simulator.h"

namespace {

using fbl::sim::LaneAccess;

constexpr uint64_t kBufferAlign = 4096;

int64_t channelCount(cl_channel_order o) {
  switch (o) {
    case CL_R: case CL_A: case CL_INTENSITY: case CL_LUMINANCE: return 1;
    case CL_RG: case CL_RA: return 2;
    case CL_RGB: return 3;
    default: return 4;
  }
}

int64_t channelBytes(cl_channel_type t) {
  switch (t) {
    case CL_SNORM_INT8: case CL_UNORM_INT8: case CL_SIGNED_INT8: case CL_UNSIGNED_INT8: return 1;
    case CL_SNORM_INT16: case CL_UNORM_INT16: case CL_SIGNED_INT16: case CL_UNSIGNED_INT16:
    case CL_HALF_FLOAT: return 2;
    default: return 4;
  }
}

class CacheSimPlugin : public oclgrind::Plugin {
 public:
  explicit CacheSimPlugin(const oclgrind::Context* c) : oclgrind::Plugin(c) {
    const char* out = std::getenv("FBL_CACHE_SIM_OUT");
    const char* model = std::getenv("FBL_CACHE_SIM_MODEL");
    out_ = out ? out : "";
    if (!model) {
      error_ = "FBL_CACHE_SIM_MODEL is not set (fbl-bench cache sets it)";
      return;
    }
    std::ifstream in(model);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_array() || j.empty()) {
      error_ = std::string(model) + ": not a JSON list of memory models";
      return;
    }
    for (const nlohmann::json& one : j) {
      auto m = fbl::sim::memoryModelFromJson(one, model);
      if (!m.ok()) {
        error_ = m.error().message;
        sims_.clear();
        return;
      }
      sims_.push_back(std::make_unique<fbl::sim::LaunchSimulator>(m.value()));
    }
  }

  bool isThreadSafe() const override { return false; }

  void memoryAllocated(const oclgrind::Memory* memory, size_t address, size_t size, cl_mem_flags,
                       const uint8_t*) override {
    if (memory->getAddressSpace() != oclgrind::AddrSpaceGlobal) return;
    globalMemory_ = memory;
    base_[memory->extractBuffer(address)] = next_;
    next_ += (size + kBufferAlign - 1) / kBufferAlign * kBufferAlign + kBufferAlign;
  }

  void kernelBegin(const oclgrind::KernelInvocation* inv) override {
    if (sims_.empty()) return;
    const oclgrind::Kernel* k = inv->getKernel();
    std::vector<fbl::sim::ImageArgument> images;
    for (auto it = k->values_begin(); it != k->values_end(); ++it) {
      const auto* arg = llvm::dyn_cast<llvm::Argument>(it->first);
      if (!arg || arg->getArgNo() >= k->getNumArguments()) continue;
      if (k->getArgumentTypeName(arg->getArgNo()).find("image") == llvm::StringRef::npos) continue;
      const auto* img = *reinterpret_cast<oclgrind::Image* const*>(it->second.data);
      images.push_back({flat(img->address), static_cast<int64_t>(img->desc.image_width),
                        static_cast<int64_t>(std::max<size_t>(1, img->desc.image_height)),
                        channelCount(img->format.image_channel_order) * channelBytes(img->format.image_channel_data_type)});
    }
    for (auto& s : sims_) s->beginLaunch(images);
    const oclgrind::Size3 l = inv->getLocalSize();
    localX_ = l.x, localY_ = l.y;
    groupItems_ = l.x * l.y * l.z;
    kernel_ = k->getName();
    global_ = inv->getGlobalSize();
    local_ = l;
  }

  void workGroupBegin(const oclgrind::WorkGroup* g) override {
    for (auto& s : sims_) s->beginGroup(g->getGroupIndex(), groupItems_);
  }
  void workGroupBarrier(const oclgrind::WorkGroup*, uint32_t) override {
    for (auto& s : sims_) s->barrier();
  }
  void workGroupComplete(const oclgrind::WorkGroup*) override {
    for (auto& s : sims_) s->endGroup();
  }
  void workItemBegin(const oclgrind::WorkItem*) override {
    ++workItems_;
  }

  void memoryLoad(const oclgrind::Memory* m, const oclgrind::WorkItem* wi, size_t address, size_t size) override {
    record(m, wi, address, size, false);
  }
  void memoryStore(const oclgrind::Memory* m, const oclgrind::WorkItem* wi, size_t address, size_t size,
                   const uint8_t*) override {
    record(m, wi, address, size, true);
  }
  void memoryAtomicLoad(const oclgrind::Memory* m, const oclgrind::WorkItem* wi, oclgrind::AtomicOp, size_t address,
                        size_t size) override {
    record(m, wi, address, size, false);
  }
  void memoryAtomicStore(const oclgrind::Memory* m, const oclgrind::WorkItem* wi, oclgrind::AtomicOp, size_t address,
                         size_t size) override {
    record(m, wi, address, size, true);
  }

  void instructionExecuted(const oclgrind::WorkItem*, const llvm::Instruction* ins,
                           const oclgrind::TypedValue& result) override {
    ++instructions_;
    switch (ins->getOpcode()) {
      case llvm::Instruction::FAdd: case llvm::Instruction::FSub: case llvm::Instruction::FMul:
      case llvm::Instruction::FDiv:
        flops_ += result.num;
        break;
      case llvm::Instruction::Call:
        flops_ += 2 * result.num * fusedMultiplyAdd(llvm::cast<llvm::CallInst>(ins));
        break;
      default:
        break;
    }
  }

  void kernelEnd(const oclgrind::KernelInvocation*) override {
    nlohmann::json line;
    if (sims_.empty()) {
      line = {{"error", error_.empty() ? "no memory model" : error_}};
    } else {
      line = {{"kernel", kernel_}, {"global", {global_.x, global_.y, global_.z}},
              {"local", {local_.x, local_.y, local_.z}}, {"models", nlohmann::json::array()}};
      for (auto& s : sims_) {
        // What Oclgrind executed is the same for every model; the plugin counts it once.
        s->counters().workItems += workItems_;
        s->counters().instructions += instructions_;
        s->counters().flops += flops_;
        line["models"].push_back(fbl::sim::countersToJson(s->endLaunch()));
      }
      workItems_ = instructions_ = flops_ = 0;
    }
    if (out_.empty()) return;
    if (FILE* f = std::fopen(out_.c_str(), "a")) {
      std::fputs((line.dump() + "\n").c_str(), f);
      std::fclose(f);
    }
  }

 private:
  uint64_t flat(size_t address) const {
    // Oclgrind's address: buffer index in the top bits, offset below (Memory::extract*).
    if (!globalMemory_) return address;
    auto it = base_.find(globalMemory_->extractBuffer(address));
    return (it == base_.end() ? 0 : it->second) + globalMemory_->extractOffset(address);
  }

  // 1 when the call computes a*b+c per element, else 0; cached per callee.
  int fusedMultiplyAdd(const llvm::CallInst* call) {
    const llvm::Function* f = call->getCalledFunction();
    if (!f) return 0;
    auto it = fmaCallee_.find(f);
    if (it != fmaCallee_.end()) return it->second;
    const std::string name = f->getName().str();
    const int is = name.find("fmuladd") != std::string::npos || name.rfind("llvm.fma", 0) == 0 ||
                   name.rfind("_Z3fma", 0) == 0 || name.rfind("_Z3mad", 0) == 0;
    fmaCallee_.emplace(f, is);
    return is;
  }

  void record(const oclgrind::Memory* m, const oclgrind::WorkItem* wi, size_t address, size_t size, bool store) {
    if (sims_.empty() || m->getAddressSpace() != oclgrind::AddrSpaceGlobal) return;
    const oclgrind::Size3 id = wi->getLocalID();
    LaneAccess a;
    a.address = flat(address);
    a.bytes = static_cast<uint32_t>(size);
    a.store = store;
    a.image = sims_.front()->imageAt(a.address);  // every model has the same images
    const size_t lane = id.x + localX_ * (id.y + localY_ * id.z);
    for (auto& s : sims_) s->access(lane, a);
  }

  std::vector<std::unique_ptr<fbl::sim::LaunchSimulator>> sims_;
  int64_t workItems_ = 0, instructions_ = 0, flops_ = 0;  // this launch's, for every model
  std::string error_, out_, kernel_;
  std::unordered_map<size_t, uint64_t> base_;  // Oclgrind buffer index -> flat base
  uint64_t next_ = kBufferAlign;
  const oclgrind::Memory* globalMemory_ = nullptr;
  std::unordered_map<const llvm::Function*, int> fmaCallee_;
  size_t localX_ = 1, localY_ = 1, groupItems_ = 1;
  oclgrind::Size3 global_, local_;
};

}  // namespace

extern "C" void initializePlugins(oclgrind::Context* context) {
  context->registerPlugin(new CacheSimPlugin(context));
}
