#!/usr/bin/env bash
# Runs docs/guide.md: every fenced block whose info string is `sh`, in the page's order, in one
# bash (set -euo pipefail) from a folder that mirrors the repository's root (its entries linked,
# build/ the build under test, out/ fresh). A `sh torch` block runs when Python ($FBL_PYTHON,
# else python3) imports torch, transformers, peft, onnx and onnxscript; without them the test
# says it skipped them, and where the first one was it puts the repository's exported tiny Llama
# at out/export/model.onnx and token runs at out/data/train/ and out/data/eval/ (as .npy, written
# without Python), so every other command runs on them. A `c file=PATH` block is written to PATH
# when reached; every line of a `python excerpt=FILE` block must be a line of FILE. A command
# that fails, an unknown `sh` marker or an unclosed fence fails the test. Then the C app's final
# eval loss must be fbl-train's, and the adapters must be there. Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
work=$(mktemp -d /tmp/fbl-guide.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$build/pocl-cache}
export FBL_CACHE_DIR=$work/fbl-cache  # the program cache fbl-train uses by default
fail() { echo "FAIL: $*"; exit 1; }

root=$work/root
mkdir -p "$root"
for entry in "$src"/*; do
  name=$(basename "$entry")
  case $name in build|out) ;; *) ln -s "$entry" "$root/$name" ;; esac
done
ln -s "$(cd "$build" && pwd)" "$root/build"

py=${FBL_PYTHON:-python3}
if "$py" -c "import torch, transformers, peft, onnx, onnxscript" 2>/dev/null; then
  torch=1
  mkdir -p "$work/python"  # `python3` in the page is the Python that has them
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v "$py")" > "$work/python/python3"
  chmod +x "$work/python/python3"
  export PATH=$work/python:$PATH
else
  torch=0
fi

# What the page's blocks call: the stand-ins for the Python steps, the excerpt check.
cat > "$work/guide.sh" <<'EOF'
set -euo pipefail
src=$FBL_GUIDE_SRC
byte() { printf "\\$(printf %03o "$1")"; }
npy_tokens() {  # OUT SAMPLES FIRST: i64 [SAMPLES, 1, 16], runs of token ids below 256
  local header="{'descr': '<i8', 'fortran_order': False, 'shape': ($2, 1, 16), }" s k
  while (( (10 + ${#header} + 1) % 64 )); do header+=" "; done
  { printf '\x93NUMPY\x01\x00'; byte $(( (${#header} + 1) % 256 )); byte $(( (${#header} + 1) / 256 ))
    printf '%s\n' "$header"
    for (( s = $3; s < $3 + $2; ++s )); do
      for (( k = 0; k < 16; ++k )); do
        byte $(( (s * 37 + 11 + k * (1 + s % 4)) % 256 )); printf '\0\0\0\0\0\0\0'
      done
    done; } > "$1"
}
stand_in() {
  echo "stand-in: tests/data/llama-tiny as out/export/model.onnx, token runs as out/data/{train,eval}/input_0.npy"
  mkdir -p out/export out/data/train out/data/eval
  cp "$src/tests/data/llama-tiny/model.onnx" out/export/model.onnx
  npy_tokens out/data/train/input_0.npy 5 0
  npy_tokens out/data/eval/input_0.npy 1 5
}
check_excerpt() {  # LINE FILE: every line of stdin is a line of FILE
  local line
  while IFS= read -r line; do
    [ -z "$line" ] || grep -qxF -- "$line" "$src/$2" ||
      { echo "docs/guide.md:$1: this line of the excerpt is not in $2: $line"; return 1; }
  done
  echo "== docs/guide.md:$1: an excerpt of $2, every line found there"
}
EOF

# The page's blocks, appended as commands.
awk -v torch="$torch" '
  function heredoc(text) { return "<<'"'"'FBL_GUIDE_EOF'"'"'\n" text "FBL_GUIDE_EOF\n" }
  function flush() {
    if (lang == "sh" && attr == "torch" && !torch) {
      printf "echo \"== docs/guide.md:%d: SKIPPED (no torch, transformers, peft):\"; cat %s", start, heredoc(body)
      if (!stood_in++) print "stand_in"
    } else if (lang == "sh" && (attr == "" || attr == "torch")) {
      printf "echo \"== docs/guide.md:%d\"; cat %s%s", start, heredoc(body), body
    } else if (lang == "sh") {
      printf "docs/guide.md:%d: unknown marker \"%s\" (sh or sh torch)\n", start, attr > "/dev/stderr"; bad = 1
    } else if (attr ~ /^file=/) {
      path = substr(attr, 6)
      printf "echo \"== docs/guide.md:%d: writes %s\"; mkdir -p \"$(dirname %s)\"; cat > %s %s", start, path, path, path,
             heredoc(body)
    } else if (attr ~ /^excerpt=/) {
      printf "check_excerpt %d %s %s", start, substr(attr, 9), heredoc(body)
    }
  }
  !inblock && /^```/ { n = split(substr($0, 4), w, /[ \t]+/); lang = w[1]; attr = n > 1 ? w[2] : ""
                       start = NR; body = ""; inblock = 1; next }
  inblock && /^```[ \t]*$/ { flush(); inblock = 0; next }
  inblock { body = body $0 "\n" }
  END { if (inblock) { printf "docs/guide.md:%d: the fence is never closed\n", start > "/dev/stderr"; bad = 1 }
        exit bad }
' "$src/docs/guide.md" >> "$work/guide.sh" || fail "docs/guide.md: see above"

start=$(date +%s)
(cd "$root" && FBL_GUIDE_SRC=$src bash "$work/guide.sh") > "$work/log" 2>&1 ||
  { cat "$work/log"; fail "a command of docs/guide.md failed (above)"; }
cat "$work/log"
echo "-- the page's commands ran in $(( $(date +%s) - start )) s"

out=$root/out
for f in adapter/adapter_model.safetensors adapter/adapter_config.json app-run/adapter_model.safetensors \
         app-run/checkpoint.safetensors phone-run/adapter_model.safetensors phone/explain.html run/loss.svg; do
  [ -s "$out/$f" ] || fail "out/$f was not written"
done
fbl=$(grep '"eval_loss"' "$out/run/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": *\([^,}]*\).*/\1/')
app=$(grep -E '^eval loss [0-9.eE+-]+ -> [0-9.eE+-]+$' "$work/log" | head -1 | awk '{print $5}')
echo "eval loss after training: fbl-train $fbl, the C app $app"
awk -v a="$app" -v b="$fbl" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-5 * (b < 0 ? -b : b)) }' ||
  fail "the C app's eval loss ($app) is not fbl-train's ($fbl)"
if [ "$torch" = 1 ]; then
  grep -q '^peft eval loss' "$work/log" || fail "the peft evaluation printed nothing"
  echo "PASS (the export, dataset and peft steps ran with $py)"
else
  echo "PASS, but the export, dataset and peft steps were SKIPPED: $py does not import torch, transformers," \
       "peft, onnx and onnxscript (FBL_PYTHON names a Python that does); the other commands ran on tests/data/llama-tiny"
fi
