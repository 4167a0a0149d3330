# Cross-compiling for arm64 Linux with Debian's cross toolchain (g++-aarch64-linux-gnu) and its
# multiarch arm64 packages (ocl-icd-opencl-dev:arm64): `bash scripts/dev.sh arm64` installs them
# and configures build-arm64/ with this file and -DFBL_RUNTIME_ONLY=ON.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: libraries in /usr/lib/aarch64-linux-gnu, the C library in /usr/aarch64-linux-gnu;
# arch-independent headers and CMake configs (OpenCL headers, nlohmann_json) in /usr.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
