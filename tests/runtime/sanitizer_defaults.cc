// fbl_c_api_asan_tests' sanitizer settings (CMakeLists.txt), compiled into it rather than set by
// ctest, so that a run by hand checks what CI checks. The sanitizers ask for them at start-up;
// LSAN_OPTIONS and UBSAN_OPTIONS in the environment still add to or override them.
extern "C" {

// PoCL and the LLVM it compiles kernels with keep their compiler state (pass managers, target
// machines, a few strings) until the process exits. None of it is fbl's; a leak of the runtime's
// own is still reported.
const char* __lsan_default_suppressions() { return "leak:libpocl.so\nleak:libLLVM\nleak:libclang-cpp\n"; }

const char* __ubsan_default_options() { return "print_stacktrace=1"; }

}  // extern "C"
