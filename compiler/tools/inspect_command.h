// `fblc inspect`: what a model holds, before and after the compiler's clean-up.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/autodiff/peft_trainables.h"
#include "compiler/ir/tensor.h"
#include "compiler/strategy/strategy.h"

namespace fbl::tools {

struct InspectArgs {
  std::string model;
  std::map<std::string, ir::Shape> shapes;  // --shape NAME=1x512
  std::vector<std::string> trainable = autodiff::peftTrainableGlobs();
  bool json = false;
  bool training = false;  // also show the joint training graph
  bool listOps = false;   // print the supported op vocabulary and exit
  // The layout pipeline that --training runs (docs/layout-pipeline.md).
  std::string profile;    // default: the source tree's profiles/adreno-830.json
  std::string strategy = strategy::strategyName(strategy::Strategy::kFBLayout);
  std::vector<std::string> dumpAfter;      // pass names, or "all"
  std::vector<std::string> disabledPasses;
  bool verifyPasses = false;
};

int runInspect(const InspectArgs& args);

}  // namespace fbl::tools
