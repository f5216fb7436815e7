#!/usr/bin/env bash
# Linear benchmark: stepmix W8A8 / W8A16 / BF16 (BF16 activations) against
# PyTorch bf16 F.linear, both on 2 threads. Not a test: numbers are noisy on a
# shared machine.
#
# usage: bench/run-linear.sh [--quick] [--rounds R] [--min-seconds S] [--cpu-time]
#   --quick   4 shapes instead of 20 (a couple of minutes on 2 cores)
#   --rounds  alternate stepmix and PyTorch R times (default 2) and keep each
#             side's best, so a burst of load from other processes does not
#             land on one side only
#   --cpu-time one thread on both sides, timed by the thread's CPU clock:
#             per-core efficiency, robust to other processes on the machine
# Each number is the best call of a round (see bench/linear_bench.cpp).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
threads="${STEPMIX_THREADS:-2}"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target bench_linear bench_peak_dot_bf16 -j2 >/dev/null

rounds=2
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --cpu-time) threads=1; args+=("$1"); shift ;;
    *) args+=("$1"); shift ;;
  esac
done

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  STEPMIX_THREADS="$threads" "$build/bench/bench_linear" "${args[@]}" | tee -a "$results" >&2
  OMP_NUM_THREADS="$threads" /usr/bin/python3 "$here/torch_linear.py" "${args[@]}" | tee -a "$results" >&2
done
# The denominator of "fraction of peak": the AMX-BF16 tile peak where the CPU
# and the OS allow AMX (what the amx variant and oneDNN run on), else the
# AVX512_BF16 vdpbf16ps peak.
peak=$("$build/bench/bench_peak_dot_bf16" "$threads" --amx | cut -d, -f3)
peak_unit="AMX-BF16 tdpbf16ps (tile-only microkernel)"
if [[ "$peak" == unsupported ]]; then
  peak=$("$build/bench/bench_peak_dot_bf16" "$threads" | cut -d, -f3)
  peak_unit="AVX512_BF16 vdpbf16ps (no AMX on this CPU)"
fi
mkdir -p "$here/results"

/usr/bin/python3 - "$results" "$peak" "$here/results/linear.json" "$threads" "$peak_unit" <<'PY'
import collections, json, sys
rows = collections.OrderedDict()
peak = float(sys.argv[2])
peak_unit = sys.argv[5]
for line in open(sys.argv[1]):
    who, mode, m, k, n, _, gflops = line.strip().split(",")
    best = rows.setdefault((int(m), int(k), int(n)), {})
    best[who + ":" + mode] = max(best.get(who + ":" + mode, 0.0), float(gflops))
modes = ["W8A8", "W8A16", "W8A16-cached", "BF16"]
print(f"{'M':>5} {'K':>6} {'N':>6} | " + " ".join(f"{m:>12}" for m in modes) + f" | {'torch bf16':>10} | ratio (stepmix/torch) " + " ".join(f"{m:>8}" for m in modes))
print("-" * 140)
for (m, k, n), r in rows.items():
    torch_g = r.get("torch:BF16")
    vals = [r.get("stepmix:" + mode) for mode in modes]
    ratios = [f"{v / torch_g:8.2f}" if v and torch_g else f"{'-':>8}" for v in vals]
    print(f"{m:>5} {k:>6} {n:>6} | " + " ".join(f"{v:12.1f}" if v else f"{'-':>12}" for v in vals) +
          f" | {torch_g if torch_g else 0:10.1f} | {'':22}" + " ".join(ratios))
print("GFLOP/s = 2·M·N·K / best call time over all rounds; BF16 activations everywhere; W8A16 converts FP8 weights inside the kernel, W8A16-cached uses WeightCache::All.")
print(f"{peak_unit} peak on {sys.argv[4]} thread(s), measured in this run: {peak:.1f} GFLOP/s; "
      "fraction of peak per mode:")
records = []
for (m, k, n), r in rows.items():
    torch_g = r.get("torch:BF16")
    fractions = []
    for mode in modes:
        g = r.get("stepmix:" + mode)
        if g is None:
            continue
        records.append({"M": m, "N": n, "K": k, "mode": mode, "gflops": g, "peer_gflops": torch_g,
                        "ratio": g / torch_g if torch_g else None, "fraction_of_peak": g / peak if peak else None})
        fractions.append(f"{mode} {g / peak:.0%}")
    print(f"  {m:>5} {k:>6} {n:>6}: " + ", ".join(fractions) +
          (f", torch {torch_g / peak:.0%}" if torch_g else ""))
json.dump({"threads": int(sys.argv[4]), "peak_gflops": peak, "peak_unit": peak_unit, "records": records}, open(sys.argv[3], "w"), indent=1)
print(f"wrote {sys.argv[3]}")
PY
