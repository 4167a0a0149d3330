#!/usr/bin/env bash
# Builds the ONNX importer's libFuzzer target with AddressSanitizer under BUILD/fuzz/:
#   1. writes a small ninja file that compiles what loadModel reaches with clang++-15
#      (-fsanitize=fuzzer-no-link,address, -O0: five times faster to build than -O1, which
#      matters more than speed in a 30 s run), incrementally, into an archive;
#   2. links tests/fuzz/importer_fuzz.cc with loadModel (BUILD/fuzz/importer_fuzz_full); if that
#      link fails (a new dependency outside the compiled files), says so loudly and links the
#      importer alone (BUILD/fuzz/importer_fuzz_import).
# The build runs it (tests/CMakeLists.txt), so that script.fuzz_importer spends its time fuzzing;
# that test runs it again, which rebuilds nothing when the build did.
# Usage: build_importer_fuzz.sh [BUILD_DIR] [SOURCE_DIR]
set -euo pipefail

src=$(cd "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)
build=$(mkdir -p "${1:-$src/build}" && cd "${1:-$src/build}" && pwd)
out=$build/fuzz
cxx=clang++-15

if ! command -v "$cxx" >/dev/null; then
  echo "FAIL: $cxx not found; install the clang-15 package (scripts/dev.sh and CI do)" >&2
  exit 1
fi
if ! command -v ninja >/dev/null; then
  echo "FAIL: ninja not found; install ninja-build" >&2
  exit 1
fi

# What loadModel reaches: import, IR, op schemas, reference kernels (folding) and the passes.
mapfile -t sources < <(cd "$src" && ls compiler/ir/*.cc compiler/onnx/*.cc compiler/ops/*.cc \
  compiler/ref/*.cc compiler/support/*.cc compiler/passes/*.cc compiler/layout/*.cc 2>/dev/null)

mkdir -p "$out"
{
  echo "cxx = $cxx"
  echo "flags = -std=c++20 -O0 -gline-tables-only -fsanitize=address,fuzzer-no-link" \
       "-DONNX_ML=1 -DONNX_NAMESPACE=onnx -DFBL_SOURCE_DIR=\\\"$src\\\" -I$src -w"
  echo "rule cc"
  echo "  command = \$cxx \$flags \$defs -MMD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  for s in "${sources[@]}"; do
    echo "build obj/${s%.cc}.o: cc $src/$s"
  done
  echo "build obj/importer_fuzz_full.o: cc $src/tests/fuzz/importer_fuzz.cc"
  echo "  defs = -DFBL_FUZZ_LOAD_MODEL"
  echo "build obj/importer_fuzz_import.o: cc $src/tests/fuzz/importer_fuzz.cc"
  echo "build objects: phony $(printf 'obj/%s.o ' "${sources[@]%.cc}") obj/importer_fuzz_full.o obj/importer_fuzz_import.o"
} > "$out/build.ninja"

# Keep going past a file that does not compile (clang-15 lags g++ on some C++20): the link below
# shows whether it was needed. Failed objects are left out of the archive, stale ones removed.
start=$(date +%s)
ninja -C "$out" -k 0 -j"$(nproc)" objects > "$out/build.log" 2>&1 || true
mapfile -t failed < <(sed -n 's|^FAILED: \(obj/.*\.o\) *$|\1|p' "$out/build.log")
objs=()
for s in "${sources[@]}"; do
  o=obj/${s%.cc}.o
  if printf '%s\n' "${failed[@]}" | grep -qxF "$o"; then rm -f "$out/$o"; continue; fi
  [ -f "$out/$o" ] && objs+=("$o")
done
if [ ${#failed[@]} -gt 0 ]; then
  grep -m5 'error:' "$out/build.log" || true
  echo "WARNING: did not compile with $cxx: ${failed[*]} (log: $out/build.log)" >&2
fi
(cd "$out" && rm -f libfbl_fuzz.a && ar rcs libfbl_fuzz.a "${objs[@]}")

# The archive lets each link take only the objects its entry point reaches.
link() {
  (cd "$out" && [ -f "obj/$1.o" ] &&
    $cxx -fsanitize=address,fuzzer "obj/$1.o" libfbl_fuzz.a -o "$1" \
      -lonnx_proto -lprotobuf -lfmt -lpthread) > "$out/link_$1.log" 2>&1
}
rm -f "$out/importer_fuzz_full" "$out/importer_fuzz_import"
target=importer_fuzz_full
if ! link importer_fuzz_full; then
  grep -m10 -E 'undefined|error' "$out/link_importer_fuzz_full.log" || true
  echo "WARNING: the loadModel fuzz target did not link (log: $out/link_importer_fuzz_full.log);" \
       "fuzzing the importer alone" >&2
  target=importer_fuzz_import
  if ! link importer_fuzz_import; then
    grep -m20 -E 'undefined|error' "$out/link_importer_fuzz_import.log" "$out/build.log" || true
    echo "FAIL: the importer fuzz target did not build" >&2
    exit 1
  fi
fi
echo "built $target in $(( $(date +%s) - start )) s"

