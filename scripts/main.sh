#!/usr/bin/env bash
# Sets up, builds and runs the main job on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target stepmix
./build/stepmix inspect tests/data/golden/cosmos3-tiny/transformer-fp8 --steps 35 "$@"
