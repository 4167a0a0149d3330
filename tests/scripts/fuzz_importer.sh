#!/usr/bin/env bash
# Fuzzes the ONNX importer (and loadModel on what it accepts) with libFuzzer + AddressSanitizer:
# builds the target (tests/fuzz/build_importer_fuzz.sh: nothing to do when the build made it),
# seeds a fresh corpus with the corpus models under 2 MB (and three exports of tests/data/corpus
# and the Resize cases of tests/data/resize), fuzzes for FUZZ_SECONDS (30), and fails on any
# crash, leak, timeout or malformed error (the artifact is kept in BUILD/fuzz).
# Usage: fuzz_importer.sh [BUILD_DIR] [SOURCE_DIR]   (CTest passes both)
set -euo pipefail

src=$(cd "${2:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)
build=$(mkdir -p "${1:-$src/build}" && cd "${1:-$src/build}" && pwd)
out=$build/fuzz
seconds=${FUZZ_SECONDS:-30}

bash "$src/tests/fuzz/build_importer_fuzz.sh" "$build" "$src"
if [ -x "$out/importer_fuzz_full" ]; then target=importer_fuzz_full; else target=importer_fuzz_import; fi

corpus=$out/corpus
rm -rf "$corpus" && mkdir -p "$corpus" "$out/artifacts"
for m in "$src"/tests/data/*/model.onnx; do
  size=$(stat -c %s "$m")
  if [ "$size" -lt 2000000 ]; then cp "$m" "$corpus/$(basename "$(dirname "$m")").onnx"; fi
done
# Two optimize=True exports of the architecture corpus: their node metadata (unknown field 9)
# feeds the name recovery (compiler/onnx/export_names.h). DeBERTa-v2's optimize=False export and
# the Resize cases reach decompose-ops (Tile, Clip, Resize) and the piecewise-constant ops.
for a in gpt2/opt swin/opt deberta_v2/noopt; do
  m=$src/tests/data/corpus/$a/model.onnx
  if [ -f "$m" ]; then cp "$m" "$corpus/corpus-${a/\//-}.onnx"; fi
done
for m in "$src"/tests/data/resize/case_*/model.onnx; do
  if [ -f "$m" ]; then cp "$m" "$corpus/resize-$(basename "$(dirname "$m")").onnx"; fi
done
echo "seeds: $(ls "$corpus" | tr '\n' ' ')"

# ASan's default 'detect_leaks' stays on; the per-input timeout catches hangs.
set +e
mkdir -p "$out/tmp"
TMPDIR=$out/tmp ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$out/$target" "$corpus" \
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
