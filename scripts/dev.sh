#!/usr/bin/env bash
# One entry point for people and CI: installs what is missing (Debian packages), configures and
# builds into build/, then runs the main job (`demo`) or the whole test suite (`test`).
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

packages=(cmake ninja-build g++ libonnx-dev libprotobuf-dev protobuf-compiler llvm-15-dev
  clang-15 libclang-15-dev libfmt-dev libcli11-dev nlohmann-json3-dev catch2 libbenchmark-dev
  ocl-icd-opencl-dev opencl-headers opencl-clhpp-headers pocl-opencl-icd clinfo
  chromium-headless-shell  # tests/scripts/explain_html.sh renders `fblc explain --html`
  oclgrind liboclgrind-dev llvm-14-dev)  # `fbl-bench cache` (docs/cache.md); Oclgrind's headers need LLVM 14's

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
  if [ ! -f build/build.ninja ]; then
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  ninja -C build -j"$(nproc)"
}

cmd=${1:-demo}
install_missing
build
export POCL_CACHE_DIR="$root/build/pocl-cache"
case "$cmd" in
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
    ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
    ;;
  build) ;;
  *) echo "usage: scripts/dev.sh [demo|test|build]" >&2; exit 2 ;;
esac
