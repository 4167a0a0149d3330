// Shell-style name patterns (`*lora_*`, `*.q_proj.*`) for --trainable and similar options.
#pragma once

#include <string_view>

namespace fbl {

// '*' matches any run of characters (dots included), '?' one character; no escapes.
bool globMatch(std::string_view pattern, std::string_view text);

}  // namespace fbl
