# Sourced by the fbl-bench smoke scripts (not a test itself: CTest registers tests/scripts/*.sh
# only). Sets `bin`, a scratch folder `work` removed on exit, PoCL's cache in the build dir, and `dev`,
# the PoCL device index; exits 0 ("skipped") when there is no PoCL device.
# Needs `build` set and the scratch folder's name as $1.
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d "/tmp/$1.XXXXXX")
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$build/pocl-cache-bench}
mkdir -p "$POCL_CACHE_DIR"

dev=$("$bin/fbl-train" --list-devices | grep -i 'portable computing language' | head -1 | cut -d: -f1 || true)
if [ -z "$dev" ]; then
  echo "no PoCL device: skipped"
  exit 0
fi
