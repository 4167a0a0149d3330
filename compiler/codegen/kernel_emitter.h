// Kernel selection: for one graph node, the OpenCL launches that compute it, each an
// instantiated template of kernels_cl/ with its arguments and sizes. Shapes, strides and
// attribute values are baked into the source as literals, so the device compiler folds the
// index arithmetic; identical sources are later merged into one kernel (plan builder).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/layout/wave_footprint.h"
#include "compiler/codegen/matmul_tiling.h"
#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::codegen {

// A launch argument: a graph value, or one of the node's scratch tensors.
struct ArgRef {
  bool scratch = false;
  int32_t index = 0;  // ValueId, or index into NodeCode::scratch
};

struct LaunchSpec {
  std::string source;  // kernel source with the {{NAME}} hole for the kernel's name
  std::string entry;   // suffix of the entry point after the name ("" or "_rows", ...)
  std::string tag;     // short op name used in the kernel name
  std::vector<ArgRef> args;
  std::vector<int64_t> global;
  std::vector<int64_t> local;  // empty: the driver chooses
  // Non-empty: the kernel is a narrow product that one launch may run with others of its source
  // (narrowBatchEntry, compiler/plan/launch_batching.h); its parameter list.
  std::string productParams;
  // Narrow products only: this launch's source and work sizes when one launch runs `products`
  // of them, tiled for that launch (emitRTileMatmulNarrow's launchProducts); the same args.
  std::function<Result<LaunchSpec>(int64_t products)> tiledForBatch;
};

struct ScratchSpec {
  ir::DType dtype = ir::DType::F32;
  ir::Shape shape;
  // Counts a kernel keeps between its groups: zeroed at load, left zero by every launch, so
  // they live for the whole run (planfile::Role::Counter), not a step.
  bool counts = false;
};

struct NodeCode {
  std::vector<LaunchSpec> launches;
  std::vector<ScratchSpec> scratch;
  // Output 0 is input `aliasOf`'s bytes under another shape (Reshape, Unsqueeze, ...).
  ir::ValueId aliasOf = ir::kNoValue;
};


struct Target {
  int64_t workgroup = 64;  // work-items per group for 1-D launches (from the profile)
  // The defaults describe the PoCL CPU device the tests run on; plans set these from the profile.
  int64_t computeUnits = 2;
  // The profile's MatMul tilings and cost model; without candidates, tuning.matmulTile.
  MatmulCostModel matmul;
  // The per-device numbers of the tiling rules (the profile's "kernels" block).
  DeviceTuning tuning = defaultTuning(DeviceClass::kCpu);
  // Where the profile scores R-Tiles by wave footprint: its texture L1 (and the bracket's) and
  // wave size, by which MatMuls choose the staging order of their image operands
  // (matmul_staging.h). Empty: row-major staging.
  std::vector<layout::TextureL1> textureL1s;
  int64_t wave = 1;
};

// The launches computing node `n`; an error naming the node when no template fits.
Result<NodeCode> emitNode(const ir::Graph& g, const ir::Node& n, const Target& target);

// OpenCL C type for a dtype ("float", "long", "uchar"); empty when unsupported.
std::string_view clType(ir::DType t);

}  // namespace fbl::codegen
