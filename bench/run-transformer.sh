#!/usr/bin/env bash
# Cosmos3 transformer forward benchmark: stepmix (bf16 activations) against a
# plain PyTorch eager implementation (bench/peer_transformer.py, Debian's
# python3-torch, bf16), both on 2 threads, same seeded random weights and
# inputs. Configs: hidden 1024 and 2048 (4 layers, head_dim 128, GQA 4:1,
# intermediate 3·hidden, 64 text tokens) at 256, 1024 and 4096 vision tokens,
# modes dense (BF16 checkpoint), w8a16 and w8a8 (FP8 checkpoint).
#
# usage: bench/run-transformer.sh [--quick] [--repeats N] [--rounds R] [--summarize SAMPLES]
#   --quick    hidden 1024 at 1024 tokens, dense and w8a8 only (a few minutes)
#   --repeats  timed forwards per case and side after one warm-up (default 3)
#   --rounds   run every (mode, side) R times, alternating stepmix and peer, so
#              a burst of load from other processes does not land on one side
#              only (default 1)
#   --summarize  no runs: rebuild the table and JSON from a samples file that
#              an earlier run wrote (bench/results/transformer-samples.jsonl)
# Writes bench/results/transformer.json (+ the raw samples next to it) and
# prints a table of medians (ms = one forward; ratio = peer_ms / ms) and of
# the best samples. Not a test: on a shared machine the numbers move with the
# neighbours' load; the table shows the spread.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
data="${STEPMIX_BENCH_DATA:-$build/transformer-data}"
threads=2

hiddens=(1024 2048)
tokens="256,1024,4096"
modes=(dense w8a16 w8a8)
repeats=3
rounds=1
quick=0
summarize=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1; hiddens=(1024); tokens="1024"; modes=(dense w8a8); shift ;;
    --repeats) repeats="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --summarize) summarize="$2"; shift 2 ;;
    *) echo "usage: $0 [--quick] [--repeats N] [--rounds R] [--summarize SAMPLES]" >&2; exit 2 ;;
  esac
done

mkdir -p "$here/results"
samples="$here/results/transformer-samples.jsonl"
if [[ -n "$summarize" ]]; then
  [[ "$(realpath "$summarize")" == "$(realpath -m "$samples")" ]] || cp "$summarize" "$samples"
else
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target bench_transformer -j2 >/dev/null
  bench="$build/bench/bench_transformer"

  # Page faults are expensive in this VM and glibc serves every allocation above
  # 32 MiB with a fresh mmap, so an eager implementation would page-fault its
  # large temporaries (attention scores, float32 copies) on every call. Both
  # sides run with mmap'd allocations disabled, so freed memory is reused.
  export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736
  export OMP_NUM_THREADS=$threads STEPMIX_THREADS=$threads

  : >"$samples"
  for hidden in "${hiddens[@]}"; do
    dir="$data/hidden-$hidden"
    stamp="$dir/made-with-tokens-${tokens//,/-}"
    if [[ ! -f "$stamp" ]]; then
      echo "writing the hidden-$hidden model and inputs to $dir" >&2
      rm -rf "$dir"
      "$bench" make --dir "$dir" --hidden "$hidden" --layers 4 --text 64 --tokens "$tokens" --seed 1
      touch "$stamp"
    fi
    for ((round = 1; round <= rounds; ++round)); do
      for mode in "${modes[@]}"; do
        echo "hidden $hidden, $mode, round $round: stepmix" >&2
        "$bench" time --dir "$dir" --mode "$mode" --tokens "$tokens" --repeats "$repeats" |
          sed "s/^{/{\"hidden\": $hidden, \"side\": \"stepmix\", /" | tee -a "$samples" >&2
        echo "hidden $hidden, $mode, round $round: peer" >&2
        /usr/bin/python3 "$here/peer_transformer.py" --model "$dir" --mode "$mode" --tokens "$tokens" \
          --repeats "$repeats" --threads "$threads" |
          sed "s/^{/{\"hidden\": $hidden, \"side\": \"peer\", /" | tee -a "$samples" >&2
      done
    done
  done
fi

/usr/bin/python3 - "$samples" "$here/results/transformer.json" <<'PY'
import collections, json, os, statistics, sys, time

samples_path, out_path = sys.argv[1:]
times = collections.defaultdict(list)
deviation, loads, calls = {}, [], collections.Counter()
for line in open(samples_path):
    s = json.loads(line)
    key = (s["hidden"], s["tokens"], s["mode"])
    times[key + (s["side"],)] += s["ms"]
    calls[s["side"]] += 1
    if "load_average" in s:
        loads.append(s["load_average"])
    if s["side"] == "peer" and s.get("deviation") is not None:
        deviation[key] = s["deviation"]

def spread(xs):
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else 0.0

order = ["dense", "w8a16", "w8a8"]
rows = []
for (hidden, tokens, mode) in sorted({k[:3] for k in times}, key=lambda k: (k[0], k[1], order.index(k[2]))):
    ours, peer = times[(hidden, tokens, mode, "stepmix")], times[(hidden, tokens, mode, "peer")]
    ms, peer_ms = statistics.median(ours), statistics.median(peer)
    rows.append({
        "config": {"hidden": hidden, "layers": 4, "head_dim": 128, "heads": hidden // 128, "kv_heads": hidden // 512,
                   "intermediate": 3 * hidden, "text_tokens": 64},
        "tokens": tokens, "mode": mode,
        "ms": round(ms, 1), "peer_ms": round(peer_ms, 1), "ratio": round(peer_ms / ms, 2),
        "best_ms": round(min(ours), 1), "peer_best_ms": round(min(peer), 1),
        "ratio_of_best": round(min(peer) / min(ours), 2),
        "ms_samples": [round(x, 1) for x in ours], "peer_ms_samples": [round(x, 1) for x in peer],
        "velocity_deviation_vs_peer": deviation.get((hidden, tokens, mode)),
    })
meta = {
    "what": "one Cosmos3 transformer forward (both streams, understanding cache off), random seeded weights",
    "stepmix": "bf16 activations (Cosmos3Transformer::set_activation_dtype(BF16)), STEPMIX_THREADS=2",
    "peer": "bench/peer_transformer.py: PyTorch %s eager, bf16, torch.set_num_threads(2)" % os.popen(
        "/usr/bin/python3 -c 'import torch; print(torch.__version__)'").read().strip(),
    "statistic": "ms / peer_ms: median of every timed forward of a case (each process: one warm-up, then "
                 "the timed repeats); best_*: the fastest sample",
    "samples": samples_path,
    "load_average_at_stepmix_runs": {"min": min(loads), "max": max(loads)} if loads else None,
    "written": time.strftime("%Y-%m-%d %H:%M:%S"),
}
with open(out_path, "w") as f:
    json.dump({"meta": meta, "results": rows}, f, indent=2)
    f.write("\n")

print(f"{'hidden':>6} {'tokens':>6} {'mode':>6} | {'ms':>8} {'spread':>6} | {'peer ms':>8} {'spread':>6} | "
      f"{'ratio':>5} | {'best':>7} {'peer best':>9} {'ratio':>5} | {'dev':>7}")
print("-" * 100)
for r in rows:
    dev = r["velocity_deviation_vs_peer"]
    print(f"{r['config']['hidden']:>6} {r['tokens']:>6} {r['mode']:>6} | {r['ms']:>8.1f} {spread(r['ms_samples']):>6.0%} | "
          f"{r['peer_ms']:>8.1f} {spread(r['peer_ms_samples']):>6.0%} | {r['ratio']:>5.2f} | "
          f"{r['best_ms']:>7.1f} {r['peer_best_ms']:>9.1f} {r['ratio_of_best']:>5.2f} | "
          f"{dev if dev is None else format(dev, '.1e'):>7}")
print("ms: median of one forward; spread: (max - min) / median of the samples; ratio: peer ms / stepmix ms;")
print("best: fastest sample; dev: max|v_peer - v_stepmix| / max|v_stepmix| of the velocity (both bf16;")
print("w8a8 activation codes may differ by a step between the two).")
if loads:
    print(f"1-minute load average when stepmix runs started: {min(loads):.1f} .. {max(loads):.1f} (2 cores)")
print(f"written to {out_path}")
PY
