#!/usr/bin/env bash
# `fbl-bench step` runs end to end on PoCL, per strategy and as the Figure-14 ablation, on the
# zoo's tiny attention block (`fblc zoo llama-attention --tiny`: 16 tokens, 2 heads, width 32;
# a whole tiny model costs minutes of kernel builds here), two steps each, synthetic inputs:
#   - `--strategy all`: a JSON report with every key, one result per strategy, an SVG chart;
#   - `--ablation`: the five variants in order, reuse's speed-ups exactly 1, the passes each
#     variant disabled, and "R-Tile alone" and "+ global selection" (fusion off) compiled to
#     other plans than full fblayout (else the disabled passes did not reach the compiler);
#   - sane figures in both: positive step and device times, layout time within [0, device time].
# Timings are not compared: this machine is shared and noisy.
# Kernel builds dominate the run: under ctest kernels build without optimisation
# (FBL_WHOLE_PLAN_POCL_FLAGS, CMakeLists.txt) into a PoCL cache kept in the build dir, so that the
# ablation's reuse and fblayout plans, and reruns, come from the cache.
# Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
source "$src/tests/scripts/lib/bench_pocl_env.sh" fbl-bench-step

"$bin/fblc" zoo llama-attention --tiny -o "$work/att.onnx" >/dev/null
run() { "$bin/fbl-bench" step "$work/att.onnx" --profile "$src/profiles/pocl-cpu.json" --steps 2 --device "$dev" "$@" \
          2> "$work/stderr" || { echo "fbl-bench step $* failed:"; grep -v 'macro redefined' "$work/stderr" | tail -20; exit 1; }; }

# Per result (keys come sorted): device_s < layout_time_s < step_s; and how many results.
sane() {
  awk '
    function num(line) { sub(/^[^:]*: */, "", line); sub(/,$/, "", line); return line + 0 }
    /^ *"device_s":/      { dev = num($0) }
    /^ *"layout_time_s":/ { lt = num($0); n++
                            if (dev <= 0) bad = bad " device_s<=0"
                            if (lt < 0 || lt > dev) bad = bad " layout_time_s outside [0, device_s]" }
    /^ *"step_s":/        { if (num($0) <= 0) bad = bad " step_s<=0" }
    /^ *"launches_per_step":/ { if (num($0) <= 0) bad = bad " no launches" }
    END { if (n != want || bad != "") { print FILENAME ": insane results (" n " of " want "):" bad; exit 1 } }
  ' want="$2" "$1" || { cat "$1"; exit 1; }
}

run --json "$work/step.json" --svg "$work/step.svg" > "$work/step.txt"
for key in model profile device steps strategies plans_identical note timing results strategy \
           samples_per_s step_s first_step_s phase_s forward backward optimizer launches_per_step \
           launches_by_phase launches_by_kind kernels bytes_moved_modelled layout_launches \
           layout_bytes_modelled layout_time_s layout_time_s_by_phase device_s device_s_by_phase \
           timed_steps plan_digest peak_device_bytes first_loss last_loss random_weights; do
  grep -q "\"$key\"" "$work/step.json" || { echo "step.json lacks \"$key\""; cat "$work/step.json"; exit 1; }
done
for s in fblayout reuse explicit; do
  [ "$(grep -c "\"strategy\": \"$s\"" "$work/step.json")" = 1 ] || { echo "step.json has no single $s result"; exit 1; }
  grep -q "^  $s " "$work/step.txt" || { echo "the table has no $s row"; cat "$work/step.txt"; exit 1; }
done
sane "$work/step.json" 3
grep -q '<svg' "$work/step.svg" || { echo "step.svg is not an SVG"; exit 1; }
grep -q '</svg>' "$work/step.svg" || { echo "step.svg is truncated"; exit 1; }

run --ablation --json "$work/ablation.json" > "$work/ablation.txt"
j=$work/ablation.json
grep -q '"ablation": true' "$j" || { echo "ablation.json does not say ablation"; cat "$j"; exit 1; }
variants=$(grep '^ *"variant":' "$j" | sed 's/^ *"variant": *"\(.*\)",*$/\1/' | paste -sd '|')
[ "$variants" = "reuse|R-Tile alone|+ index elimination|+ global selection|fblayout" ] ||
  { echo "ablation variants are '$variants'"; cat "$j"; exit 1; }
for v in "reuse" "R-Tile alone" "+ index elimination" "+ global selection" "fblayout"; do
  grep -qF "  $v " "$work/ablation.txt" || { echo "the ablation table has no '$v' row"; cat "$work/ablation.txt"; exit 1; }
done
for key in speedup_over_reuse same_plan_as disabled_passes variants; do
  grep -q "\"$key\"" "$j" || { echo "ablation.json lacks \"$key\""; cat "$j"; exit 1; }
done
sane "$j" 5
# Per result: disabled_passes (R-Tile alone: four, + index elimination: three, + global selection:
# two, fusion and fuse-attention), plan_digest,
# speedup_over_reuse {device, step}, variant; reuse (the first) has speed-ups of exactly 1.
awk '
  /"disabled_passes"/            { inlist = 1; next }
  inlist && /\]/                 { inlist = 0 }
  inlist && /"[a-z-]+"/          { gsub(/[ ",]/, ""); passes = passes (passes == "" ? "" : "+") $0 }
  /^ *"plan_digest":/            { d = $2; gsub(/[",]/, "", d) }
  /^ *"(device|step)": *[0-9.e+-]+,?$/ { x = $2; sub(/,$/, "", x); sp = sp " " x }
  /^ *"variant":/                { v = $0; sub(/^ *"variant": *"/, "", v); sub(/",*$/, "", v)
                                   digest[v] = d; dis[v] = passes; speed[v] = sp; passes = ""; sp = "" }
  END {
    if (speed["reuse"] != " 1.0 1.0" && speed["reuse"] != " 1 1") bad = bad " reuse speed-ups" speed["reuse"] " (want 1 1)"
    if (dis["R-Tile alone"] != "tile-index-elimination+global-layout-selection+fusion+fuse-attention") bad = bad " R-Tile alone disables " dis["R-Tile alone"]
    if (dis["+ index elimination"] != "global-layout-selection+fusion+fuse-attention") bad = bad " + index elimination disables " dis["+ index elimination"]
    if (dis["+ global selection"] != "fusion+fuse-attention") bad = bad " + global selection disables " dis["+ global selection"]
    if (dis["fblayout"] != "" || dis["reuse"] != "") bad = bad " reuse/fblayout disable passes"
    if (digest["R-Tile alone"] == "" || digest["R-Tile alone"] == digest["fblayout"])
      bad = bad " R-Tile alone has the full pipeline plan (" digest["R-Tile alone"] ")"
    if (digest["+ global selection"] == "" || digest["+ global selection"] == digest["fblayout"])
      bad = bad " fusion off gives the full pipeline plan (" digest["+ global selection"] ")"
    if (bad != "") { print "ablation.json:" bad; exit 1 }
  }
' "$j" || { cat "$j"; exit 1; }

# --ablation picks its own runs: with --strategy it is a usage error.
if "$bin/fbl-bench" step "$work/att.onnx" --profile "$src/profiles/pocl-cpu.json" --ablation --strategy reuse \
     > /dev/null 2>&1; then
  echo "--ablation --strategy reuse was accepted"; exit 1
fi
echo "ok"
