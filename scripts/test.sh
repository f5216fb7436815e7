#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest).
#   scripts/test.sh          the release suite (what CI runs)
#   scripts/test.sh --asan   then the fast subset again under AddressSanitizer +
#                            UndefinedBehaviorSanitizer (CMakePresets.json "asan")
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
cmake --preset release >/dev/null
cmake --build --preset release -j"$jobs"
ctest --preset release -j"$jobs"
if [[ "${1:-}" == "--asan" ]]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j"$jobs"
  ctest --preset asan-fast -j"$jobs"
fi
