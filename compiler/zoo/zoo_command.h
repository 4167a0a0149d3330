// `fblc zoo NAME [--tiny] [--layers N] [--seq N] [--batch N] [--lora-rank R] -o MODEL.onnx`
// writes a zoo model (compiler/zoo/zoo.h); `fblc zoo --list` lists them.
#pragma once

#include <string>

#include "compiler/zoo/zoo.h"

namespace fbl::zoo {

struct ZooArgs {
  std::string name;
  std::string output;
  bool list = false;
  ZooOptions options;
};

// Prints one line about the written file; errors go to stderr as one line. Exit code 0/1/2.
int runZoo(const ZooArgs& args);

}  // namespace fbl::zoo
