#!/usr/bin/env bash
# Produces the evidence of docs/results.md: `stepmix compare` (FP8 modes against
# the BF16 model: PSNR/SSIM/MAE, paired gains over W8A8-everywhere, per-step
# error, classifier accuracy, grids) and `stepmix bench` (time and memory per
# mode, PyTorch peer) on the embedded Fashion-MNIST model at 8, 20 and 35 steps.
#
#   scripts/results.sh [--quick] [--part all|compare|bench|summary] [--out DIR]
#
#   --quick   a small run to check the script (2 prompts x 2 seeds, 1 bench
#             repeat; a couple of minutes); writes to
#             $TMPDIR/stepmix-results-quick unless --out is given, so the
#             committed results stay untouched
#   --part    run only the compare or only the bench half (e.g. to rerun the
#             bench alone on a quiet machine), or only rewrite summary.md from
#             the JSON files there; default all
#   --out     output folder (default docs/results)
#
# Environment:
#   STEPMIX_BIN   an existing stepmix binary (default: build it, release, in build/)
#   NICE          nice level for the compare runs (default 0; the bench runs unniced)
#
# Output: OUT/steps-N/ for N in 8 20 35: report.md, report.json, grid.png,
# step_error.png (stepmix compare), compare.txt (its summary), bench.json and
# bench.txt (stepmix bench); OUT/summary.md (the
# tables of docs/results.md); OUT/run-compare.txt, OUT/run-bench.txt (machine,
# load, commit, commands, durations). Nothing else: compare writes no raw
# latents, and report.json is re-written compactly (same numbers) when python3 is
# available. The PyTorch peer needs `scripts/setup.sh --bench`; without it the
# bench prints "peer: not run" and the rest stands.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
part=all
out=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --part) part="${2:?--part needs all, compare, bench or summary}"; shift ;;
    --out) out="${2:?--out needs a folder}"; shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "results.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$part" in all|compare|bench|summary) ;; *) echo "results.sh: --part: expected all, compare, bench or summary" >&2; exit 2 ;; esac

MODEL=models/fashion-cosmos3-fp8
REFERENCE=models/fashion-cosmos3-bf16
PROMPTS=docs/results/prompts.txt   # the ten canonical prompts with class labels
GUIDANCE=3                         # the model's default (model_index.json)
STEP_COUNTS=(8 20 35)
# Extra compare modes, at 8 steps only (they cost a full generation each):
#   first-last:1,0 / 0,1   W8A16 on the first step only / on the last step only
#                          (which end of the schedule earns the gain);
#   first-last:0,7 / 7,0   W8A8 on step 0 only / on step 7 only (W8A16 elsewhere):
#                          what an activation-rounding error costs at that step.
declare -A POLICIES=([8]="first-last:1,0 first-last:0,1 first-last:0,7 first-last:7,0" [20]="" [35]="")
# Seeds per prompt (x 10 prompts): 200 images at every step count. The compare
# half is ~57,000 generation steps: 8.5 minutes at nice 5 on a 2-core machine
# next to other people's builds (load 3-4); the bench half about a minute alone.
declare -A SEEDS=([8]=20 [20]=20 [35]=20)
REPEAT=5    # timed bench generations per mode (and of the PyTorch peer)
WARMUP=1

if [[ $quick == 1 ]]; then
  out="${out:-${TMPDIR:-/tmp}/stepmix-results-quick}"
  SEEDS=([8]=2 [20]=2 [35]=2)
  REPEAT=1
  WARMUP=0
else
  out="${out:-docs/results}"
fi
mkdir -p "$out"

if [[ -n "${STEPMIX_BIN:-}" || $part == summary ]]; then
  bin="${STEPMIX_BIN:-build/stepmix}"
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"$(nproc)" --target stepmix
  bin=build/stepmix
fi
[[ $part == summary || -x "$bin" ]] || { echo "results.sh: $bin is not an executable stepmix" >&2; exit 2; }

prompts="$PROMPTS"
if [[ $quick == 1 ]]; then  # two prompts (t-shirt, sandal)
  prompts="$out/prompts-quick.txt"
  grep -E 'label:(0|5)$' "$PROMPTS" >"$prompts"
fi

# Compact report.json in place (the same numbers without indentation).
compact_json() {
  command -v python3 >/dev/null || return 0
  python3 - "$1" <<'EOF'
import json, sys
path = sys.argv[1]
with open(path) as f:
    data = json.load(f)
with open(path + ".tmp", "w") as f:
    json.dump(data, f, separators=(",", ":"))
    f.write("\n")
import os
os.replace(path + ".tmp", path)
EOF
}

header() {
  echo "# scripts/results.sh $([[ $quick == 1 ]] && echo --quick) --part $part --out $out"
  echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "binary:  $bin ($("$bin" --version 2>/dev/null | head -1 || echo '?'))"
  # The commit the binary was built from, when it sits in a git checkout.
  local src
  src=$(git -C "$(dirname "$bin")" rev-parse --short HEAD 2>/dev/null || echo unknown)
  echo "source:  commit $src$(git -C "$(dirname "$bin")" diff --quiet HEAD -- :/src 2>/dev/null || echo ' (src/ modified)')"
  echo "machine: $(nproc) hardware threads, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at start"
}

# summary.md: the tables of docs/results.md, from the JSON files (python3).
write_summary() {
  command -v python3 >/dev/null || { echo "results.sh: no python3, summary.md not written" >&2; return 0; }
  python3 - "$out" "${STEP_COUNTS[@]}" <<'EOF'
import json, os, random, statistics, sys

out = sys.argv[1]
steps = [int(s) for s in sys.argv[2:]]

def med_ci(values, resamples=2000, seed=20261129):
    rng = random.Random(seed)
    n = len(values)
    meds = sorted(statistics.median(rng.choice(values) for _ in range(n)) for _ in range(resamples))
    def q(p):
        pos = p * (len(meds) - 1); lo = int(pos); hi = min(lo + 1, len(meds) - 1)
        return meds[lo] + (pos - lo) * (meds[hi] - meds[lo])
    return statistics.median(values), q(0.025), q(0.975)

def pct(v):
    return "—" if v is None else f"{100 * v:.1f}%"

lines = ["# Summary (written by scripts/results.sh from steps-N/report.json and steps-N/bench.json)", "",
         "Gains vs W8A16 are computed here from the per-image PSNR of report.json (median of the paired",
         "differences, percentile bootstrap 95% interval, 2000 resamples, fixed seed); everything else is",
         "copied from the JSON that stepmix wrote. 'improved vs W8A16' = share of images with a higher PSNR",
         "than W8A16-everywhere. Final latent error = mean relative L2 error after the last step.", ""]
for n in steps:
    d = os.path.join(out, f"steps-{n}")
    rep = os.path.join(d, "report.json")
    if not os.path.exists(rep) and not os.path.exists(os.path.join(d, "bench.json")):
        continue
    lines += [f"## {n} steps", ""]
    if os.path.exists(rep):
        r = json.load(open(rep))
        lines.append(f"compare: {r['images']} images ({len(r['prompts'])} prompts x {r['seeds']} seeds), "
                     f"guidance {r['guidance']:g}, {r['scheduler']}; reference: {r['reference']['description']}")
        lines.append("")
        lines.append("| mode | trace | PSNR dB | SSIM | MAE | median image PSNR dB | median gain vs W8A8 [95% CI] "
                     "| improved vs W8A8 (MSE / MAE) | median gain vs W8A16 [95% CI] | improved vs W8A16 (MSE) "
                     "| final latent error (mean) | accuracy | same class as ref |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        per = r["per_image"]
        for m in r["modes"]:
            name = m["name"]
            acc = m["classifier"]["accuracy"] if m.get("classifier") else None
            agree = m["classifier"]["agreement_with_reference"] if m.get("classifier") else None
            if m["pooled"] is None:
                lines.append(f"| {name} | {m['trace']} | reference | | | | | | | | | {pct(acc)} | |")
                continue
            p = m["pooled"]
            q = m["paired_vs_w8a8"]
            g8 = (f"{q['median_psnr_gain_db']:+.2f} dB [{q['ci95_db'][0]:+.2f}, {q['ci95_db'][1]:+.2f}]"
                  if q else "—")
            i8 = f"{pct(q['improved_fraction'])} / {pct(q['improved_fraction_mae'])}" if q else "—"
            if name != "w8a16" and "w8a16" in per[0]["psnr_db"]:
                gains = [im["psnr_db"][name] - im["psnr_db"]["w8a16"] for im in per]
                e, lo, hi = med_ci(gains)
                g16 = f"{e:+.2f} dB [{lo:+.2f}, {hi:+.2f}]"
                better = sum(im["psnr_db"][name] > im["psnr_db"]["w8a16"] for im in per)
                i16 = pct(better / len(per))
            else:
                g16 = i16 = "—"
            psnr = "identical" if p["psnr_db"] is None else f"{p['psnr_db']:.2f}"
            final = m["step_error"]["mean"][-1]
            lines.append(f"| {name} | {m['trace']} | {psnr} | {p['ssim']:.5f} | {p['mae']:.2e} | "
                         f"{p['median_image_psnr_db']:.2f} | {g8} | {i8} | {g16} | {i16} | "
                         f"{'—' if final is None else f'{final:.2e}'} | {pct(acc)} | {pct(agree)} |")
        lines.append("")
    for variant, title in (("bench", "bench"),):
        ben = os.path.join(d, variant + ".json")
        if not os.path.exists(ben):
            continue
        b = json.load(open(ben))
        load = b.get("load_average_1m")
        lines.append(f"{title}: {b['repeat']} timed generations (+{b['warmup']} warm-up) per mode, "
                     f"{b['threads']} threads on {b['hardware_threads']} hardware threads, load average (1 min) "
                     f"{'?' if load is None else f'{load:.2f}'} at the start")
        lines.append("")
        lines.append("| mode | trace | ms/step median [p10, p90] | end-to-end s (median) | steps/s | images/s "
                     "| peak RSS MiB (cumulative) | weight MiB resident | speed-up over the PyTorch peer |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        ratios = b.get("speedup_vs_peer", {})
        for m in b["modes"]:
            s = m["step_ms"]
            r_ = ratios.get(m["name"])
            lines.append(f"| {m['name']} | {m['trace']} | {s['median']:.2f} [{s['p10']:.2f}, {s['p90']:.2f}] | "
                         f"{m['end_to_end_s']['median']:.3f} | {m['steps_per_s']:.1f} | {m['images_per_s']:.2f} | "
                         f"{m['peak_rss_bytes'] / 2**20:.1f} | {m['weight_bytes_resident'] / 2**20:.2f} | "
                         f"{'—' if r_ is None else f'{r_:.2f}x'} |")
        peer = b.get("peer", {})
        if "error" in peer:
            lines.append(f"| PyTorch peer | not run: {peer['error']} | | | | | | | |")
        else:
            s = peer["step_ms"]; e2e = peer["end_to_end_s"]["median"]
            lines.append(f"| PyTorch peer ({peer.get('dtype')}, torch {peer.get('torch')}, {peer.get('threads')} threads) "
                         f"| eager | {s['median']:.2f} [{s['p10']:.2f}, {s['p90']:.2f}] | {e2e:.3f} | "
                         f"{b['steps'] / e2e:.1f} | {1 / e2e:.2f} | {peer.get('peak_rss_bytes', 0) / 2**20:.1f} | — | 1x |")
        by = {m["name"]: m.get("step_ms_median_by_precision", {}) for m in b["modes"]}
        if "mixed" in by:
            lines.append("")
            lines.append("mixed run, median ms per step by precision: " +
                         ", ".join(f"{k} {v:.2f}" for k, v in sorted(by["mixed"].items())))
        lines.append("")
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("\n".join(lines).rstrip() + "\n")
EOF
  echo "summary: $out/summary.md"
}

total_start=$SECONDS
if [[ $part == all || $part == compare ]]; then
  log="$out/run-compare.txt"
  header >"$log"
  for n in "${STEP_COUNTS[@]}"; do
    dir="$out/steps-$n"
    mkdir -p "$out"
    t0=$SECONDS
    # compare writes a folder of its own (with its .stepmix-output marker) and
    # replaces only a folder it wrote; steps-N also holds bench.json/bench.txt
    # and compare.txt, so compare writes into a fresh folder beside it and its
    # files are moved over the old ones afterwards.
    mkdir -p "$dir"
    stage=$(mktemp -d "$out/.steps-$n.compare.XXXXXX")
    trap 'rm -rf "$stage"' EXIT
    policy_args=()
    for p in ${POLICIES[$n]}; do policy_args+=(--policy "$p"); done
    cmd=("$bin" compare --model "$MODEL" --reference "$REFERENCE" --prompts "$prompts" --seeds "${SEEDS[$n]}"
         --steps "$n" --guidance "$GUIDANCE" "${policy_args[@]}" --out "$stage/report")
    echo "== compare, $n steps: ${cmd[*]}"
    nice -n "${NICE:-0}" "${cmd[@]}" | tee "$stage/compare.txt"
    rm -f "$stage/report/.stepmix-output"
    mv -f "$stage"/report/* "$stage/compare.txt" "$dir/"
    sed -i "s|$stage/report|$dir|g" "$dir/compare.txt"  # the summary names the folder it wrote
    rm -rf "$stage"
    trap - EXIT
    compact_json "$dir/report.json"
    echo "compare $n steps: $((SECONDS - t0)) s, load $(cut -d' ' -f1-3 /proc/loadavg) at the end: nice -n ${NICE:-0} ${cmd[*]/#$stage\/report/$dir}" >>"$log"
  done
fi

if [[ $part == all || $part == bench ]]; then
  log="$out/run-bench.txt"
  header >"$log"
  for n in "${STEP_COUNTS[@]}"; do
    dir="$out/steps-$n"
    mkdir -p "$dir"
    t0=$SECONDS
    cmd=("$bin" bench --model "$MODEL" --reference "$REFERENCE" --steps "$n" --guidance "$GUIDANCE"
         --repeat "$REPEAT" --warmup "$WARMUP" --json "$dir/bench.json")
    echo "== bench, $n steps: ${cmd[*]}"
    {
      echo "# ${cmd[*]}"
      echo "# load average (1/5/15 min) before: $(cut -d' ' -f1-3 /proc/loadavg)"
      "${cmd[@]}"
      echo "# load average (1/5/15 min) after: $(cut -d' ' -f1-3 /proc/loadavg)"
    } | tee "$dir/bench.txt"
    echo "bench $n steps: $((SECONDS - t0)) s: ${cmd[*]}" >>"$log"
  done
fi

write_summary
[[ $part == summary ]] || echo "total ($part): $((SECONDS - total_start)) s" >>"$log"
echo "== done in $((SECONDS - total_start)) s; results in $out (run-compare.txt, run-bench.txt: machine, commands, durations)"
