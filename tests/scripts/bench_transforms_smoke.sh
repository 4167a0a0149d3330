#!/usr/bin/env bash
# `fbl-bench transforms` runs end to end on PoCL at a tiny attention configuration (16 tokens,
# 2 heads, width 32): the JSON report has every strategy with positive device and step times,
# a layout time within the device time and zero when no launch is a transform or conversion.
# Timings themselves are not compared: this machine is shared and noisy. Kernels build without
# optimisation into a PoCL cache in the build dir, as in bench_step_smoke.sh (the same plans).
# Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
source "$src/tests/scripts/lib/bench_pocl_env.sh" fbl-bench-transforms

"$bin/fbl-bench" transforms --seq 16 --heads 2 --hidden 32 --steps 2 --device "$dev" \
  --profile "$src/profiles/pocl-cpu.json" --json "$work/t.json" > "$work/t.txt" 2> "$work/stderr" ||
  { echo "fbl-bench transforms failed:"; grep -v 'macro redefined' "$work/stderr" | tail -20; exit 1; }

j=$work/t.json
for key in command device profile steps strategies timing configs seq heads hidden head_dim plans_identical \
           note results layout_time_s layout_time_s_by_phase layout_launches layout_launches_by_phase \
           device_s device_s_by_phase device_s_by_kind step_s launches_per_step launches_by_kind plan_digest; do
  grep -q "\"$key\"" "$j" || { echo "t.json lacks \"$key\""; cat "$j"; exit 1; }
done
for s in fblayout reuse explicit; do
  [ "$(grep -c "\"strategy\": \"$s\"" "$j")" = 1 ] || { echo "t.json has no single $s result"; cat "$j"; exit 1; }
  grep -q "^  $s " "$work/t.txt" || { echo "the table has no $s row"; cat "$work/t.txt"; exit 1; }
done
# Keys of a result come sorted: device_s < layout_launches < layout_time_s < step_s.
awk '
  function num(line) { sub(/^[^:]*: */, "", line); sub(/,$/, "", line); return line + 0 }
  /^ *"device_s":/        { dev = num($0) }
  /^ *"layout_launches":/ { ll = num($0) }
  /^ *"layout_time_s":/   { lt = num($0); n++
                            if (dev <= 0) bad = bad " device_s<=0"
                            if (lt < 0 || lt > dev) bad = bad " layout_time_s outside [0, device_s]"
                            if (ll == 0 && lt != 0) bad = bad " layout time without layout launches" }
  /^ *"step_s":/          { if (num($0) <= 0) bad = bad " step_s<=0" }
  /^ *"launches_per_step":/ { if (num($0) <= 0) bad = bad " no launches" }
  END { if (n != 3 || bad != "") { print "insane results (" n " results):" bad; exit 1 } }
' "$j" || { cat "$j"; exit 1; }
echo "ok"
