#!/usr/bin/env bash
# The compiler's layering, checked on symbols: no layer's objects may call a function (or read a
# variable) that a layer it may not use defines. The include check (cmake/check_layers.cmake)
# cannot see a function declared in a lower header and defined above; the linker finds it here.
# The layers and what each may use: BUILD/layers.txt, written by CMakeLists.txt.
# Usage: layer_symbols.sh BUILD_DIR [SOURCE_DIR]   (CTest passes both)
set -euo pipefail

build=${1:?usage: layer_symbols.sh BUILD_DIR [SOURCE_DIR]}
layers=$build/layers.txt
[ -f "$layers" ] || { echo "FAIL: no $layers (configure the build first)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Strong definitions (T, D, B, R) name their layer; weak ones (inline functions, templates) are
# defined wherever they are used and belong to no layer.
names=()
while IFS=: read -r name _; do
  names+=("$name")
  lib=$build/lib/libfbl_$name.a
  [ -f "$lib" ] || { echo "FAIL: $lib is missing (build the compiler first)" >&2; exit 1; }
  nm --defined-only -g "$lib" 2>/dev/null | awk -v l="$name" 'NF == 3 && $2 ~ /^[TDBR]$/ {print $3, l}' >> "$tmp/defined"
  nm -u "$lib" 2>/dev/null | awk -v l="$name" '$1 == "U" {print $2, l}' | sort -u >> "$tmp/undefined"
done < "$layers"

sort -u -o "$tmp/defined" "$tmp/defined"
# symbol user_layer defining_layer, for every use of a symbol another layer defines.
join <(sort "$tmp/undefined") "$tmp/defined" | awk '$2 != $3' > "$tmp/uses"

status=0
while read -r sym user owner; do
  allowed=$(sed -n "s/^$user: *//p" "$layers")
  if ! grep -qw -- "$owner" <<< "$allowed"; then
    echo "FAIL: $user uses $(c++filt <<< "$sym"), defined in $owner, a layer it may not use" >&2
    status=1
  fi
done < "$tmp/uses"

[ $status -eq 0 ] && echo "ok: ${#names[@]} layers, $(wc -l < "$tmp/uses") symbols used across layers, all downward"
exit $status
