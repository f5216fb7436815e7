#!/usr/bin/env bash
# One attention call at the Cosmos3-Nano shapes (32 query / 8 KV heads,
# head_dim 128; the generation stream over 300 understanding keys plus its
# own 1 024 or 4 096 tokens, and the causal 300-token understanding prefill),
# every kernel variant (bench/attention_bench.cpp), bf16 operands, on one
# thread and on two, with the instruction peaks measured in the same run
# (bench/peak_dot_bf16.cpp: vdpbf16ps, AMX tdpbf16ps) before and after.
# Times are CPU time of the best of the repeated calls (one thread: the
# thread's; two: the process's, so GFLOP/s are per CPU second and compared
# with the one-thread peak), so the neighbours' share of a shared machine
# does not count (their use of the caches still does).
#
# usage: bench/run-attention.sh [--quick] [bench_attention options: --shape NAME --variant NAME --f32
#                                --min-seconds S]
#   --quick  the two generation shapes on 256 query rows (same work per query), one thread
# Writes bench/results/attention.jsonl (one JSON line per measurement, the
# peaks first and last, then the 1-minute load average).
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
cmake --build "$build" --target bench_attention bench_peak_dot_bf16 -j2 >/dev/null
mkdir -p "$here/results"
out="$here/results/attention.jsonl"
: >"$out"
peak() { "$build/bench/bench_peak_dot_bf16" 1 "$@" | cut -d, -f3; }
peaks() {
  local bf16 amx f32
  bf16=$(peak); amx=$(peak --amx); f32=$(peak --f32)
  [[ $amx == unsupported ]] && amx=0
  echo "{\"when\": \"$1\", \"peaks_1_thread_gflops\": {\"vdpbf16ps\": $bf16, \"tdpbf16ps\": $amx, \"vfmadd231ps\": $f32}}" |
    tee -a "$out" >&2
  echo "--peak-bf16 $bf16 --peak-amx $amx --peak-f32 $f32"
}
read -r -a peak_args <<<"$(peaks before)"
run() { STEPMIX_THREADS=$1 "$build/bench/bench_attention" "${peak_args[@]}" "${@:2}" | tee -a "$out"; }
if ((quick)); then
  for shape in generation_1024_q256 generation_4096_q256; do run 1 --shape "$shape" ${args[@]+"${args[@]}"}; done
else
  for threads in 1 2; do
    for shape in understanding_300 generation_1024 generation_4096; do
      run "$threads" --shape "$shape" ${args[@]+"${args[@]}"}
    done
  done
fi
peaks after >/dev/null
echo "{\"load_average\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" | tee -a "$out"
