#!/usr/bin/env bash
# Hostile and careless requests: option values out of range or empty, seeds,
# non-finite inputs and weights, outputs that would clobber an input, batch
# runs, metadata, warnings and the short option names. Every refusal is exit 2
# with one stderr line naming the option or file and what was expected, and
# nothing is written. $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"

fp8=$golden/transformer-fp8
ids=(--prompt-ids 1,2,3)
small=(--latent-shape 4,1,4,4 --steps 2 --guidance 1)
x=(--out "$tmp/o/x.safetensors")
fashion=$models/fashion-cosmos3-fp8
o=$tmp/o
mkdir -p "$o"

# nothing_written NAME: the refused requests left no file behind in $o.
nothing_written() {
  [[ -z $(ls -A "$o") ]] || fail "$1: left $(ls -A "$o")"
}

# --- option values ---------------------------------------------------------
gen() { expect_rejected "generate:$1" "$2" "$3" generate --model "$fp8" "${ids[@]}" "${@:4}"; }
gen seed_negative "--seed" "expected an integer in [0, 18446744073709551615] or -1" "${small[@]}" "${x[@]}" --seed -2
gen seed_2_64 "--seed" "got '18446744073709551616'" "${small[@]}" "${x[@]}" --seed 18446744073709551616
gen seed_word "--seed" "got 'abc'" "${small[@]}" "${x[@]}" --seed abc
gen system_both "" "excludes" "${small[@]}" "${x[@]}" --system-prompt --no-system-prompt
gen seed_empty "--seed" "empty value" "${small[@]}" "${x[@]}" --seed=
gen steps_empty "--steps" "empty value" --latent-shape 4,1,4,4 "${x[@]}" --steps ''
gen guidance_empty "--guidance" "empty value" --latent-shape 4,1,4,4 --steps 2 --guidance=
gen guidance_nan "--guidance" "expected a finite number in [0, 100], got nan" --latent-shape 4,1,4,4 "${x[@]}" --steps 2 --guidance nan
gen guidance_inf "--guidance" "got inf" --latent-shape 4,1,4,4 "${x[@]}" --steps 2 --guidance inf
gen guidance_1e400 "--guidance" "got inf" --latent-shape 4,1,4,4 "${x[@]}" --steps 2 --guidance 1e400
gen guidance_negative "--guidance" "got -1" --latent-shape 4,1,4,4 "${x[@]}" --steps 2 --guidance -1
gen steps_1e9 "--steps" "expected an integer in [1, 10000], got 1000000000" --latent-shape 4,1,4,4 "${x[@]}" --steps 1000000000
gen height_huge "--height" "expected an integer in [1, 16384], got 16400" --steps 2 --height 16400 --width 16 "${x[@]}"
gen flow_shift_nan "--flow-shift" "got nan" "${small[@]}" "${x[@]}" --flow-shift nan
gen flow_shift_tiny "--flow-shift" "expected a number in [0.01, 1000], got 1e-07" "${small[@]}" "${x[@]}" --flow-shift 1e-7
gen threads_zero "--threads" "" "${small[@]}" "${x[@]}" -t 0
gen fps_image "--fps" "an image (--frames 1) has no frame rate" "${small[@]}" "${x[@]}" --fps 30
nothing_written "option values"
expect_rejected inspect_steps_huge "--steps" "expected an integer in [1, 10000], got 100000000" inspect "$fp8" --steps 100000000
expect_rejected unknown_command "'generat'" "unknown command" generat --model "$fp8"
# A parse error points at the help of the command it is about.
expect_rejected missing_model "--model is required" "(see stepmix generate --help)" generate -p boot
expect_rejected missing_latent "--latent is required" "(see stepmix vae decode --help)" vae decode --vae "$fp8"
expect_rejected unknown_option "--sed" "" generate --model "$fp8" "${ids[@]}" --sed 3

# --- non-finite inputs and weights ------------------------------------------
/usr/bin/python3 - "$fp8" "$tmp" <<'PY' || { echo "FAIL: could not build the inputs"; exit 1; }
import json, os, shutil, struct, sys
fp8, tmp = sys.argv[1], sys.argv[2]
ST = "diffusion_pytorch_model.safetensors"

def write_st(path, tensors):  # name -> (dtype, shape, bytes)
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

vals = [0.5] * 64
vals[17] = float("nan")
write_st(os.path.join(tmp, "nan_noise.safetensors"), {"noise": ("F32", [1, 4, 1, 4, 4], struct.pack("<64f", *vals))})

# One FP8 code of one governed weight set to 0x7F, E4M3's NaN.
dst = os.path.join(tmp, "nan_weight")
shutil.copytree(fp8, dst)
raw = bytearray(open(os.path.join(dst, ST), "rb").read())
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
# Layer 0: the last layer's text-tower MLP feeds nothing the vision rows read.
name = "layers.0.mlp.down_proj.weight"
assert header[name]["dtype"] == "F8_E4M3", header[name]
raw[8 + n + header[name]["data_offsets"][0] + 5] = 0x7F
open(os.path.join(dst, ST), "wb").write(raw)
PY
expect_rejected noise_nan "$tmp/nan_noise.safetensors: tensor 'noise'" "non-finite value at element 17" \
  generate --model "$fp8" "${ids[@]}" "${small[@]}" --noise "$tmp/nan_noise.safetensors" --out $o/x.safetensors
nothing_written noise_nan
# Without the scan the NaN surfaces in the first velocity: the error names the
# step, the precision and the first tensor that went non-finite.
expect_rejected weight_nan_step "step 1 of 2" "non-finite" \
  generate --model "$tmp/nan_weight" "${ids[@]}" "${small[@]}" --out $o/x.safetensors
grep -qF "und_hidden.0" "$tmp/err" || fail "weight_nan_step: the error does not name the first non-finite tensor: $(cat "$tmp/err")"
nothing_written weight_nan_step
expect_rejected weight_nan_scan "tensor 'layers.0.mlp.down_proj.weight'" "NaN" \
  generate --model "$tmp/nan_weight" "${ids[@]}" "${small[@]}" --check-tensors --out $o/x.safetensors
expect_rejected weight_nan_inspect "tensor 'layers.0.mlp.down_proj.weight'" "NaN" inspect "$tmp/nan_weight"
expect_rejected quantize_guidance_nan "--guidance" "got nan" quantize --model "$models/fashion-cosmos3-bf16" \
  --out $o/q --steps 2 --guidance nan
expect_rejected compare_guidance_nan "--guidance" "got nan" compare --model "$fashion" --prompts \
  "$fashion/compare_prompts.txt" --seeds 1 --steps 2 --guidance nan --out $o/c
nothing_written "quantize/compare"

# --- inputs that are no text files ------------------------------------------
expect_rejected calib_dev_zero "/dev/zero" "not a regular file" quantize --model "$models/fashion-cosmos3-bf16" \
  --out $o/q --calib-prompts /dev/zero
mkfifo "$tmp/prompts.fifo"
expect_rejected calib_fifo "$tmp/prompts.fifo" "not a regular file" quantize --model "$models/fashion-cosmos3-bf16" \
  --out $o/q --calib-prompts "$tmp/prompts.fifo"
expect_rejected compare_fifo "$tmp/prompts.fifo" "not a regular file" compare --model "$fashion" \
  --prompts "$tmp/prompts.fifo" --seeds 1 --out $o/c
nothing_written "text inputs"

# --- outputs ------------------------------------------------------------------
gen out_jpg "--out $o/x.jpg" "extension '.jpg' is not supported here" "${small[@]}" --out $o/x.jpg
gen latents_png "--save-latents $o/l.png" "expected .safetensors" "${small[@]}" --save-latents $o/l.png
gen same_file "--save-latents $o/x.safetensors" "names the same file as --out" "${small[@]}" "${x[@]}" \
  --save-latents $o/x.safetensors
cp "$golden/trajectory/inputs.safetensors" "$tmp/noise_copy.safetensors" 2>/dev/null || true
if [[ -f "$tmp/noise_copy.safetensors" ]]; then
  before=$(sha256sum "$tmp/noise_copy.safetensors")
  expect_rejected out_is_input "$tmp/noise_copy.safetensors" "input" generate --model "$fp8" "${ids[@]}" \
    --latent-shape 4,1,6,8 --steps 2 --guidance 1 --noise "$tmp/noise_copy.safetensors" --out "$tmp/noise_copy.safetensors"
  [[ $(sha256sum "$tmp/noise_copy.safetensors") == "$before" ]] || fail "out_is_input: the noise file changed"
fi
gen batch_no_pattern "--out" "%d" "${small[@]}" "${x[@]}" --batch-count 3
gen batch_seed_wraps "--seed" "18446744073709551615" "${small[@]}" --batch-count 2 --seed 18446744073709551615 \
  --out "$o/w%d.safetensors"

# No command writes over a file of the model it reads (its config, shards,
# VAE) or over its own input: copies, so that a failed check destroys nothing.
cp -r "$fp8" "$tmp/fp8_copy"
cp -r "$data/golden/wan22-vae-tiny/vae" "$tmp/vae_copy"
cp "$golden/forward/image.safetensors" "$tmp/case_copy.safetensors"
snapshot() { find "$tmp/fp8_copy" "$tmp/vae_copy" "$tmp/case_copy.safetensors" -type f -exec sha256sum {} + | sort; }
before=$(snapshot)
expect_rejected forward_over_inputs "$tmp/case_copy.safetensors" "is the same file as the input --inputs" \
  forward --model "$tmp/fp8_copy" --inputs "$tmp/case_copy.safetensors" --out "$tmp/case_copy.safetensors"
expect_rejected forward_over_weights "$tmp/fp8_copy/diffusion_pytorch_model.safetensors" "a weights or config file of the input --model" \
  forward --model "$tmp/fp8_copy" --inputs "$tmp/case_copy.safetensors" --out "$tmp/fp8_copy/diffusion_pytorch_model.safetensors"
expect_rejected forward_png "--out $o/f.png" "expected .safetensors" forward --model "$tmp/fp8_copy" \
  --inputs "$tmp/case_copy.safetensors" --out "$o/f.png"
expect_rejected generate_over_config "$tmp/fp8_copy/config.json" "a weights or config file of the input --model" generate \
  --model "$tmp/fp8_copy" "${ids[@]}" "${small[@]}" --out "$o/x.safetensors" --save-latents "$tmp/fp8_copy/config.json"
expect_rejected bench_over_config "--json $tmp/fp8_copy/config.json" "a weights or config file of the input --model" bench \
  --model "$tmp/fp8_copy" "${ids[@]}" --latent-shape 4,1,4,4 --steps 2 --no-peer --json "$tmp/fp8_copy/config.json"
expect_rejected vae_encode_over_weights "$tmp/vae_copy/diffusion_pytorch_model.safetensors" \
  "a weights or config file of the input --vae" vae encode --vae "$tmp/vae_copy" \
  --pixels "$data/golden/wan22-vae-tiny/encode/image.safetensors" --out "$tmp/vae_copy/diffusion_pytorch_model.safetensors"
expect_rejected vae_decode_over_weights "$tmp/vae_copy/diffusion_pytorch_model.safetensors" \
  "a weights or config file of the input --vae" vae decode --vae "$tmp/vae_copy" \
  --latent "$data/golden/wan22-vae-tiny/decode/image.safetensors" --out "$tmp/vae_copy/diffusion_pytorch_model.safetensors"
# A component folder that is a link (the VAE of tests/data/vae-model is one)
# is followed; a file stepmix does not read (a preview PNG) stays replaceable.
mkdir -p "$tmp/linked_model"
cp -r "$data/vae-model/transformer" "$tmp/linked_model/transformer"
ln -s "$tmp/vae_copy" "$tmp/linked_model/vae"
expect_rejected linked_vae_weights "$tmp/linked_model/vae/diffusion_pytorch_model.safetensors" \
  "a weights or config file of the input --model $tmp/linked_model" generate --model "$tmp/linked_model" \
  --prompt-ids 5,9,13 --guidance 1 --steps 1 -H 32 -W 32 --no-decode \
  --save-latents "$tmp/linked_model/vae/diffusion_pytorch_model.safetensors"
# Nor does it add a file the model's loaders would read (a second
# .safetensors beside the weights would be loaded with them).
expect_rejected new_file_beside_weights "$tmp/fp8_copy/latent.safetensors" "whose *.safetensors the loaders of the input" \
  generate --model "$tmp/fp8_copy" "${ids[@]}" "${small[@]}" --save-latents "$tmp/fp8_copy/latent.safetensors"
expect_rejected vae_decode_beside_weights "$tmp/vae_copy/pixels.safetensors" "whose *.safetensors the loaders of the input" \
  vae decode --vae "$tmp/vae_copy" --latent "$data/golden/wan22-vae-tiny/decode/image.safetensors" \
  --out "$tmp/vae_copy/pixels.safetensors"
[[ $(snapshot) == "$before" ]] || fail "an output check let a model or input file change"
cp -r "$fashion" "$tmp/fashion_copy"
for run in 1 2; do
  expect_ok "preview_in_model_folder_$run" "image: $tmp/fashion_copy/preview.png" generate -m "$tmp/fashion_copy" \
    -p "a boot" --steps 2 -o "$tmp/fashion_copy/preview.png"
done
nothing_written outputs

# --- what runs ----------------------------------------------------------------
expect_ok short_names "image: $o/boot.png" generate -m "$fashion" -p "a boot" -s 7 -W 28 -H 28 --steps 3 -o $o/boot.png
expect_ok png_metadata "Seed: 7" inspect --image $o/boot.png
meta=$("$bin" inspect --image "$o/boot.png")
grep -qF "a boot" <<<"$meta" || fail "png_metadata: the prompt is not in the PNG's parameters: $meta"

out=$("$bin" generate -m "$fashion" -p "a boot" -s 40 --steps 3 -b 3 -o "$o/b%d.png" --json 2>"$tmp/err")
checks=$((checks + 1))
for i in 0 1 2; do
  [[ -f $o/b$i.png ]] || fail "batch: $o/b$i.png missing"
  grep -qF "Seed: $((40 + i))" <<<"$("$bin" inspect --image "$o/b$i.png")" || fail "batch: $o/b$i.png lacks seed $((40 + i))"
done
cmp -s $o/b0.png $o/b1.png && fail "batch: two seeds gave the same picture"
[[ $(grep -o '"seed"' <<<"$out" | wc -l) -eq 3 ]] || fail "batch --json: expected three objects: $out"

checks=$((checks + 1))
"$bin" generate -m "$fashion" -p "a boot" --steps 2 -s -1 --json -o $o/r.png >"$tmp/json.txt" 2>/dev/null ||
  fail "random seed: exit $?"
seed=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seed"])' "$tmp/json.txt")
grep -qF "Seed: $seed" <<<"$("$bin" inspect --image $o/r.png)" || fail "random seed $seed is not the one recorded"

expect_ok unknown_word "trace:" generate -m "$fashion" -p "a bot" --steps 2 -o $o/w.png
grep -qF 'prompt word "bot" is not in the vocabulary' "$tmp/err" || fail "unknown_word: no warning: $(cat "$tmp/err")"
grep -qF 'nearest: boot' "$tmp/err" || fail "unknown_word: no suggestion: $(cat "$tmp/err")"
# A long word, or one with control characters, is quoted as one harmless line.
long_word=$(printf 'x%.0s' {1..5000})
expect_ok long_unknown_word "trace:" generate -m "$fashion" -p "a $long_word"$'\x1b[31m' --steps 2 -o $o/w.png
grep -qF "prompt word \"$(printf 'x%.0s' {1..80})...\" (5005 bytes) is not in the vocabulary" "$tmp/err" &&
  ! grep -qF "nearest:" "$tmp/err" ||
  fail "long_unknown_word: $(head -c 300 "$tmp/err")"
[[ $(wc -l <"$tmp/err") -le 2 && $(wc -c <"$tmp/err") -lt 1000 ]] || fail "long_unknown_word: $(wc -c <"$tmp/err") bytes of stderr"
expect_ok escape_in_word "trace:" generate -m "$fashion" -p "a bo"$'\x1b[2J'"ot" --steps 2 -o $o/w.png
grep -qF 'prompt word "bo\u001b[2jot" is not in the vocabulary' "$tmp/err" && ! grep -q $'\x1b' "$tmp/err" ||
  fail "escape_in_word: $(cat -v "$tmp/err")"

# Prompt ids without a negative: a checkpoint without a tokenizer still runs CFG.
expect_ok ids_without_negative "trace:" generate --model "$fp8" --prompt-ids 28,93,12,50 --latent-shape 4,1,4,4 \
  --steps 2 --guidance 3 --out $o/n.safetensors

# Calibration prompts as ids on a model without a tokenizer: the
# unconditional prefix must be given too (quantize has no prompt to take it from).
mkdir -p "$tmp/qmodel" && cp -r "$golden/transformer" "$tmp/qmodel/transformer"
printf 'ids:28,93,12,50\n' >"$tmp/qprompts.txt"
expect_rejected quantize_no_tokenizer "$tmp/qmodel" "--negative-prompt-ids" quantize --model "$tmp/qmodel" \
  --calib-prompts "$tmp/qprompts.txt" --latent-shape 4,1,4,4 --steps 2 --out "$o/q"
[[ -e $o/q ]] && fail "quantize_no_tokenizer: wrote $o/q"
printf 'ids:28,93\nids:28,999\n' >"$tmp/qprompts_range.txt"
expect_rejected quantize_id_range "$tmp/qprompts_range.txt: prompt 2: id 999" "outside the vocabulary [0, 96)" quantize \
  --model "$tmp/qmodel" --calib-prompts "$tmp/qprompts_range.txt" --negative-prompt-ids 17,94,95 \
  --latent-shape 4,1,4,4 --steps 2 --out "$o/q"

expect_rejected quantize_negative_ids "--negative-prompt-ids: id 999 (position 0)" "outside the vocabulary [0, 96)" \
  quantize --model "$tmp/qmodel" --calib-prompts "$tmp/qprompts.txt" --negative-prompt-ids 999,94,95 \
  --latent-shape 4,1,4,4 --steps 2 --out "$o/q"
# A bare transformer folder, or an FP8 model, is refused for what it is before
# the prompts or the tokenizer are asked for.
expect_rejected quantize_bare_transformer "$tmp/qmodel/transformer" "expected a Diffusers model directory" \
  quantize --model "$tmp/qmodel/transformer" --out "$o/q"
expect_rejected quantize_fp8 "quantization_config" "the model is already quantized" \
  quantize --model "$models/fashion-cosmos3-fp8" --out "$o/q"

# A config warning is printed once (it used to come twice from a run).
cp -r "$fashion" "$tmp/warn_model"
/usr/bin/python3 - "$tmp/warn_model/transformer/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["future_knob"] = 1
json.dump(c, open(sys.argv[1], "w"))
PY
expect_ok warning_once "trace:" generate -m "$tmp/warn_model" -p "a boot" --steps 2 -o $o/warn.png
[[ $(grep -c 'future_knob: unknown key' "$tmp/err") -eq 1 ]] || fail "warning_once: $(cat "$tmp/err")"

# Numbers are decimal: CLI11 alone reads 010 as 8 and 0x10 as 16.
gen steps_octal "--steps" "expected a decimal integer, got '010'" "${small[@]}" "${x[@]}" --steps 010
gen height_hex "--height" "expected a decimal integer, got '0x1c'" --steps 2 -H 0x1c -W 28 "${x[@]}"
gen guidance_hex "--guidance" "expected a decimal number, got '0x1p1'" "${small[@]}" "${x[@]}" --guidance 0x1p1

# A JSON answer carries a path that is not UTF-8 (replaced), after the run.
expect_ok non_utf8_path '"trace"' generate -m "$fashion" -p "a boot" --steps 2 -o "$o/j"$'\xff'".png" --json

# Threads change the speed, never the bits.
expect_ok threads_1 "trace:" generate -m "$fashion" -p "a boot" --steps 3 -t 1 -o $o/t1.png
expect_ok threads_2 "trace:" generate -m "$fashion" -p "a boot" --steps 3 -t 2 -o $o/t2.png
cmp -s $o/t1.png $o/t2.png || fail "threads: -t 1 and -t 2 wrote different pictures"

# Pipeline scheduler settings of model_index.json and scheduler_config.json.
/usr/bin/python3 - "$fashion" "$tmp" <<'PY' || fail "could not build the scheduler cases"
import json, os, shutil, sys
src, tmp = sys.argv[1], sys.argv[2]
for name, edit in (("native", lambda idx, sch: idx.update(use_native_flow_schedule=True)),
                   ("native_bad", lambda idx, sch: idx.update(use_native_flow_schedule="yes")),
                   ("karras", lambda idx, sch: sch.update(use_karras_sigmas=True, flow_shift=3.0))):
    dst = os.path.join(tmp, name)
    shutil.copytree(src, dst)
    idx_path, sch_path = os.path.join(dst, "model_index.json"), os.path.join(dst, "scheduler", "scheduler_config.json")
    idx, sch = json.load(open(idx_path)), json.load(open(sch_path))
    edit(idx, sch)
    json.dump(idx, open(idx_path, "w"))
    json.dump(sch, open(sch_path, "w"))
PY
expect_ok native_grid "trace:" generate -m "$tmp/native" -p boot -o "$o/native.png" --save-latents "$o/native.safetensors"
grep -qF "UniPC on the native flow grid" "$tmp/err" || fail "native_grid: no note: $(cat "$tmp/err")"
expect_ok default_grid "trace:" generate -m "$fashion" -p boot -o "$o/default.png" --save-latents "$o/default.safetensors"
cmp -s "$o/native.safetensors" "$o/default.safetensors" && fail "native_grid: the same latent as the default grid"
expect_rejected native_not_bool "$tmp/native_bad/model_index.json: use_native_flow_schedule" "expected true or false" \
  generate -m "$tmp/native_bad" -p boot -o "$o/x.png"
expect_rejected native_euler "$tmp/native/model_index.json: use_native_flow_schedule true" \
  "scheduler is FlowMatchEulerDiscreteScheduler (--scheduler euler)" \
  generate -m "$tmp/native" -p boot --scheduler euler -o "$o/x.png"
# A distilled build: FlowMatch Euler with a fixed sigma list, drawing fresh noise every step from the
# seed's generator (one seed, one run).
mkdir -p "$tmp/distilled"
cp -r "$fashion/." "$tmp/distilled/"
cat >"$tmp/distilled/scheduler/scheduler_config.json" <<'JSON'
{"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0,
 "stochastic_sampling": true, "use_karras_sigmas": false, "fixed_step_requires_explicit_sigmas": true,
 "fixed_step_sampler_config": {"sample_type": "sde", "t_list": [1.0, 0.9375, 0.8333333333333334, 0.625]}}
JSON
for run in a b; do
  expect_ok "distilled_$run" "trace: W8A16x4" generate -m "$tmp/distilled" -p boot --steps 4 -s 3 -o "$o/d$run.png" \
    --save-latents "$o/d$run.safetensors"
done
expect_ok distilled_seed "trace:" generate -m "$tmp/distilled" -p boot --steps 4 -s 4 -o "$o/dc.png" \
  --save-latents "$o/dc.safetensors"
cmp -s "$o/da.safetensors" "$o/db.safetensors" || fail "distilled: the same seed gave different latents"
cmp -s "$o/da.safetensors" "$o/dc.safetensors" && fail "distilled: two seeds gave the same latent"
expect_rejected distilled_steps "--steps" "distilled build's scheduler (fixed_step_sampler_config), which samples its 4 fixed sigmas: expected 4, got 8" \
  generate -m "$tmp/distilled" -p boot --steps 8 -o "$o/x.png"
[[ -e $o/x.png ]] && fail "distilled_steps: wrote $o/x.png"
# Its steps and guidance are fixed (4, and 1: the guidance is in the weights, one pass per step), whatever the
# model's defaults say (8 steps, guidance 3 here); a negative prompt is ignored with a warning.
out=$("$bin" generate -m "$tmp/distilled" -p boot -s 3 --json --save-latents "$o/dd.safetensors" 2>"$tmp/err") ||
  fail "distilled defaults: $(cat "$tmp/err")"
grep -q '"steps": 4' <<<"$out" && grep -q '"guidance": 1.0' <<<"$out" && grep -q '"transformer_calls": 4' <<<"$out" ||
  fail "distilled defaults: $out"
cmp -s "$o/da.safetensors" "$o/dd.safetensors" || fail "distilled: --steps 4 and the default differ"
expect_rejected distilled_guidance "--guidance" "whose guidance is in the weights: expected 1, got 3" \
  generate -m "$tmp/distilled" -p boot --guidance 3 -o "$o/x.png"
# inspect plans what generate runs there.
expect_ok distilled_inspect "trace: W8A16x4" inspect "$tmp/distilled"
expect_rejected distilled_inspect_steps "--steps" "which samples its 4 fixed sigmas: expected 4, got 8" \
  inspect "$tmp/distilled" --steps 8
# bench says the negative prompt is ignored; quantize ignores it too, with the same warning.
expect_ok distilled_bench "bench:" bench -m "$tmp/distilled" -p boot -n sandal --no-peer --repeat 1 --warmup 0
grep -qF "warning: the negative prompt is ignored:" "$tmp/err" || fail "distilled_bench: no warning: $(cat "$tmp/err")"
mkdir -p "$tmp/distilled_bf16"
cp -r "$models/fashion-cosmos3-bf16/." "$tmp/distilled_bf16/"
cp "$tmp/distilled/scheduler/scheduler_config.json" "$tmp/distilled_bf16/scheduler/scheduler_config.json"
expect_ok distilled_quantize "x 1 seeds x 4 steps" quantize -m "$tmp/distilled_bf16" -o "$o/dq" -n sandal --calib-seeds 1
grep -qF "warning: the negative prompt is ignored:" "$tmp/err" || fail "distilled_quantize: no warning: $(cat "$tmp/err")"
expect_ok distilled_negative "trace:" generate -m "$tmp/distilled" -p boot -n sandal -s 3 --save-latents "$o/dn.safetensors"
grep -qF "warning: the negative prompt is ignored:" "$tmp/err" || fail "distilled_negative: no warning: $(cat "$tmp/err")"
cmp -s "$o/da.safetensors" "$o/dn.safetensors" || fail "distilled: the ignored negative prompt changed the latent"

# A checkpoint file asking for Karras sigmas with a shift runs as the pipeline does: Karras off, said.
expect_ok karras_off "trace:" generate -m "$tmp/karras" -p boot -o "$o/karras.png"
grep -qF "use_karras_sigmas true is turned off" "$tmp/err" || fail "karras_off: no note: $(cat "$tmp/err")"
# --karras-sigmas keeps the checkpoint file's Karras grid, as Diffusers' pipeline samples it when called on
# the checkpoint's own scheduler (the golden checkpoint_default.n8 timesteps); a shift beside it, in the
# file or the request, does nothing there and is refused, as is a file without Karras sigmas.
mkdir -p "$tmp/karras_file"
cp -r "$fashion/." "$tmp/karras_file/"
cp "$golden/scheduler/unipc_checkpoint_default.json" "$tmp/karras_file/scheduler/scheduler_config.json"
checks=$((checks + 1))
kept=$(timeout "$STEPMIX_TEST_TIMEOUT" "$bin" generate -m "$tmp/karras_file" -p boot --steps 8 --karras-sigmas \
  --save-latents "$o/karras_kept.safetensors" --json 2>"$tmp/err" | tr -d ' \n')
grep -qF '"karras_sigmas":true' <<<"$kept" &&
  grep -qF '"timesteps":[995.0,990.0,979.0,954.0,890.0,729.0,422.0,128.0]' <<<"$kept" ||
  fail "karras_kept: not the Karras grid: $(head -c 600 <<<"$kept") $(head -c 300 "$tmp/err")"
expect_rejected karras_kept_request_shift "[scheduler]" "flow_shift 3.000000 with Karras sigmas" generate \
  -m "$tmp/karras_file" -p boot --steps 8 --karras-sigmas --flow-shift 3 --save-latents "$o/k.safetensors"
expect_rejected karras_kept_file_shift "[scheduler]" "with Karras sigmas" generate -m "$tmp/karras" -p boot \
  --karras-sigmas --save-latents "$o/k.safetensors"
expect_rejected karras_kept_none "--karras-sigmas" "asks for no Karras sigmas under UniPC" generate -m "$fashion" \
  -p boot --karras-sigmas --save-latents "$o/k.safetensors"
rm -f "$o/karras_kept.safetensors"

# The progress bar (drawn only on a terminal: util-linux's script gives one).
if command -v script >/dev/null; then
  checks=$((checks + 1))
  bar=$(script -qc "'$bin' generate -m '$fashion' -p boot --steps 4 -o '$o/bar.png'" /dev/null | tr '\r' '\n')
  grep -qF "step 1/4  0.00 it/s  ETA --" <<<"$bar" || fail "progress: no 'ETA --' before the first step: $bar"
  grep -qF "[##############################] step 4/4" <<<"$bar" || fail "progress: not full at the end: $bar"
  plan_line=$(grep -n "^mixed_precision" <<<"$bar" | head -1 | cut -d: -f1)
  first_bar=$(grep -n "step 1/4" <<<"$bar" | head -1 | cut -d: -f1)
  [[ -n $plan_line && -n $first_bar && $plan_line -lt $first_bar ]] || fail "progress: the plan line is not printed before sampling: $bar"
fi

finish requests
