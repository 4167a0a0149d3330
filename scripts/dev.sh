#!/usr/bin/env bash
# One entry point for people and CI: installs what is missing (Debian packages), configures and
# builds into build/, then runs the main job (`demo`) or the words check and the whole test
# suite (`test`).
# `arm64` cross-builds libfbl_runtime and the C example into build-arm64/ (docs/android.md);
# `arm64-test` also runs the example on PoCL for arm64 under qemu-user.
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

packages=(cmake ninja-build g++ libonnx-dev libprotobuf-dev protobuf-compiler llvm-15-dev
  clang-15 libclang-15-dev libfmt-dev libcli11-dev nlohmann-json3-dev catch2 libbenchmark-dev
  ocl-icd-opencl-dev opencl-headers opencl-clhpp-headers pocl-opencl-icd clinfo
  chromium-headless-shell  # tests/scripts/explain_html.sh renders `fblc explain --html`
  oclgrind liboclgrind-dev llvm-14-dev)  # `fbl-bench cache` (docs/cache.md); Oclgrind's headers need LLVM 14's

# The arm64 cross build (host tools, and arm64 OpenCL headers + ICD loader through multiarch).
arm64_packages=(cmake ninja-build g++-aarch64-linux-gnu nlohmann-json3-dev opencl-c-headers
  ocl-icd-opencl-dev:arm64)
# Running it: qemu-user, and PoCL for arm64 unpacked into build-arm64/qemu-sysroot rather than
# installed, because libpocl2:arm64 depends on clang-15:arm64, which cannot be installed beside the
# host's clang-15. Under qemu, PoCL links each kernel with the host's cross linker, which the clang
# driver finds through g++-aarch64-linux-gnu (/usr/lib/gcc-cross/aarch64-linux-gnu).
arm64_test_packages=(qemu-user)  # 12 MB; qemu-user-static is 63 MB
arm64_sysroot_packages=(pocl-opencl-icd:arm64 libpocl2:arm64 libpocl2-common libllvm15:arm64
  libclang-cpp15:arm64 libhwloc15:arm64 libudev1:arm64 libffi8:arm64 libedit2:arm64 libbsd0:arm64
  libmd0:arm64 libtinfo6:arm64 libxml2:arm64 libicu72:arm64 liblzma5:arm64 libz3-4:arm64
  libzstd1:arm64 zlib1g:arm64 libstdc++6:arm64 libgcc-s1:arm64 libc6:arm64 ocl-icd-libopencl1:arm64)

sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo

install_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {  # [TARGET...]: all by default
  if [ ! -f build/build.ninja ]; then
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  ninja -C build -j"$(nproc)" "$@"
}

add_arm64_arch() {
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "adding the arm64 architecture to dpkg (for ocl-icd-opencl-dev:arm64)"
    $sudo dpkg --add-architecture arm64
  fi
}

build_arm64() {
  add_arm64_arch
  install_missing "${arm64_packages[@]}"
  if [ ! -f build-arm64/build.ninja ]; then
    cmake -S . -B build-arm64 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DFBL_RUNTIME_ONLY=ON
  fi
  ninja -C build-arm64 -j"$(nproc)"
}

# Unpacks arm64_sysroot_packages (the versions apt has now) into build-arm64/qemu-sysroot, and
# writes build-arm64/qemu-icd/pocl.icd naming its libpocl by absolute path: PoCL finds its kernel
# library relative to where it was loaded from, and qemu -L does not redirect access(2).
arm64_sysroot() {
  install_missing "${arm64_test_packages[@]}"
  local sysroot=build-arm64/qemu-sysroot stamp=build-arm64/qemu-sysroot/.fbl-packages
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${arm64_sysroot_packages[*]}" ]; then
    unpack_arm64_sysroot "$sysroot" "$stamp"
  fi
  # Rewritten every time: the checkout may have moved.
  mkdir -p build-arm64/qemu-icd
  echo "$root/$sysroot/usr/lib/aarch64-linux-gnu/libpocl.so.2" > build-arm64/qemu-icd/pocl.icd
}

unpack_arm64_sysroot() {
  local sysroot=$1 stamp=$2
  echo "unpacking PoCL for arm64 into $sysroot"
  rm -rf "$sysroot" build-arm64/debs
  mkdir -p "$sysroot" build-arm64/debs
  # apt-get download runs as _apt when it can: give it a folder it may write.
  chmod 777 build-arm64/debs
  if ! (cd build-arm64/debs && apt-get download -q "${arm64_sysroot_packages[@]}" > download.log 2>&1); then
    grep -v '^W: Download is performed unsandboxed' build-arm64/debs/download.log >&2
    echo "error: apt-get download of PoCL for arm64 failed (above)" >&2; exit 1
  fi
  local n=0
  for d in build-arm64/debs/*.deb; do dpkg-deb -x "$d" "$sysroot"; n=$((n + 1)); done
  if [ "$n" -ne ${#arm64_sysroot_packages[@]} ]; then
    echo "error: got $n of ${#arm64_sysroot_packages[@]} arm64 packages in build-arm64/debs" >&2; exit 1
  fi
  [ -e "$sysroot/usr/lib/aarch64-linux-gnu/libpocl.so.2" ] || { echo "error: no libpocl.so.2 in $sysroot" >&2; exit 1; }
  rm -rf build-arm64/debs
  echo "${arm64_sysroot_packages[*]}" > "$stamp"
}

cmd=${1:-demo}
case "$cmd" in
  demo|test|build|arm64|arm64-test) ;;
  *) echo "error: unknown command '$cmd'; usage: scripts/dev.sh [demo|test|build|arm64|arm64-test]" >&2; exit 2 ;;
esac
case "$cmd" in
  arm64)
    build_arm64
    exit 0
    ;;
  test|arm64-test)
    # test: the words check first (.ci/check-words, seconds), so CI and the README agree.
    if [ "$cmd" = test ]; then bash .ci/check-words; fi
    # The suite runs the arm64 example under qemu (tests/CMakeLists.txt): one install for all.
    add_arm64_arch
    install_missing "${packages[@]}" "${arm64_packages[@]}" "${arm64_test_packages[@]}"
    if [ "$cmd" = test ]; then build; else build fblc; fi  # fblc compiles the example's plan
    build_arm64
    arm64_sysroot
    ;;
  *) install_missing "${packages[@]}"; build ;;
esac
export POCL_CACHE_DIR="$root/build/pocl-cache"
case "$cmd" in
  arm64-test)
    # Through ctest, so that the test runs with the environment CMake gives it.
    FBL_REQUIRE_ARM64=1 exec ctest --test-dir build -R '^arm64\.example_under_qemu$' --verbose
    ;;
  demo)
    # Compile the bundled tiny Llama for the PoCL CPU device and fine-tune its LoRA adapters.
    mkdir -p build/demo
    build/bin/fblc inspect tests/data/llama-tiny/model.onnx | head -12
    build/bin/fblc compile tests/data/llama-tiny/model.onnx --profile profiles/pocl-cpu.json \
      --lr 1e-2 -o build/demo/llama-tiny.fbp --report build/demo/report.json
    build/bin/fbl-train build/demo/llama-tiny.fbp --weights build/demo/llama-tiny.safetensors \
      --data tests/data/llama-tiny/test_data_set_0 --steps 50 --checkpoint-every 10 \
      --export-adapter build/demo/adapter
    ;;
  test)
    FBL_REQUIRE_ARM64=1 ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
    ;;
  build) ;;
esac
