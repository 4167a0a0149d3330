#!/usr/bin/env bash
# Fuzzes the ONNX importer (and loadModel on what it accepts) with libFuzzer + AddressSanitizer.
#   1. Writes a small ninja file that compiles the folders loadModel reaches with clang++-15
#      (-fsanitize=fuzzer-no-link,address, -O0: five times faster to build than -O1, which
#      matters more than speed in a 30 s run) into an archive under BUILD/fuzz/, incrementally.
#   2. Links tests/fuzz/importer_fuzz.cc with loadModel; if that link fails (a new dependency
#      outside the compiled folders), says so loudly and fuzzes the importer alone (the archive
#      lets that link take only the objects the importer reaches).
#   3. Seeds a fresh corpus with the corpus models under 2 MB, fuzzes for FUZZ_SECONDS (30), and
#      fails on any crash, leak, timeout or malformed error (the artifact is kept in BUILD/fuzz).
# Usage: fuzz_importer.sh [BUILD_DIR] [SOURCE_DIR]   (CTest passes both)
set -euo pipefail

src=$(cd "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)
build=$(mkdir -p "${1:-$src/build}" && cd "${1:-$src/build}" && pwd)
out=$build/fuzz
seconds=${FUZZ_SECONDS:-30}
cxx=clang++-15

if ! command -v "$cxx" >/dev/null; then
  echo "FAIL: $cxx not found; install the clang-15 package (scripts/dev.sh and CI do)" >&2
  exit 1
fi
if ! command -v ninja >/dev/null; then
  echo "FAIL: ninja not found; install ninja-build" >&2
  exit 1
fi

# Everything loadModel reaches: import, IR, op schemas, reference kernels (folding), passes, and
# the training ops' schemas and kernels that the shared tables list.
mapfile -t sources < <(cd "$src" && ls compiler/ir/*.cc compiler/onnx/*.cc compiler/ops/*.cc \
  compiler/ref/*.cc compiler/passes/*.cc compiler/support/*.cc \
  compiler/autodiff/training_*.cc 2>/dev/null)

mkdir -p "$out"
{
  echo "cxx = $cxx"
  echo "flags = -std=c++20 -O0 -gline-tables-only -fsanitize=address,fuzzer-no-link" \
       "-DONNX_ML=1 -DONNX_NAMESPACE=onnx -DFBL_SOURCE_DIR=\\\"$src\\\" -I$src -w"
  echo "libs = -lonnx_proto -lprotobuf -lfmt -lpthread"
  echo "rule cc"
  echo "  command = \$cxx \$flags \$defs -MMD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "rule ar"
  echo "  command = rm -f \$out && ar rcs \$out \$in"
  echo "rule link"
  echo "  command = \$cxx -fsanitize=address,fuzzer \$in -o \$out \$libs"
  for s in "${sources[@]}"; do
    echo "build obj/${s%.cc}.o: cc $src/$s"
  done
  echo "build obj/importer_fuzz_full.o: cc $src/tests/fuzz/importer_fuzz.cc"
  echo "  defs = -DFBL_FUZZ_LOAD_MODEL"
  echo "build obj/importer_fuzz_import.o: cc $src/tests/fuzz/importer_fuzz.cc"
  # Archives, so that the link pulls in only the objects it needs.
  echo "build libfull.a: ar $(printf 'obj/%s.o ' "${sources[@]%.cc}")"
  echo "build importer_fuzz_full: link obj/importer_fuzz_full.o libfull.a"
  echo "build importer_fuzz_import: link obj/importer_fuzz_import.o libfull.a"
} > "$out/build.ninja"

start=$(date +%s)
target=importer_fuzz_full
if ! ninja -C "$out" -j"$(nproc)" importer_fuzz_full > "$out/build_full.log" 2>&1; then
  tail -20 "$out/build_full.log"
  echo "WARNING: the loadModel fuzz target did not build (log above, $out/build_full.log);" \
       "fuzzing the importer alone" >&2
  target=importer_fuzz_import
  if ! ninja -C "$out" -j"$(nproc)" importer_fuzz_import > "$out/build_import.log" 2>&1; then
    tail -40 "$out/build_import.log"
    echo "FAIL: the importer fuzz target did not build" >&2
    exit 1
  fi
fi
echo "built $target in $(( $(date +%s) - start )) s"

corpus=$out/corpus
rm -rf "$corpus" && mkdir -p "$corpus" "$out/artifacts"
for m in "$src"/tests/data/*/model.onnx; do
  size=$(stat -c %s "$m")
  if [ "$size" -lt 2000000 ]; then cp "$m" "$corpus/$(basename "$(dirname "$m")").onnx"; fi
done
echo "seeds: $(ls "$corpus" | tr '\n' ' ')"

# ASan's default 'detect_leaks' stays on; the per-input timeout catches hangs.
set +e
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$out/$target" "$corpus" \
  -max_total_time="$seconds" -max_len=2000000 -timeout=30 -rss_limit_mb=4096 \
  -artifact_prefix="$out/artifacts/" -print_final_stats=1 > "$out/fuzz.log" 2>&1
rc=$?
set -e
tail -25 "$out/fuzz.log"
if [ $rc -ne 0 ]; then
  echo "FAIL: libFuzzer exit code $rc; artifacts in $out/artifacts, full log $out/fuzz.log" >&2
  exit 1
fi
echo "fuzz_importer: $target ran ${seconds} s with no crash"
