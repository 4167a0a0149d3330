# fbl_runtime_tests: the runtime's own tests, which build without the compiler: the C API over a
# plan the repository keeps (tests/data/c_api/, written by fblc; `FBL_UPDATE_GOLDEN=1
# build/bin/fbl_tests "[golden]"` writes it again when the plan format changes), datasets,
# fbl-train's loss curve, and profiling over a hand-written plan. The full build includes this
# file; a runtime-only build (FBL_RUNTIME_ONLY) does too where Catch2 and fmt are found.
# Needs: fbl_runtime_static (the runtime's C++ classes), FBL_RUNTIME_SOURCES.
enable_testing()
include(CTest)
include(Catch)

# PoCL's build flags for the tests that run whole plans: fbl_runtime_tests (through a compile
# definition, tests/runtime/whole_plan_environment.cc), fbl_device_tests, the script tests and the
# arm64 example (through their environment, tests/CMakeLists.txt). They check what a plan
# computes, and LLVM's optimizer made them about 2.3x slower. The kernel tests (fbl_tests) keep
# PoCL's optimizer, the path closest to a device compiler's. Empty runs them all optimized.
set(FBL_WHOLE_PLAN_POCL_FLAGS "-cl-opt-disable" CACHE STRING
    "POCL_EXTRA_BUILD_FLAGS for the tests that run whole plans")
# Catch2 v2's main is compiled once: it costs 15-28 s a compile.
add_library(fbl_catch_main OBJECT ${CMAKE_SOURCE_DIR}/tests/catch_main.cc)
target_link_libraries(fbl_catch_main PUBLIC Catch2::Catch2)

set(FBL_C_API_PLAN ${CMAKE_SOURCE_DIR}/tests/data/c_api/llama-tiny.fbp)
set(FBL_C_API_WEIGHTS ${CMAKE_SOURCE_DIR}/tests/data/c_api/llama-tiny.safetensors)
set(FBL_C_API_TEST_DEFINITIONS FBL_C_API_PLAN="${FBL_C_API_PLAN}" FBL_C_API_WEIGHTS="${FBL_C_API_WEIGHTS}")

file(GLOB FBL_RUNTIME_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/runtime/*_test.cc)
add_executable(fbl_runtime_tests ${FBL_RUNTIME_TEST_SOURCES} ${CMAKE_SOURCE_DIR}/runtime/tools/loss_curve.cc
                                 ${CMAKE_SOURCE_DIR}/tests/runtime/whole_plan_environment.cc $<TARGET_OBJECTS:fbl_catch_main>)
target_link_libraries(fbl_runtime_tests PRIVATE fbl_runtime_static fmt::fmt Catch2::Catch2)
target_compile_definitions(fbl_runtime_tests PRIVATE FBL_WHOLE_PLAN_POCL_FLAGS="${FBL_WHOLE_PLAN_POCL_FLAGS}"
                                                     ${FBL_C_API_TEST_DEFINITIONS})
catch_discover_tests(fbl_runtime_tests EXTRA_ARGS --warn NoTests PROPERTIES ENVIRONMENT "POCL_CACHE_DIR=${CMAKE_BINARY_DIR}/pocl-cache")
