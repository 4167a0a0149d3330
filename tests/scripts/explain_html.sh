#!/usr/bin/env bash
# `fblc explain` end to end: compile llama-tiny, print the explanation, write the HTML page and
# render it in headless Chromium. The page's script must have run (it writes
# <div id="fbl-rendered" data-nodes="N"> and one SVG rect and label per node, N as the text
# output says, and the at-a-glance cards) and its screenshot must not be blank. Bad plans give one line naming the file and exit 1.
# Chromium is required, not optional: scripts/dev.sh installs chromium-headless-shell.
# Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d /tmp/fbl-explain-html.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
fail() { echo "FAIL: $*"; exit 1; }

chrome=""
for c in chromium-headless-shell chromium chromium-browser; do
  if command -v "$c" >/dev/null 2>&1; then chrome=$c; break; fi
done
[ -n "$chrome" ] || fail "no headless Chromium (install chromium-headless-shell; scripts/dev.sh does)"
headless=(--headless --no-sandbox --disable-gpu --user-data-dir="$work/chrome" --window-size=1400,1000)

"$bin/fblc" compile "$src/tests/data/llama-tiny/model.onnx" --profile "$src/profiles/pocl-cpu.json" \
  -o "$work/tiny.fbp" >"$work/compile.txt"
"$bin/fblc" explain "$work/tiny.fbp" --html "$work/tiny.html" >"$work/explain.txt"

nodes=$(sed -n 's/^graph: \([0-9][0-9]*\) nodes$/\1/p' "$work/explain.txt")
[ -n "$nodes" ] && [ "$nodes" -gt 0 ] || fail "explain printed no node count"; 
for section in "^tensors (" "^transformation nodes (" "^launches (" "^totals by phase"; do
  grep -q "$section" "$work/explain.txt" || fail "explain output lacks '$section'"
done
grep -Eq '^  .* (linear|R-Tile [0-9]+x[0-9]+) ' "$work/explain.txt" || fail "no tensor has a layout"
grep -q "no explain section" "$work/explain.txt" && fail "the compiled plan has no explain section"
# Self-contained: nothing to fetch.
grep -Eiq '(src|href)=|@import|url\(' "$work/tiny.html" && fail "the page refers to outside resources"

"$chrome" "${headless[@]}" --dump-dom "file://$work/tiny.html" >"$work/dom.html" 2>"$work/chrome.log" ||
  { tail -5 "$work/chrome.log"; fail "chromium could not load the page"; }
grep -q "id=\"fbl-rendered\" data-nodes=\"$nodes\"" "$work/dom.html" ||
  fail "the page's script did not finish (no fbl-rendered marker with $nodes nodes)"
rects=$(grep -o '<rect ' "$work/dom.html" | wc -l)
[ "$rects" -eq "$nodes" ] || fail "the page drew $rects nodes, expected $nodes"
# At a glance: the memory verdict, the phases and the costliest launches; every box labelled.
grep -Eq 'class="(ok|bad)">(fits|does not fit)</span>' "$work/dom.html" || fail "no memory verdict at the top"
grep -q '<td>backward</td>' "$work/dom.html" || fail "no per-phase summary"
grep -q 'Costliest launches</h3><table>' "$work/dom.html" || fail "no costliest launches"
labels=$(grep -o '<text ' "$work/dom.html" | wc -l)
[ "$labels" -ge "$nodes" ] || fail "the page labelled $labels of $nodes nodes"
[ "$(grep -o 'class="filter"' "$work/dom.html" | wc -l)" -eq 3 ] || fail "the three tables have no search boxes"
launches=$(sed -n 's/^launches (\([0-9]*\)).*/\1/p' "$work/explain.txt")
rows=$(grep -o '<tr>' "$work/dom.html" | wc -l)
[ "$rows" -gt "$launches" ] || fail "the tables have $rows rows, fewer than the $launches launches"

# Non-blank: the page's screenshot is several times the size of an empty page's (a PNG of one
# colour compresses to almost nothing; boxes and table text do not).
echo '<!DOCTYPE html><html><body></body></html>' >"$work/blank.html"
"$chrome" "${headless[@]}" --screenshot="$work/page.png" "file://$work/tiny.html" 2>>"$work/chrome.log"
"$chrome" "${headless[@]}" --screenshot="$work/blank.png" "file://$work/blank.html" 2>>"$work/chrome.log"
[ -s "$work/page.png" ] || fail "no screenshot"
page=$(stat -c %s "$work/page.png"); blank=$(stat -c %s "$work/blank.png")
[ "$page" -gt $((blank * 4)) ] || fail "the screenshot looks blank ($page bytes, an empty page gives $blank)"

# Bad input: one line naming the file, exit 1.
expect_error() {  # FILE
  local rc=0
  "$bin/fblc" explain "$1" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
  [ "$rc" -eq 1 ] || fail "explain $1 exited $rc, expected 1"
  [ "$(wc -l <"$work/err.txt")" -eq 1 ] || { cat "$work/err.txt"; fail "explain $1: expected one error line"; }
  grep -qF "$1" "$work/err.txt" || { cat "$work/err.txt"; fail "the error does not name $1"; }
}
expect_error "$work/missing.fbp"
head -c 200 "$work/tiny.fbp" >"$work/truncated.fbp"
expect_error "$work/truncated.fbp"
echo "not a plan" >"$work/text.fbp"
expect_error "$work/text.fbp"
echo "ok: $nodes nodes rendered, screenshot $page bytes (blank $blank)"
