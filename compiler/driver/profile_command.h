// `fblc profile`: measure the local OpenCL device into a profiles/*.json and show what R-Tile
// would choose with it, so two runs can be compared by their choices.
#pragma once

#include <string>
#include <vector>

#include "compiler/layout/rtile.h"

namespace fbl::driver {

struct ProfileArgs {
  int device = 0;
  std::string output;  // -o PROFILE.json
  std::string base;    // --base: public facts kept where nothing is measured
  std::string name;    // defaults to the output file's stem
  int reps = 5;
  bool list = false;   // --list: print the devices and exit
};

int runProfile(const ProfileArgs& args);

// Representative R-Tile problems (shapes and consumers from the paper's LoRA MatMul example),
// whose choices `fblc profile` prints after measuring.
std::vector<layout::RTileProblem> representativeProblems();

// One line per problem: "name: HxW intra inter pad% score" (or the error).
std::vector<std::string> describeChoices(const profile::HardwareProfile& p);

}  // namespace fbl::driver
