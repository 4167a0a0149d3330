# Turns kernels_cl/*.cl into one C++ source (run at build time; nothing generated is committed).
# Usage: cmake -DOUT=<file.cc> -DDIR=<kernels_cl> -P embed.cmake
file(GLOB SOURCES ${DIR}/*.cl)
list(SORT SOURCES)
set(body "")
foreach(f ${SOURCES})
  get_filename_component(name ${f} NAME_WE)
  file(READ ${f} text)
  string(APPEND body "    {\"${name}\", R\"FBLCL(${text})FBLCL\"},\n")
endforeach()
file(WRITE ${OUT}.new "// Generated from kernels_cl/*.cl by kernels_cl/embed.cmake. Do not edit.
#include \"compiler/codegen/templates.h\"

#include <map>

namespace fbl::codegen {

std::string_view kernelTemplate(std::string_view name) {
  static const std::map<std::string_view, std::string_view> kTemplates = {
${body}  };
  auto it = kTemplates.find(name);
  return it == kTemplates.end() ? std::string_view() : it->second;
}

}  // namespace fbl::codegen
")
file(COPY_FILE ${OUT}.new ${OUT} ONLY_IF_DIFFERENT)
