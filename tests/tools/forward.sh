#!/usr/bin/env bash
# End-to-end checks of `stepmix forward`: the velocity of every golden
# forward case (dense and W8A16 within the golden README §9 bounds), the
# --dump-hidden tensor names, and one-line errors with exit code 2 for
# precisions the checkpoint cannot run. $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"

# check_case CASE MODEL PRECISION GOLDEN_TENSOR BOUND [EXTRA ARGS...]
check_case() {
  local name=$1 model=$2 precision=$3 tensor=$4 bound=$5
  shift 5
  local out=$tmp/$name.$precision.safetensors
  if ! "$bin" forward --model "$model" --inputs "$golden/forward/$name.safetensors" --out "$out" \
      --precision "$precision" "$@" >"$tmp/stdout" 2>"$tmp/stderr"; then
    fail "$name $precision: exit $? ($(cat "$tmp/stderr"))"
    return
  fi
  floats "$out" velocity >"$tmp/actual" || { fail "$name $precision: no velocity in output"; return; }
  floats "$golden/forward/$name.safetensors" "$tensor" >"$tmp/expected"
  [[ $(wc -l <"$tmp/actual") -eq $(wc -l <"$tmp/expected") ]] || { fail "$name $precision: size differs"; return; }
  local d
  d=$(deviation "$tmp/actual" "$tmp/expected")
  awk -v d="$d" -v b="$bound" 'BEGIN { exit !(d != "nan" && d + 0 <= b + 0) }' ||
    fail "$name $precision: velocity deviation $d exceeds $bound"
}

for name in image video odd cond; do
  check_case "$name" "$golden/transformer" dense velocity 5e-6
  check_case "$name" "$golden/transformer-fp8" w8a16 velocity_w8a16 2e-6
  check_case "$name" "$golden/transformer-fp8" w8a8 velocity_w8a8 1e-1
done

# --activations bf16: every Linear on bf16 activations. The float32 goldens are
# then ~2^-8-relative away at each rounding; bounds as in
# tests/model/forward_bf16_test.cpp (measured 5.8e-3 dense, 6.6e-3 W8A16,
# 5.9e-2 W8A8 free running, where a bf16 difference moves activation codes).
for name in image video; do
  check_case "$name" "$golden/transformer" dense velocity 5e-2 --activations bf16
  check_case "$name" "$golden/transformer-fp8" w8a16 velocity_w8a16 5e-2 --activations bf16
  check_case "$name" "$golden/transformer-fp8" w8a8 velocity_w8a8 2e-1 --activations bf16
done
# ... and they really are bf16: the result differs from the float32 run.
"$bin" forward --model "$golden/transformer" --inputs "$golden/forward/image.safetensors" \
  --out "$tmp/f32.safetensors" --precision dense >/dev/null 2>&1 &&
  "$bin" forward --model "$golden/transformer" --inputs "$golden/forward/image.safetensors" \
    --out "$tmp/bf16.safetensors" --precision dense --activations bf16 >/dev/null 2>&1 ||
  fail "--activations f32/bf16 runs failed"
cmp -s "$tmp/f32.safetensors" "$tmp/bf16.safetensors" && fail "--activations bf16 gave the float32 bytes"
# A later occurrence of an option wins, as in every command.
"$bin" forward --model "$tmp/none" --model "$golden/transformer" --inputs "$golden/forward/image.safetensors" \
  --out "$tmp/again.safetensors" --precision w8a8 --precision dense >/dev/null 2>"$tmp/err" ||
  fail "repeated options: $(cat "$tmp/err")"
cmp -s "$tmp/f32.safetensors" "$tmp/again.safetensors" || fail "repeated options: not the last ones' result"
expect_error bad-activations "--activations: expected f32 or bf16, got 'f16'" \
  forward --model "$golden/transformer" --inputs "$golden/forward/image.safetensors" --out "$tmp/x.safetensors" \
  --activations f16

# --dump-hidden writes the golden names.
if "$bin" forward --model "$golden/transformer" --inputs "$golden/forward/video.safetensors" \
    --out "$tmp/dump.safetensors" --dump-hidden >/dev/null 2>"$tmp/stderr"; then
  for tensor in velocity und_hidden.0 und_hidden.1 gen_hidden.0 gen_hidden.1 gen_embed und_embed timestep_embed \
      rope.cos rope.sin gen_final_norm packed_pred; do
    header "$tmp/dump.safetensors" | grep -qF "\"$tensor\":" || fail "--dump-hidden: no $tensor"
  done
else
  fail "--dump-hidden: exit $? ($(cat "$tmp/stderr"))"
fi

case_file=$golden/forward/image.safetensors
expect_error dense-on-fp8 "point --model at the BF16 checkpoint" \
  forward --model "$golden/transformer-fp8" --inputs "$case_file" --out "$tmp/x.safetensors" --precision dense
expect_error w8a16-on-bf16 "BF16 checkpoint without FP8 Linears" \
  forward --model "$golden/transformer" --inputs "$case_file" --out "$tmp/x.safetensors" --precision w8a16
expect_error w8a8-on-bf16 "use --precision dense" \
  forward --model "$golden/transformer" --inputs "$case_file" --out "$tmp/x.safetensors" --precision w8a8
expect_error unknown-precision "fp4" \
  forward --model "$golden/transformer" --inputs "$case_file" --out "$tmp/x.safetensors" --precision fp4
expect_error missing-inputs "cannot open" \
  forward --model "$golden/transformer" --inputs "$tmp/none.safetensors" --out "$tmp/x.safetensors"
expect_error not-inputs "missing tensor 'input_ids'" \
  forward --model "$golden/transformer" --inputs "$golden/fp8/e4m3_vectors.safetensors" --out "$tmp/x.safetensors"

# Non-finite inputs are refused by name; a non-finite result (here from a NaN
# norm weight, which only --check-tensors scans for) is never written.
/usr/bin/python3 - "$case_file" "$golden/transformer" "$tmp" <<'PY' || fail "could not build the non-finite cases"
import json, shutil, struct, sys
case, model, tmp = sys.argv[1:4]

def poison(src, dst, name, index):
    data = bytearray(open(src, "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    entry = json.loads(data[8:8 + n])[name]
    width = {"F32": 4, "BF16": 2}[entry["dtype"]]
    at = 8 + n + entry["data_offsets"][0] + index * width
    data[at:at + width] = b"\x00\x00\xc0\x7f"[-width:]  # a quiet NaN, little-endian
    open(dst, "wb").write(bytes(data))

poison(case, tmp + "/nan_latent.safetensors", "vision_latent", 5)
poison(case, tmp + "/nan_positions.safetensors", "position_ids", 0)
shutil.copytree(model, tmp + "/nan_model")
st = tmp + "/nan_model/diffusion_pytorch_model.safetensors"
poison(st, st, "norm_moe_gen.weight", 0)
PY
expect_rejected nan-latent "$tmp/nan_latent.safetensors: tensor 'vision_latent'" "non-finite value at element 5" \
  forward --model "$golden/transformer" --inputs "$tmp/nan_latent.safetensors" --out "$tmp/x.safetensors"
expect_rejected nan-positions "tensor 'position_ids'" "non-finite value at element 0" \
  forward --model "$golden/transformer" --inputs "$tmp/nan_positions.safetensors" --out "$tmp/x.safetensors"
expect_rejected nan-result "made tensor 'velocity' non-finite" "nothing was written" \
  forward --model "$tmp/nan_model" --inputs "$case_file" --out "$tmp/x.safetensors"
[[ ! -e $tmp/x.safetensors ]] || fail "a failed run left an output file"

finish forward
