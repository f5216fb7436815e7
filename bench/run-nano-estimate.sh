#!/usr/bin/env bash
# Real-size estimate and memory check on a Cosmos3-Nano-shaped FP8 checkpoint:
# `stepmix bench` at 832×480 (1 frame, 26×15 patches = 390 vision tokens) and
# 1024×1024 (32×32 = 1,024 tokens), CFG on (guidance 3, the two passes
# batched), 300 prompt and 300 negative-prompt ids, bf16 activations, weights
# memory-mapped (no weight cache). Each mode (w8a16, w8a8, mixed) runs one
# 2-step generation: its first step also runs the understanding (text)
# stream of both prompts, and of the first mode pages the weights in; the
# second step is the per-step cost of the denoising loop, the figure used.
# (2 steps, because a 1-step schedule stays W8A8 whatever the policy.) The
# 50-step total follows the checkpoint's step policy (first 3 and last 3
# steps W8A16, the 44 others W8A8) plus the understanding pass (the first
# step's excess over the second, once).
#
# The checkpoint (seeded random weights of Nano's shape: hidden 4096, FFN
# 12288, 32 query / 8 KV heads, head_dim 128, ModelOpt FP8 with the step
# policy; bench_transformer make) is written once under the data folder:
# 36 layers need ~13.0 GiB of disk, 4 layers ~1.5 GiB; the tool refuses when
# the file system has less.
#
# usage: bench/run-nano-estimate.sh [--layers N] [--sizes 832x480,1024x1024]
# env:   STEPMIX_BENCH_BUILD (build folder with stepmix and bench_transformer,
#        default build), STEPMIX_BENCH_DATA (default $build/nano-data)
# Writes bench/results/nano-estimate-L<N>-<size>.json (the bench JSON) and
# prints, per size, ms per step of each mode, peak RSS, resident weight bytes
# and the 50-step estimate.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build}"
data="${STEPMIX_BENCH_DATA:-$build/nano-data}"
layers=36
sizes="832x480,1024x1024"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --layers) layers="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    *) echo "usage: $0 [--layers N] [--sizes WxH,...]" >&2; exit 2 ;;
  esac
done

cmake --build "$build" --target stepmix bench_transformer -j2 >/dev/null
dir="$data/nano-$layers"
if [[ ! -f "$dir/fp8/config.json" ]]; then
  echo "writing the $layers-layer Nano-shaped FP8 checkpoint to $dir/fp8" >&2
  start=$(date +%s)
  "$build/bench/bench_transformer" make --dir "$dir" --hidden 4096 --layers "$layers" --formats fp8 --shards \
    --tokens none --seed 1
  echo "written in $(($(date +%s) - start)) s" >&2
fi

ids() { /usr/bin/python3 -c "import random; r = random.Random($1); print(','.join(str(r.randrange(1024)) for _ in range(300)))"; }
export STEPMIX_THREADS=2
mkdir -p "$here/results"
for size in ${sizes//,/ }; do
  width=${size%x*} height=${size#*x}
  out="$here/results/nano-estimate-L$layers-$size.json"
  echo "== ${width}x$height: latent 48,1,$((height / 16)),$((width / 16)), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$build/stepmix" bench --model "$dir/fp8" --prompt-ids "$(ids 1)" --negative-prompt-ids "$(ids 2)" \
    --latent-shape "48,1,$((height / 16)),$((width / 16))" --guidance 3 --steps 2 --repeat 1 --warmup 0 \
    --activations bf16 --no-peer --json "$out"
  /usr/bin/python3 - "$out" "$layers" <<'EOF'
import json, sys
report, layers = json.load(open(sys.argv[1])), int(sys.argv[2])
report["model"] = f"nano-{layers}/fp8 (bench_transformer make --hidden 4096 --layers {layers} --formats fp8 --shards)"
json.dump(report, open(sys.argv[1], "w"), indent=2)
modes = {m["name"]: m for m in report["modes"]}
# The second step of each mode (the smaller of its two) is the loop's cost.
wall = {n: modes[n]["step_ms"]["min"] for n in ("w8a16", "w8a8")}
cpu = {n: modes[n]["step_cpu_ms"]["min"] / report["threads"] for n in ("w8a16", "w8a8")}
first = {n: modes[n]["step_ms"]["max"] - modes[n]["step_ms"]["min"] for n in ("w8a16", "w8a8")}
for n in ("w8a16", "w8a8"):
    m = modes[n]
    print(f"{n} ({m['trace']}): {wall[n]:.0f} ms/step wall, {cpu[n]:.0f} ms CPU time per thread; peak RSS "
          f"{m['peak_rss_bytes'] / 2**30:.2f} GiB, weights resident {m['weight_bytes_resident'] / 2**30:.2f} GiB; "
          f"first step +{first[n]:.0f} ms")
for label, t in (("wall", wall), ("CPU/thread", cpu)):
    total = 6 * t["w8a16"] + 44 * t["w8a8"]
    print(f"50 steps with CFG ({label}): {total / 1e3:.0f} s = {total / 6e4:.1f} min + the understanding pass "
          f"(6 W8A16 + 44 W8A8 steps; mixed over all-W8A8 +{100 * (total / (50 * t['w8a8']) - 1):.1f}%)")
print(f"load average at start: {report['load_average_1m']}, {layers} layers")
EOF
done
