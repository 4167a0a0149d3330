// PyTorch parameter names for weights the dynamo exporter's optimizer renamed (optimize=True, the
// default): it folds `Transpose(lora_A.weight)` into a new initializer `val_94` holding W^T, and
// renames weights it copies. Every node still carries its PyTorch origin in metadata_props
// (NodeProto field 9, newer than the ONNX 1.12 protos here, so it arrives as an unknown field):
//   pkg.torch.onnx.fx_node      "%linear : ... = call_function[target=torch.ops.aten.linear.default]
//                                (args = (%x, %p_m_base_model_..._lora_a_default_weight), ...)"
//   pkg.torch.onnx.name_scopes  "['', 'm', ..., 'm.base_model....q_proj.lora_A.default', 'linear']"
//
// recoverExportNames:
// 1. Collects every module path of every node's name_scopes, keyed by its mangled form (dots to
//    underscores, lower case: how torch.export names a parameter's placeholder `p_<path>_<attr>`).
// 2. For each initializer named like `val_12`, reads the `%p_...` arguments of the fx calls of the
//    nodes that read it; one candidate (a 1-D tensor takes the `_bias` one, others the rest) and
//    the same one from every reader, else the initializer stays as it is.
// 3. The name is the longest module path whose mangled form prefixes the argument, then `.` and
//    the attribute that remains (`m.base_model....lora_A.default` + `.weight`).
// 4. A weight that an `aten.linear` reads through MatMul (or Gemm with transB=0) was folded as W^T:
//    it becomes a new initializer W under its name, transposed back, and a Transpose node gives
//    the readers the value they had (an Identity where nothing was transposed; drop-noops removes
//    it). So gradients, `--trainable '*lora_*'`, checkpoints and `--export-adapter` see PyTorch's
//    names in PyTorch's orientation, as in an optimize=False export. A name that already exists
//    with equal contents is shared.
// 5. An initializer the optimizer folded from one parameter alone (value_info metadata
//    `pkg.onnxscript.optimizer.folded_from`) and still unnamed is named after its source when its
//    own name says the fold: `permute_N`, `t_N`, `transpose_N` (2-D: stored transposed back, as 4),
//    `clone_N`, `alias_N`, `detach_N` (as it is). So LoRA on an embedding (lora_embedding_A/B,
//    folded as `permute`, `permute_1`) trains.
// 6. A Gemm that an `aten.linear` with a bias parameter became, whose bias the optimizer dropped
//    (it removes a zero addend: a classifier's fresh bias), gets that bias back: zeros under its
//    name, the Gemm's C.
// 7. Every parameter the metadata names that is still no initializer of the graph, and every
//    parameter folded into a constant with other values (DoRA's weight norm and magnitude), goes
//    to Graph::foldedParameters: a trainable selection that matches one is refused
//    (autodiff/trainable.cc) instead of training a subset, or a stale copy, silently.
// 8. Anything else keeps its `val_N` name; a trainable glob that then finds nothing says that the
//    names were lost with the metadata (autodiff/trainable.cc). A LoRA parameter whose name the
//    metadata names but does not settle is an import error (it would silently not train).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace onnx {
class GraphProto;
class NodeProto;
}

namespace fbl::onnx {

struct NodeOrigin {
  std::string fxNode;               // pkg.torch.onnx.fx_node, empty when absent
  std::vector<std::string> scopes;  // pkg.torch.onnx.name_scopes, parsed
};

// How torch.export names a module path inside a placeholder (`%p_<path>`, `%b_<path>`): dots
// become underscores, lower case.
std::string mangle(std::string_view path);

// The two metadata entries of a node, read from its unknown fields (or from metadata_props
// where the protos know it).
NodeOrigin readNodeOrigin(const ::onnx::NodeProto& node);

// Per value name, the values the exporter's optimizer folded it from (value_info metadata
// `pkg.onnxscript.optimizer.folded_from`, read from unknown fields as NodeOrigin is).
using FoldedFrom = std::map<std::string, std::vector<std::string>>;
FoldedFrom readFoldedFrom(const ::onnx::GraphProto& graph);

// `origins[i]` belongs to g.nodes[i] (the importer's order). Returns how many initializers got
// their PyTorch names back.
// An initializer that readers' metadata calls a LoRA parameter but whose name cannot be settled
// is an error: left as `val_N` it would silently drop out of '*lora_*'.
Result<int> recoverExportNames(ir::Graph& g, const std::vector<NodeOrigin>& origins,
                               const FoldedFrom& foldedFrom = {});

// "val_12": the name the dynamo exporter's optimizer gives a weight it folded or copied.
bool looksExporterRenamed(std::string_view name);

}  // namespace fbl::onnx
