#!/usr/bin/env bash
# The generation check of bench/cuda-device-check.sh: the embedded FP8 model
# (models/fashion-cosmos3-fp8, its 3/3 step policy) generates the same
# request for 35 steps through the CLI with --device cuda and --device cpu,
# both with bf16 activations, then `stepmix bench` runs it on the GPU.
#   - the two traces must be the checkpoint policy's, W8A16x3 / W8A8x29 /
#     W8A16x3, and identical (the step controller knows nothing of the device);
#   - the final latents must agree within 3e-1 of max|cpu| (twice what the
#     CPU itself shows between its float32 and bf16 runs of this model,
#     tests/cuda/embedded_model_test.cpp);
#   - bench prints the per-mode step times and the peak GPU memory.
# Writes OUT_JSON: one object with both runs' seconds and traces, the
# deviation, the checks and the bench table's lines.
#
# usage: bash bench/cuda_generate_check.sh STEPMIX_BINARY MODEL_DIR OUT_JSON
# (CUDA_CHECK_GENERATE_DEVICE=cpu runs the "GPU" side on the CPU: a dry run
# of this script on a machine without a GPU.)
set -u
bin=$1 model=$2 out_json=$3
gpu="${CUDA_CHECK_GENERATE_DEVICE:-cuda}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
request=(--model "$model" --prompt "a photo of a bag" --seed 0 --steps 35 --activations bf16 --json)
for side in cuda cpu; do
  device=$side
  [[ $side == cuda ]] && device=$gpu
  if ! "$bin" generate "${request[@]}" --device "$device" --save-latents "$tmp/$side.safetensors" \
      >"$tmp/$side.json" 2>"$tmp/$side.err"; then
    echo "generate --device $device failed: $(cat "$tmp/$side.err")"
    exit 1
  fi
done
"$bin" bench --model "$model" --prompt "a photo of a bag" --steps 35 --repeat 3 --warmup 1 --no-peer \
  --activations bf16 --device "$gpu" >"$tmp/bench.txt" 2>&1 || { cat "$tmp/bench.txt"; exit 1; }
cat "$tmp/bench.txt"
# python3 with the machine's own libraries (the device check's Debian prefix
# is for stepmix only).
env LD_LIBRARY_PATH="${CUDA_CHECK_PEER_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" python3 - "$tmp" "$out_json" <<'EOF'
import array, json, struct, sys

tmp, out_json = sys.argv[1], sys.argv[2]

def latent(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    start, end = header["latent"]["data_offsets"]
    values = array.array("f")
    values.frombytes(blob[8 + n + start:8 + n + end])
    return values

runs = {d: json.load(open("%s/%s.json" % (tmp, d))) for d in ("cuda", "cpu")}
gpu, cpu = latent(tmp + "/cuda.safetensors"), latent(tmp + "/cpu.safetensors")
scale = max(abs(x) for x in cpu) or 1.0
deviation = max(abs(a - b) for a, b in zip(gpu, cpu)) / scale
want = "W8A16x3 / W8A8x29 / W8A16x3"
checks = {
    "same_length": len(gpu) == len(cpu),
    "cuda_trace_is_the_policy": runs["cuda"]["trace"] == want,
    "traces_identical": runs["cuda"]["trace"] == runs["cpu"]["trace"],
    "latents_within_3e-1": deviation <= 3e-1,
}
report = {"impl": "stepmix", "bench": "generate_check", "model": "fashion-cosmos3-fp8", "steps": 35,
          "trace": {d: r["trace"] for d, r in runs.items()}, "seconds": {d: r["seconds"] for d, r in runs.items()},
          "latent_deviation": deviation, "checks": checks, "pass": all(checks.values()),
          "bench_table": open(tmp + "/bench.txt").read().splitlines()}
json.dump(report, open(out_json, "w"), indent=1)
print("traces: cuda %s | cpu %s" % (runs["cuda"]["trace"], runs["cpu"]["trace"]))
print("final latent, cuda vs cpu (bf16 both): max|d|/max|cpu| = %.2e (bound 3e-1)" % deviation)
print("seconds: cuda %.2f, cpu %.2f" % (runs["cuda"]["seconds"], runs["cpu"]["seconds"]))
for name, ok in checks.items():
    print("  %-26s %s" % (name, "ok" if ok else "FAILED"))
sys.exit(0 if report["pass"] else 1)
EOF
