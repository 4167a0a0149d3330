// Reads of JSON fields whose errors name the file and the field's path ("FILE: field 'a.b':
// what"). The profile's readers (compiler/profile/profile.cc, sim/memory_model.cc) derive their
// typed readers from it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "compiler/support/result.h"

namespace fbl {

struct JsonFieldReader {
  const std::string& origin;  // the file, for every error

  Error bad(const std::string& field, const std::string& what) const {
    return makeError("{}: field '{}': {}", origin, field, what);
  }
  Result<const nlohmann::json*> get(const nlohmann::json& obj, const std::string& key, const std::string& path) const {
    auto it = obj.find(key);
    if (it == obj.end()) return bad(path, "missing");
    return &*it;
  }
};

}  // namespace fbl
