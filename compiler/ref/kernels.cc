#include "compiler/ref/kernels.h"

#include <new>
#include <unordered_map>

#include "compiler/ref/kernels_common.h"

namespace fbl::ref {

std::vector<KernelEntry> onnxKernels() {
  std::vector<KernelEntry> all;
  for (auto family : {detail::elementwiseKernels, detail::shapeKernels, detail::reduceKernels,
                      detail::linalgKernels, detail::indexKernels}) {
    auto part = family();
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

namespace {
const std::unordered_map<std::string_view, EvalFn>& table() {
  static const auto* t = [] {
    auto* m = new std::unordered_map<std::string_view, EvalFn>();
    for (auto list : {onnxKernels, trainingKernels})
      for (const auto& [op, fn] : list()) {
        bool inserted = m->emplace(op, fn).second;
        FBL_ASSERT(inserted && "two reference kernels registered for one op");
      }
    return m;
  }();
  return *t;
}
}  // namespace

EvalFn findKernel(std::string_view op) {
  auto it = table().find(op);
  return it == table().end() ? nullptr : it->second;
}

Result<std::vector<ir::Tensor>> evalNode(const ir::Graph& g, const ir::Node& n,
                                         const Inputs& inputs) {
  const std::string& file = g.sourcePath.empty() ? g.name : g.sourcePath;
  auto located = [&](std::string msg) {
    return Error{file.empty() ? std::move(msg) : file + ": " + msg};
  };
  EvalFn fn = findKernel(n.op);
  if (fn == nullptr)
    return located(fmt::format("node '{}' ({}): no reference kernel for op '{}'", n.name, n.op,
                               n.op));
  try {
    auto r = fn(n, inputs);
    if (!r.ok()) return located(r.error().message);
    // Kernels compute every output the op defines; keep the ones the node names.
    size_t want = std::max<size_t>(n.outputs.size(), 1);
    if (r->size() < want)
      return located(fmt::format("node '{}' ({}): the kernel produced {} outputs, the node has {}",
                                 n.name, n.op, r->size(), want));
    r->resize(want);
    return r;
  } catch (const std::bad_alloc&) {
    return located(fmt::format("node '{}' ({}): out of memory", n.name, n.op));
  }
}

}  // namespace fbl::ref
