// Where fbl-bench finds a committed hardware profile by name: profiles/ under the working
// directory (a run from the repository root, or from a copy of it on a device machine), else
// the source tree's profiles/.
#pragma once

#include <string>

namespace fbl::bench {

// "profiles/<stem>.json" where it exists, else the source tree's; the first when neither does
// (the loader then names the missing file).
std::string findProfile(const std::string& stem);

}  // namespace fbl::bench
