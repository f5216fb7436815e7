#!/usr/bin/env bash
# Tokenizer benchmark: stepmix's byte-level BPE against the JavaScript
# reference (@huggingface/tokenizers, the tokenizer of Transformers.js) on the
# same ~10 MB of mixed-language text, single-threaded on both sides, plus the
# latency of one 4 kB JSON caption. Both sides must produce the same ids
# (checksums compared). Also proves the native chat-template rendering
# against a Jinja implementation (bench/check-chat-templates.mjs).
# Not a test: numbers are noisy on a shared machine; CPU seconds are reported
# next to wall seconds for that reason.
#
# usage: bench/run-tokenizer.sh [--megabytes M] [--rounds R]
# Needs node and npm (scripts/setup.sh --bench); the npm packages go into
# build-tokenizer-peer/, never needed by the build or the tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
peer="$root/build-tokenizer-peer"
megabytes=10
rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --megabytes) megabytes="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "usage: bench/run-tokenizer.sh [--megabytes M] [--rounds R]" >&2; exit 2 ;;
  esac
done

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target bench_tokenizer -j2 >/dev/null

mkdir -p "$peer"
if [[ ! -d "$peer/node_modules/@huggingface/tokenizers" || ! -d "$peer/node_modules/@huggingface/jinja" ]]; then
  (cd "$peer" && npm install --no-audit --no-fund --silent @huggingface/tokenizers@0.2.0 @huggingface/jinja@0.5.11)
fi
# ES modules resolve packages next to the script, so the peer scripts run from there.
cp "$here/tokenizer_peer.mjs" "$here/check-chat-templates.mjs" "$peer/"

golden="$root/tests/data/golden/qwen3-tokenizer"
tok="$peer/qwen3"
mkdir -p "$tok"
gzip -dc "$golden/text_tokenizer/tokenizer.json.gz" >"$tok/tokenizer.json"
cp "$golden/text_tokenizer/tokenizer_config.json" "$golden/text_tokenizer/chat_template.jinja" "$tok/"
input_info=$(/usr/bin/python3 "$here/make_tokenizer_text.py" "$root" "$peer/input" "$megabytes")

echo "chat templates:" >&2
node "$peer/check-chat-templates.mjs" "$golden/prompts.jsonl" "$golden/text_tokenizer/chat_template.jinja" \
  "$root/tests/data/chat-templates/qwen3.jinja" | tee "$peer/templates.json" >&2

echo "stepmix:" >&2
"$build/bench/bench_tokenizer" "$tok" "$peer/input/text.jsonl" "$peer/input/caption.txt" "$rounds" | tee "$peer/stepmix.json" >&2
echo "@huggingface/tokenizers (node $(node --version)):" >&2
node "$peer/tokenizer_peer.mjs" "$tok" "$peer/input/text.jsonl" "$peer/input/caption.txt" "$rounds" | tee "$peer/peer.json" >&2

mkdir -p "$here/results"
/usr/bin/python3 - "$peer" "$here/results/tokenizer.json" "$input_info" "$(node --version)" <<'PY'
import json, platform, subprocess, sys
peer, out, input_info, node = sys.argv[1:]
s = json.load(open(f"{peer}/stepmix.json"))
p = json.load(open(f"{peer}/peer.json"))
t = json.load(open(f"{peer}/templates.json"))
if (s["ids"], s["checksum"]) != (p["ids"], p["checksum"]) or s["caption_ids"] != p["caption_ids"]:
    sys.exit(f"the two tokenizers disagree: stepmix {s['ids']} ids / {s['checksum']}, peer {p['ids']} ids / {p['checksum']}")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
result = {
    "input": json.loads(input_info), "cpu": cpu, "node": node, "peer": "@huggingface/tokenizers 0.2.0",
    "same_ids": True, "ids": s["ids"],
    "stepmix": s, "reference": p,
    "throughput_ratio": s["mb_per_s"] / p["mb_per_s"],
    "throughput_ratio_cpu_time": s["mb_per_cpu_s"] / p["mb_per_cpu_s"],
    "caption_median_ratio": p["caption_median_ms"] / s["caption_median_ms"],
    "chat_templates": t,
}
json.dump(result, open(out, "w"), indent=1)
print(f"input: {result['input']['bytes'] / 1e6:.1f} MB in {result['input']['chunks']} chunks, "
      f"{result['input']['non_ascii_fraction']:.0%} non-ASCII bytes; {s['ids']} ids, identical on both sides")
print(f"{'':28} {'MB/s':>8} {'MB/CPU-s':>9} {'1st round':>10} {'load s':>7} {'caption 1st ms':>15} {'caption median ms':>18}")
for name, r in (("stepmix", s), ("@huggingface/tokenizers", p)):
    print(f"{name:28} {r['mb_per_s']:8.2f} {r['mb_per_cpu_s']:9.2f} {r['mb_per_s_first_round']:10.2f} {r['load_s']:7.2f} "
          f"{r['caption_first_ms']:15.3f} {r['caption_median_ms']:18.3f}")
print(f"throughput: {result['throughput_ratio']:.1f}x the reference (wall), {result['throughput_ratio_cpu_time']:.1f}x "
      f"(CPU time); caption median: {result['caption_median_ratio']:.1f}x faster")
print(f"wrote {out}")
PY
