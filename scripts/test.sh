#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest), then the fast subset again
# under AddressSanitizer + UndefinedBehaviorSanitizer (CMakePresets.json).
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --no-asan  skip the sanitizer pass
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
cmake --preset release >/dev/null
cmake --build --preset release -j"$jobs"
ctest --preset release -j"$jobs"
if [[ "${1:-}" != "--no-asan" ]]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j"$jobs"
  ctest --preset asan-fast -j"$jobs"
fi
