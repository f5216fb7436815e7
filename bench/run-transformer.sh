#!/usr/bin/env bash
# Cosmos3 transformer forward benchmark: stepmix (bf16 activations) against a
# plain PyTorch eager implementation (bench/peer_transformer.py, Debian's
# python3-torch, bf16), both on 2 threads, same seeded random weights and
# inputs, and both against the instruction peaks measured in the same run
# (bench_peak_dot_bf16: two-core vdpbf16ps and, where the CPU has it, AMX).
#
# Grids (4 layers, head_dim 128, GQA 4:1, intermediate 3·hidden; modes dense
# (BF16 checkpoint), w8a16 and w8a8 (FP8 checkpoint)):
#   default  hidden 1024 and 2048, 64 text tokens, 256/1024/4096 vision tokens,
#            one pass per call
#   --nano   Cosmos3-Nano width: hidden 4096 (32 query / 8 KV heads, FFN
#            12288), 300 text tokens, 1024 and 4096 vision tokens; a call is a
#            CFG step (conditional + unconditional pass), the two passes one
#            after the other ("separate") or batched into one forward
#            ("batched", the peer stacking them on a batch axis); stepmix also
#            with STEPMIX_ISA=avx512 (the path of a CPU without AMX), batched
#
# usage: bench/run-transformer.sh [--quick] [--nano] [--repeats N] [--rounds R] [--summarize SAMPLES]
#                                 [--tokens LIST] [--modes LIST] [--cfgs LIST] [--name NAME]
#   --quick    hidden 1024 at 1024 tokens, dense and w8a8 only (a few minutes);
#              with --nano: 1024 tokens only, w8a8 and dense, batched only
#   --tokens, --modes, --cfgs  a part of the grid (comma-separated: e.g. --tokens 4096
#              --modes dense --cfgs batched); the model is still written for the grid's
#              token counts
#   --name     results under bench/results/NAME.json (+ NAME-samples.jsonl) instead of
#              transformer[-nano].json, so a partial run leaves the full grid's record alone
#   --repeats  timed calls per case and side after one warm-up (default 3; --nano 2)
#   --rounds   run every (mode, side) R times, alternating stepmix and peer, so
#              a burst of load from other processes does not land on one side
#              only (default 1)
#   --summarize  no runs: rebuild the table and JSON from a samples file that
#              an earlier run wrote
# Writes bench/results/transformer[-nano].json (+ the raw samples next to it)
# and prints a table. Not a test: on a shared machine the numbers move with the
# neighbours' load; the table shows the spread, the load average and CPU-time
# figures (process CPU time / 2 threads: what a call costs when it has both
# cores) next to wall times.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
data="${STEPMIX_BENCH_DATA:-$build/transformer-data}"
threads=2

hiddens=(1024 2048)
tokens="256,1024,4096"
text=64
modes=(dense w8a16 w8a8)
cfgs=(off)
repeats=3
rounds=1
quick=0
nano=0
summarize=""
only_tokens="" only_modes="" only_cfgs="" only_name=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --nano) nano=1; shift ;;
    --repeats) repeats="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --summarize) summarize="$2"; shift 2 ;;
    --tokens) only_tokens="$2"; shift 2 ;;
    --modes) only_modes="$2"; shift 2 ;;
    --cfgs) only_cfgs="$2"; shift 2 ;;
    --name) only_name="$2"; shift 2 ;;
    *) echo "usage: $0 [--quick] [--nano] [--repeats N] [--rounds R] [--summarize SAMPLES]" \
            "[--tokens LIST] [--modes LIST] [--cfgs LIST] [--name NAME]" >&2; exit 2 ;;
  esac
done
name=transformer
if ((nano)); then
  name=transformer-nano
  hiddens=(4096); text=300; tokens="1024,4096"; cfgs=(separate batched)
  [[ " $* " == *" --repeats "* ]] || repeats=2
  ((quick)) && { tokens="1024"; modes=(dense w8a8); cfgs=(batched); }
elif ((quick)); then
  hiddens=(1024); tokens="1024"; modes=(dense w8a8)
fi
model_tokens="$tokens"  # what the written model's inputs cover
[[ -n "$only_tokens" ]] && tokens="$only_tokens"
[[ -n "$only_modes" ]] && IFS=, read -r -a modes <<<"$only_modes"
[[ -n "$only_cfgs" ]] && IFS=, read -r -a cfgs <<<"$only_cfgs"
[[ -n "$only_name" ]] && name="$only_name"

mkdir -p "$here/results"
samples="$here/results/$name-samples.jsonl"
if [[ -n "$summarize" ]]; then
  [[ "$(realpath "$summarize")" == "$(realpath -m "$samples")" ]] || cp "$summarize" "$samples"
else
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target bench_transformer bench_peak_dot_bf16 -j2 >/dev/null
  bench="$build/bench/bench_transformer"
  peak="$build/bench/bench_peak_dot_bf16"

  # Page faults are expensive in this VM and glibc serves every allocation above
  # 32 MiB with a fresh mmap, so an eager implementation would page-fault its
  # large temporaries (attention scores, float32 copies) on every call. Both
  # sides run with mmap'd allocations disabled, so freed memory is reused.
  export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736
  export OMP_NUM_THREADS=$threads STEPMIX_THREADS=$threads

  # The instruction peaks, before and after the timed runs (best of 3 each).
  record_peaks() {
    local when=$1 best_dot=0 best_amx=0 v
    for _ in 1 2 3; do
      v=$("$peak" $threads | cut -d, -f3); best_dot=$(python3 -c "print(max($best_dot, $v))")
      v=$("$peak" $threads --amx | cut -d, -f3)
      [[ $v == unsupported ]] || best_amx=$(python3 -c "print(max($best_amx, $v))")
    done
    echo "{\"side\": \"peak\", \"when\": \"$when\", \"threads\": $threads, \"vdpbf16ps_gflops\": $best_dot, \"amx_gflops\": $best_amx, \"load_average\": $(cut -d' ' -f1 /proc/loadavg)}" |
      tee -a "$samples" >&2
  }

  : >"$samples"
  record_peaks before
  for hidden in "${hiddens[@]}"; do
    dir="$data/hidden-$hidden"
    stamp="$dir/made-with-text-$text-tokens-${model_tokens//,/-}"
    if [[ ! -f "$stamp" ]]; then
      echo "writing the hidden-$hidden model and inputs to $dir" >&2
      rm -rf "$dir"
      "$bench" make --dir "$dir" --hidden "$hidden" --layers 4 --text "$text" --tokens "$model_tokens" --seed 1
      touch "$stamp"
    fi
    tag="s/^{/{\"hidden\": $hidden, \"text\": $text, /"
    for ((round = 1; round <= rounds; ++round)); do
      for mode in "${modes[@]}"; do
        for cfg in "${cfgs[@]}"; do
          echo "hidden $hidden, $mode, cfg $cfg, round $round: stepmix" >&2
          "$bench" time --dir "$dir" --mode "$mode" --tokens "$tokens" --repeats "$repeats" --cfg "$cfg" |
            sed "$tag; s/^{\\(.*\\)/{\"side\": \"stepmix\", \"isa\": \"auto\", \\1/" | tee -a "$samples" >&2
          if ((nano)) && [[ $cfg == batched ]]; then
            echo "hidden $hidden, $mode, cfg $cfg, round $round: stepmix, STEPMIX_ISA=avx512" >&2
            STEPMIX_ISA=avx512 "$bench" time --dir "$dir" --mode "$mode" --tokens "$tokens" --repeats 1 --cfg "$cfg" |
              sed "$tag; s/^{\\(.*\\)/{\"side\": \"stepmix\", \"isa\": \"avx512\", \\1/" | tee -a "$samples" >&2
          fi
          echo "hidden $hidden, $mode, cfg $cfg, round $round: peer" >&2
          /usr/bin/python3 "$here/peer_transformer.py" --model "$dir" --mode "$mode" --tokens "$tokens" \
            --repeats "$repeats" --threads "$threads" --cfg "$cfg" |
            sed "$tag; s/^{\\(.*\\)/{\"side\": \"peer\", \"isa\": \"-\", \\1/" | tee -a "$samples" >&2
        done
      done
    done
  done
  record_peaks after
fi

/usr/bin/python3 "$here/summarize_transformer.py" "$samples" "$here/results/$name.json"
