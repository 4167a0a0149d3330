// See profile_paths.h.
#include "bench/profile_paths.h"

#include <filesystem>

namespace fbl::bench {

std::string findProfile(const std::string& stem) {
  for (const std::string& dir : {std::string("profiles"), std::string(FBL_SOURCE_DIR) + "/profiles"}) {
    std::string p = dir + "/" + stem + ".json";
    if (std::filesystem::exists(p)) return p;
  }
  return "profiles/" + stem + ".json";
}

}  // namespace fbl::bench
