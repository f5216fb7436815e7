#!/usr/bin/env bash
# Wan2.2 VAE decode benchmark: stepmix against a PyTorch eager peer
# (bench/peer_vae.py, Debian's python3-torch), both on 2 threads, the same
# seeded random weights (BF16 file, the real Wan2.2 layout: decoder base 256,
# dim_mult [1, 2, 4, 4], 2 residual blocks per stage, 705 M parameters with
# the encoder) and the same latents:
#   image-512   1 latent frame of 32×32  -> one 512×512 image
#   video-256   5 latent frames of 16×16 -> 17 frames of 256×256
# float32 on both sides (stepmix's default), and --activations bf16 against
# the peer in bf16. The instruction peaks of the same machine are measured in
# the same run (bench/peak_dot_bf16.cpp: vfmadd231ps, vdpbf16ps, AMX tiles),
# and every result is given as a fraction of the peak of the instruction it
# runs on (FLOPs = 2 · multiply-accumulates of the convolutions that ran).
# Then peak resident memory of 720p-width decodes (1280 px wide, 128 px
# high, so the run stays short) of 1, 2 and 3 latent frames, to show that
# memory stops growing once the causal histories are full.
#
# usage: bench/run-vae.sh [--rounds R] [--no-bf16] [--no-f32] [--cases "image-512 video-256"] [--summarize SAMPLES]
#   --rounds     alternate stepmix and peer R times per case (default 1)
#   --no-bf16    float32 only
#   --no-f32     bf16 only
#   --cases      only these timing cases, no memory cases; results go to
#                bench/results/vae-partial.json (+ vae-partial-samples.jsonl)
#   --summarize  no runs: rebuild the table and JSON from a samples file
# Writes bench/results/vae.json (+ raw samples bench/results/vae-samples.jsonl).
# Not a test: on a shared machine the numbers move with the neighbours' load
# (the 1-minute load average at each run is recorded).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
data="$build/vae-data"
threads=2
rounds=1
bf16=1
f32=1
only=""
summarize=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --no-bf16) bf16=0; shift ;;
    --no-f32) f32=0; shift ;;
    --cases) only="$2"; shift 2 ;;
    --summarize) summarize="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds R] [--no-bf16] [--no-f32] [--cases NAMES] [--summarize SAMPLES]" >&2; exit 2 ;;
  esac
done

mkdir -p "$here/results"
result_name=vae
[[ -n "$only" ]] && result_name=vae-partial
samples="$here/results/$result_name-samples.jsonl"
peer="/usr/bin/python3 $here/peer_vae.py"
if [[ -n "$summarize" ]]; then
  [[ "$(realpath "$summarize")" == "$(realpath -m "$samples")" ]] || cp "$summarize" "$samples"
else
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target bench_vae bench_peak_dot_bf16 -j2 >/dev/null
  bench="$build/bench/bench_vae"
  model="$data/wan22-width"
  mkdir -p "$data"
  if [[ ! -f "$model/made" ]]; then
    echo "writing the Wan2.2-width model to $model" >&2
    $peer make --dir "$model" --base 256 --encoder-base 160 --res-blocks 2 --seed 1
    touch "$model/made"
  fi
  declare -A cases=([image-512]="1 32 32" [video-256]="5 16 16" [rss-720w-t1]="1 8 80" [rss-720w-t2]="2 8 80"
                    [rss-720w-t3]="3 8 80")
  for name in "${!cases[@]}"; do
    read -r frames height width <<<"${cases[$name]}"
    [[ -f "$data/$name.safetensors" ]] ||
      $peer latent --out "$data/$name.safetensors" --frames "$frames" --height "$height" --width "$width" --seed 7
  done
  export OMP_NUM_THREADS=$threads STEPMIX_THREADS=$threads
  : >"$samples"
  tag() { sed "s/^{/{\"case\": \"$1\", \"side\": \"$2\", /" | tee -a "$samples" >&2; }
  for peak in --f32 "" --amx; do
    "$build/bench/bench_peak_dot_bf16" "$threads" $peak | awk -F, '{ printf "{\"peak\": \"%s\", \"gflops\": \"%s\"}\n", $1, $3 }' |
      tee -a "$samples" >&2
  done
  for ((round = 1; round <= rounds; ++round)); do
    for name in ${only:-image-512 video-256}; do
      modes=()
      ((f32)) && modes+=(f32)
      ((bf16)) && modes+=(bf16)
      for mode in "${modes[@]}"; do
        echo "$name, $mode, round $round: stepmix" >&2
        "$bench" --vae "$model" --latent "$data/$name.safetensors" --activations "$mode" --pixels "$data/$name.$mode.f32" |
          tag "$name" stepmix
        echo "$name, $mode, round $round: peer" >&2
        $peer time --dir "$model" --latent "$data/$name.safetensors" --threads "$threads" \
          --dtype "$([[ $mode == f32 ]] && echo fp32 || echo bf16)" --compare "$data/$name.$mode.f32" | tag "$name" peer
      done
    done
  done
  [[ -n "$only" ]] || for t in 1 2 3; do
    echo "rss-720w-t$t: stepmix" >&2
    "$bench" --vae "$model" --latent "$data/rss-720w-t$t.safetensors" | tag "rss-720w-t$t" stepmix
  done
fi

/usr/bin/python3 - "$samples" "$here/results/$result_name.json" <<'PY'
import collections, json, statistics, sys, time

samples_path, out_path = sys.argv[1:]
peaks, runs, rss = {}, collections.defaultdict(list), {}
for line in open(samples_path):
    s = json.loads(line)
    if "peak" in s:
        peaks[s["peak"]] = None if s["gflops"] == "unsupported" else float(s["gflops"])
        continue
    mode = s.get("activations") or ("f32" if s["dtype"] == "fp32" else "bf16")
    if s["case"].startswith("rss"):
        rss[s["case"]] = s
    else:
        runs[(s["case"], mode, s["side"])].append(s)

rows = []
for case, mode in sorted({k[:2] for k in runs}):
    ours, peer = runs[(case, mode, "stepmix")], runs[(case, mode, "peer")]
    ms = statistics.median(m for s in ours for m in s["ms"])
    peer_ms = statistics.median(m for s in peer for m in s["ms"])
    cpu = [m for s in ours for m in s.get("cpu_ms", [])]
    peer_cpu = [m for s in peer for m in s.get("cpu_ms", [])]
    cpu_ms = statistics.median(cpu) if cpu else None
    peer_cpu_ms = statistics.median(peer_cpu) if peer_cpu else None
    macs, full = ours[0]["macs"], ours[0]["full_kernel_macs"]
    # The peak of the instruction the convolutions ran on: vfmadd231ps for
    # float32; for bf16 the AMX tiles where the amx kernels ran, else vdpbf16ps.
    unit = "f32_peak" if mode == "f32" else ("amx_peak" if ours[0].get("kernels") == "amx" else "peak")
    peak = peaks.get(unit)
    row = {
        "case": case, "latent_shape": ours[0]["shape"], "activations": mode,
        "ms": round(ms, 1), "peer_ms": round(peer_ms, 1), "speedup": round(peer_ms / ms, 2),
        "ms_samples": [m for s in ours for m in s["ms"]], "peer_ms_samples": [m for s in peer for m in s["ms"]],
        "executed_gflop": round(2 * macs / 1e9, 1), "full_kernel_gflop": round(2 * full / 1e9, 1),
        "gflops": round(2 * macs / ms / 1e6, 1), "peer_gflops": round(2 * full / peer_ms / 1e6, 1),
        "peak_unit": {"f32_peak": "vfmadd231ps", "peak": "vdpbf16ps", "amx_peak": "AMX tdpbf16ps"}[unit],
        "peak_gflops": peak, "conv_ms": ours[0].get("conv_ms"), "kernels": ours[0].get("kernels"),
        "fraction_of_peak": round(2 * macs / ms / 1e6 / peak, 3) if peak else None,
        "peer_fraction_of_peak": round(2 * full / peer_ms / 1e6 / peak, 3) if peak else None,
        # Per CPU-second: the work over the CPU time both threads used, against
        # the per-thread peak (the peaks are timed by thread CPU clocks too), so
        # that the neighbours' share of the cores does not count.
        "cpu_ms": cpu_ms, "peer_cpu_ms": peer_cpu_ms,
        "speedup_cpu_time": round(peer_cpu_ms / cpu_ms, 2) if (cpu_ms and peer_cpu_ms) else None,
        "fraction_of_peak_per_cpu_second": round(2 * macs / cpu_ms / 1e6 / (peak / 2), 3) if (peak and cpu_ms) else None,
        "peer_fraction_of_peak_per_cpu_second":
            round(2 * full / peer_cpu_ms / 1e6 / (peak / 2), 3) if (peak and peer_cpu_ms) else None,
        "deviation_vs_peer": peer[-1].get("deviation_vs_stepmix"),
        "load_average": [s["load_average"] for s in ours],
    }
    rows.append(row)
meta = {
    "what": "Wan2.2 VAE decoder (+ post_quant_conv) at the real width (decoder base 256, dim_mult [1,2,4,4], "
            "2 residual blocks per stage), seeded random BF16 weights; one decode per sample, load excluded",
    "stepmix": "bench/vae_bench.cpp, STEPMIX_THREADS=2; FLOPs = 2 x multiply-accumulates its convolutions ran "
               "(taps on zero frames and padding skipped)",
    "peer": "bench/peer_vae.py, PyTorch eager, torch.set_num_threads(2); FLOPs = 2 x the full-kernel "
            "multiply-accumulates (it multiplies the causal zero padding)",
    "peaks_2_threads_gflops": peaks,
    "statistic": "median of the samples; speedup = peer_ms / ms",
    "written": time.strftime("%Y-%m-%d %H:%M:%S"),
}
memory = [{"case": k, "latent_shape": v["shape"], "peak_rss_during_decode_mib": v["peak_rss_during_decode_mib"],
           "rss_after_load_mib": v["rss_after_load_mib"], "estimate_mib": v["estimate_mib"], "ms": v["ms"],
           "load_average": v["load_average"]} for k, v in sorted(rss.items())]
with open(out_path, "w") as f:
    json.dump({"meta": meta, "results": rows, "memory": memory}, f, indent=2)
    f.write("\n")

print(f"peaks (2 threads, GFLOP/s): {peaks}")
print(f"{'case':>10} {'acts':>4} | {'ms':>9} {'peer ms':>9} {'speedup':>7} | {'GFLOP/s':>8} {'of peak':>7} | "
      f"{'peer GF/s':>9} {'of peak':>7} | {'cpu speedup':>11} {'of peak/cpu-s':>13} {'peer':>6} | {'dev':>7} | load")
for r in rows:
    print(f"{r['case']:>10} {r['activations']:>4} | {r['ms']:>9.0f} {r['peer_ms']:>9.0f} {r['speedup']:>7.2f} | "
          f"{r['gflops']:>8.1f} {r['fraction_of_peak'] or 0:>7.0%} | {r['peer_gflops']:>9.1f} "
          f"{r['peer_fraction_of_peak'] or 0:>7.0%} | {r['speedup_cpu_time'] or 0:>11.2f} "
          f"{r['fraction_of_peak_per_cpu_second'] or 0:>13.0%} {r['peer_fraction_of_peak_per_cpu_second'] or 0:>6.0%} | "
          f"{r['deviation_vs_peer'] or 0:>7.1e} | {r['load_average']}")
for m in memory:
    print(f"{m['case']}: latent {m['latent_shape']}, peak RSS during decode {m['peak_rss_during_decode_mib']:.0f} MiB "
          f"(after load {m['rss_after_load_mib']:.0f} MiB, estimate {m['estimate_mib']:.0f} MiB)")
print(f"written to {out_path}")
PY
