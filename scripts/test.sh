#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest), then the fast subset again under
# AddressSanitizer + UndefinedBehaviorSanitizer (CMakePresets.json "asan",
# test preset "asan-fast": every test not labelled slow). This is what CI runs.
#   scripts/test.sh             the release suite, then the sanitizer pass
#   scripts/test.sh --no-asan   the release suite only
# (--asan, the former opt-in, is still accepted and changes nothing.)
set -euo pipefail
cd "$(dirname "$0")/.."
asan=1
for arg in "$@"; do
  case $arg in
    --no-asan) asan=0 ;;
    --asan) asan=1 ;;
    *) echo "usage: scripts/test.sh [--no-asan]" >&2; exit 2 ;;
  esac
done
scripts/setup.sh
jobs=$(nproc)
cmake --preset release >/dev/null
cmake --build --preset release -j"$jobs"
ctest --preset release -j"$jobs"
if ((asan)); then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j"$jobs"
  ctest --preset asan-fast -j"$jobs"
fi
