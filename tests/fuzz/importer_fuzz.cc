// libFuzzer target: arbitrary bytes as an .onnx file. The importer must answer every input with
// a graph or a one-line error; a model it accepts then goes through loadModel (folding, shape
// inference, clean-up), which must do the same. Built and run by tests/scripts/fuzz_importer.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/onnx/importer.h"
#ifdef FBL_FUZZ_LOAD_MODEL
#include "compiler/passes/load_model.h"
#endif

namespace {

// An error must be one non-empty line: anything else is a finding.
void checkError(const fbl::Error& e) {
  if (e.message.empty() || e.message.find('\n') != std::string::npos) {
    std::fprintf(stderr, "bad error message: [%s]\n", e.message.c_str());
    std::abort();
  }
}

#ifdef FBL_FUZZ_LOAD_MODEL
// A private folder for the model file (under $TMPDIR), so that external-data paths resolve
// inside it; removed at exit.
std::string& modelDir() {
  static std::string dir;
  return dir;
}

void removeModelDir() {
  std::remove((modelDir() + "/model.onnx").c_str());
  std::remove(modelDir().c_str());
}

const std::string& modelPath() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/fbl_fuzz_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    modelDir() = tmpl;
    std::atexit(removeModelDir);
    return tmpl + "/model.onnx";
  }();
  return path;
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto g = fbl::onnx::importModelFromBytes(bytes, "fuzz.onnx");
  if (!g.ok()) {
    checkError(g.error());
    return 0;
  }
#ifdef FBL_FUZZ_LOAD_MODEL
  const std::string& path = modelPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  auto loaded = fbl::passes::loadModel(path);
  if (!loaded.ok()) checkError(loaded.error());
#endif
  return 0;
}
