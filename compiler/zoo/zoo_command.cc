#include "compiler/zoo/zoo_command.h"

#include <cstdio>

#include <fmt/format.h>

namespace fbl::zoo {

int runZoo(const ZooArgs& args) {
  if (args.list) {
    for (const auto& e : zooEntries()) fmt::print("{:<22} {}\n", e.name, e.summary);
    return 0;
  }
  if (args.name.empty() || args.output.empty()) {
    fmt::print(stderr, "error: zoo needs a model name and -o MODEL.onnx (fblc zoo --list names them)\n");
    return 2;
  }
  auto built = buildZooModel(args.name, args.options);
  if (!built.ok()) {
    fmt::print(stderr, "error: {}\n", built.error().message);
    return 1;
  }
  OnnxBuilder& b = **built;
  if (Status s = b.write(args.output); !s.ok()) {
    fmt::print(stderr, "error: {}\n", s.error().message);
    return 1;
  }
  fmt::print("{}: {}{}, {} nodes, {:.1f}M parameters ({})\n", args.output, args.name,
             args.options.tiny ? " (tiny)" : "", b.nodeCount(), b.parameterElements() / 1e6,
             args.options.tiny ? "random weights inside, fixed seed"
                               : "no weights: external data that is not written");
  return 0;
}

}  // namespace fbl::zoo
