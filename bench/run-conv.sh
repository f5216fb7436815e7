#!/usr/bin/env bash
# One VAE convolution call at the Wan2.2 decoder's shapes, one thread: every
# kernel variant (bench/conv_bench.cpp) beside the linear family's GEMM on the
# equivalent implicit-GEMM shape (M = positions, N = c_out, K = c_in · taps
# executed), with the one-thread instruction peaks measured in the same run
# (bench/peak_dot_bf16.cpp: vfmadd231ps, vdpbf16ps, AMX tdpbf16ps). Times are
# the thread's CPU time of the best of the repeated calls, so the neighbours'
# share of a shared machine does not count (their use of the same core's
# caches still does: on a loaded machine the figures move by 10-20%).
#
# usage: bench/run-conv.sh [--quick] [bench_conv options: --shape NAME --variant NAME --f32 --bf16 --no-gemm
#                           --min-seconds S]
#   --quick  the four shapes that carry most of the decoder's work, bf16 on AMX, no GEMM
# Writes bench/results/conv.jsonl (one JSON line per measurement, the peaks
# first, the 1-minute load average last).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
quick=0
args=()
for a in "$@"; do
  if [[ $a == --quick ]]; then quick=1; else args+=("$a"); fi
done
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target bench_conv bench_peak_dot_bf16 -j2 >/dev/null
mkdir -p "$here/results"
out="$here/results/conv.jsonl"
: >"$out"
peak() { "$build/bench/bench_peak_dot_bf16" 1 "$@" | cut -d, -f3; }
f32=$(peak --f32)
bf16=$(peak)
amx=$(peak --amx)
[[ $amx == unsupported ]] && amx=0
echo "{\"peaks_1_thread_gflops\": {\"vfmadd231ps\": $f32, \"vdpbf16ps\": $bf16, \"tdpbf16ps\": $amx}}" | tee -a "$out"
export STEPMIX_THREADS=1
run() { "$build/bench/bench_conv" --peak-f32 "$f32" --peak-bf16 "$bf16" --peak-amx "$amx" "$@" | tee -a "$out"; }
if ((quick)); then
  for shape in causal3_1024_1024_64x64_image spatial3x3_1024_1024_128x128 causal3_512_512_128x128_image \
               causal3_256_256_256x256_image; do
    run --shape "$shape" --bf16 --variant amx --no-gemm ${args[@]+"${args[@]}"}
  done
else
  run ${args[@]+"${args[@]}"}
fi
echo "{\"load_average\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" | tee -a "$out"
