// The OpenCL C 1.2 kernel templates of kernels_cl/, embedded at build time (kernels_cl/embed.cmake).
// A template is kernel source with {{KEY}} holes that codegen fills with names, sizes and
// generated index code.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace fbl::codegen {

// The text of kernels_cl/<name>.cl; empty when there is none.
std::string_view kernelTemplate(std::string_view name);

// Replaces every {{KEY}} of `tmpl` by vars[KEY]; a hole without a value is a bug in codegen.
std::string instantiate(std::string_view tmpl, const std::map<std::string, std::string>& vars);

}  // namespace fbl::codegen
