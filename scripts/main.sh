#!/usr/bin/env bash
# Sets up, builds and runs the main job: the embedded FP8 model generates an
# ankle boot with the checkpoint's per-step precision policy, and prints the
# trace. Extra arguments go to `stepmix generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target stepmix
./build/stepmix inspect models/fashion-cosmos3-fp8 --steps 8
./build/stepmix generate --model models/fashion-cosmos3-fp8 --prompt "ankle boot" --seed 0 --out boot.png "$@"
