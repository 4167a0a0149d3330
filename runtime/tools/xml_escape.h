// Text placed in an SVG (XML) document: fbl-train's loss curve and fbl-bench's charts.
#pragma once

#include <string>

namespace fbl {

inline std::string xmlEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '&') out += "&amp;";
    else if (ch == '"') out += "&quot;";
    else out += ch;
  }
  return out;
}

}  // namespace fbl
