#!/usr/bin/env bash
# The device check's benchmarks on the CPU build of the CUDA backend (the
# SIMT emulator and the cuBLASLt model) at --tiny sizes, then its summary over
# what they printed: every case runs and prints its record, every spot check
# passes, the records carry the fields the summary reads, and the summary
# makes its tables (where a forward's time goes among them) without a
# PyTorch peer (a target with no peer figure is n/a, one whose stepmix case
# failed is a MISS); and the VAE decode benchmark of its optional step
# (bench_vae --device cuda) on the tiny Wan2.2 golden VAE.
# Timings are not looked at.
# $1 = bench_cuda_on_cpu, $2 = bench_cuda_forward_on_cpu, $3 = bench_vae_on_cpu, $4 = bench/, $5 = tests/data.
set -u
bench="$1" forward="$2" vae="$3" bench_dir="$4" data="$5"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"$bench" --info --ceilings --linear --attention --cudnn-attention --tiny --reps 1 >"$tmp/stepmix.jsonl" 2>"$tmp/err" ||
  fail "bench_cuda: $(cat "$tmp/err")"
"$forward" --tiny --dir "$tmp/models" --layers 1,2 --tokens 16 --text 8 --reps 2 >>"$tmp/stepmix.jsonl" \
  2>"$tmp/err" || fail "bench_cuda_forward: $(cat "$tmp/err")"
: >"$tmp/torch.jsonl"  # no peer here

/usr/bin/python3 - "$tmp/stepmix.jsonl" <<'EOF' || fail "records"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
errors = [r for r in records if "error" in r and not r.get("optional")]
assert not errors, errors
# cuDNN's attention, an optional case, is not part of the CPU build: one record saying so.
cudnn = [r for r in records if r.get("variant") == "cudnn sdpa"]
assert len(cudnn) == 1 and cudnn[0]["optional"] is True and "not part of the CPU build" in cudnn[0]["error"], cudnn
def count(**match):
    return sum(all(r.get(k) == v for k, v in match.items()) for r in records)
assert count(bench="info", usable=True) == 1
for what in ("bf16_gemm", "fp8_gemm", "device_copy"):
    assert count(bench="ceiling", what=what) == 1, what
modes = ("W8A8", "W8A8+quantize", "W8A16", "W8A16 cached", "BF16")
for mode in modes:
    assert count(bench="linear", mode=mode) == 4, mode  # 2 M x 2 (K, N)
assert all(r["tflops"] > 0 for r in records if r.get("bench") == "linear")
checks = [r for r in records if r.get("bench") == "check"]
assert len(checks) == 2 + 3 and all(r["pass"] is True for r in checks), checks  # W8A8 rows; 3 flash variants
assert count(bench="attention", causal=False) == 3 + 1 and count(bench="attention", causal=True) == 1  # + cuDNN
assert count(bench="forward_info", hidden=512) == 1
for mode in ("dense", "w8a16", "w8a8"):
    for layers in (1, 2):
        forward = [r for r in records if r.get("bench") == "forward" and r.get("mode") == mode
                   and r.get("layers") == layers]
        assert len(forward) == 1 and len(forward[0]["samples"]) == 2, (mode, layers)
        assert forward[0]["peak_device_bytes"] >= forward[0]["held_device_bytes"] > 0, forward[0]
        assert forward[0]["attention"] == "flash", forward[0]  # attention_bf16's default without cuDNN
        assert count(bench="cfg_step", mode=mode, layers=layers) == 1, (mode, layers)
        # One profiled forward: a generation-stream attention per layer (the
        # understanding K/V cached), the mode's Linears (q/k/v, o, gate/up and
        # down: four calls a layer), its total the sum of its kinds.
        profile = [r for r in records if r.get("bench") == "forward_profile" and r.get("mode") == mode
                   and r.get("layers") == layers]
        assert len(profile) == 1, (mode, layers)
        kinds = profile[0]["profile"]
        assert kinds["attention"]["calls"] == layers and kinds["attention"]["tflops"] > 0, kinds
        if mode != "dense":
            assert kinds["linear " + mode]["calls"] == 4 * layers and kinds["linear " + mode]["tflops"] > 0, kinds
        assert abs(sum(k["ms"] for k in kinds.values()) - profile[0]["ms"]) < 1e-3 * (1 + len(kinds)), profile
        # Memory-bound: no FLOPs counted, its bytes' rate instead.
        assert "tflops" not in kinds["rms_norm"] and kinds["rms_norm"]["tb_per_s"] > 0, kinds
assert count(bench="loop_step", tokens=16) == 1
EOF

/usr/bin/python3 "$bench_dir/cuda_summary.py" "$tmp/stepmix.jsonl" "$tmp/torch.jsonl" "$tmp/summary.json" \
  >"$tmp/summary.txt" 2>"$tmp/err" || fail "cuda_summary.py: $(cat "$tmp/err")"
for line in "^  stepmix  attention cudnn sdpa: .*not part of the CPU build.*(optional: not counted)$" \
  "^device: SIMT emulator" "^linear, TFLOP/s" "^ *48 *128 *384 |" "^  stepmix  flash 32 rows/warp 64 keys" \
  "^Nano-shaped forward (hidden 512, FFN 1536, 4/2 heads, head_dim 128)" "^ *16 w8a8 *| *1,2" \
  "mixed W8A16x3 / W8A8x29 / W8A16x3" "^  of that, the W8A16 Linears (bf16 GEMMs where W8A8 runs FP8 ones, " \
  "^  2 layers w8a16 *16 tokens: separate" "^  ok   flash 16 rows/warp" \
  "^  generation-stream attention in these forwards: flash (" \
  "^where a forward's time goes" "^  16 tokens, 2 layers  *dense  *w8a16  *w8a8$" "^  linear w8a8  *- *- *[0-9.]* *[0-9]*%" \
  "^  rms_norm  *[0-9.]* *[0-9]*% [0-9]\.[0-9][0-9]c  *[0-9.]* *[0-9]*% [0-9]\.[0-9][0-9]c" \
  "^  n/a  attention flash 16 rows/warp >= 1.0x SDPA default"; do
  grep -q -- "$line" "$tmp/summary.txt" || fail "summary lacks $line"$'\n'"$(cat "$tmp/summary.txt")"
done
grep -q "FAIL" "$tmp/summary.txt" && fail "a check failed"$'\n'"$(cat "$tmp/summary.txt")"
grep -q "attention cudnn sdpa >=" "$tmp/summary.txt" && fail "a failed optional case was judged"$'\n'"$(cat "$tmp/summary.txt")"
/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); assert len(s["linear"]) == 4 and s["checks"]' \
  "$tmp/summary.json" || fail "summary.json"
# A target is n/a only where the peer's figure is missing: with a peer SDPA
# figure and a stepmix flash case that failed, that target is a MISS.
/usr/bin/python3 - "$tmp/stepmix.jsonl" "$tmp/failed.jsonl" "$tmp/peer.jsonl" <<'EOF' || fail "failed-case records"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
with open(sys.argv[2], "w") as out:
    for r in records:
        if r.get("bench") == "attention" and r.get("variant") == "flash 16 rows/warp":
            r = {k: r[k] for k in ("impl", "bench", "variant", "q_rows", "kv_rows", "causal")}
            r["error"] = "a failed case"
        out.write(json.dumps(r) + "\n")
peer = {"impl": "torch", "bench": "attention", "variant": "SDPA default", "q_rows": 70, "kv_rows": 90,
        "causal": False, "ms": 1e-6, "tflops": 1e3}  # beyond any CPU run
open(sys.argv[3], "w").write(json.dumps(peer) + "\n")
EOF
/usr/bin/python3 "$bench_dir/cuda_summary.py" "$tmp/failed.jsonl" "$tmp/peer.jsonl" "$tmp/failed.json" \
  >"$tmp/failed.txt" 2>"$tmp/err" || fail "cuda_summary.py with a failed case: $(cat "$tmp/err")"
for line in "^  MISS attention flash 16 rows/warp >= 1.0x SDPA default: *-$" \
  "^  MISS attention flash 32 rows/warp >= 1.0x SDPA default: " "^  stepmix  attention flash 16 rows/warp: a failed case"; do
  grep -q -- "$line" "$tmp/failed.txt" || fail "summary with a failed case lacks $line"$'\n'"$(cat "$tmp/failed.txt")"
done

# What bench/cuda_vae_check.sh reads of bench_vae's line.
golden="$data/golden/wan22-vae-tiny"
"$vae" --vae "$golden/vae" --latent "$golden/decode/video.safetensors" --repeats 1 --activations bf16 \
  --device cuda >"$tmp/vae.json" 2>"$tmp/err" || fail "bench_vae: $(cat "$tmp/err")"
/usr/bin/python3 - "$tmp/vae.json" <<'EOF' || fail "bench_vae's line: $(cat "$tmp/vae.json")"
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["device"] == "cuda" and r["shape"] == [1, 48, 3, 4, 6], r
assert len(r["ms"]) == 1 and r["ms"][0] > 0 and r["peak_gpu_mib"] > 0, r
EOF
echo "ok: bench_cuda and bench_cuda_forward at --tiny sizes on the CPU build, their summary, and bench_vae"
