#!/usr/bin/env bash
# End-to-end checks of `stepmix generate` on the tiny golden checkpoint:
# traces, determinism, one-line errors (interrupting a run: interrupt.sh).
# $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
g=$golden

common=(--model "$g/transformer-fp8" --prompt-ids 28,93,12,50,83,45,72,55,80,64,77,94,95
        --negative-prompt-ids 17,32,40,41,23,76,94,95 --latent-shape 4,1,6,8 --guidance 3
        --scheduler-config "$g/scheduler/unipc_flowshift10.json" --flow-shift 10)

out=$("$bin" generate "${common[@]}" --steps 8 --noise "$g/trajectory/inputs.safetensors" \
      --save-latents "$tmp/a.safetensors" 2>"$tmp/err") || fail "golden run: $(cat "$tmp/err")"
grep -qx "trace: W8A16x3 / W8A8x2 / W8A16x3" <<<"$out" || fail "golden trace: $out"
grep -q "source=checkpoint reasoner=W8A16" <<<"$out" || fail "golden log line: $out"

out=$("$bin" generate "${common[@]}" --steps 35 --seed 5 --save-latents "$tmp/b.safetensors") || fail "35 steps"
grep -qx "trace: W8A16x3 / W8A8x29 / W8A16x3" <<<"$out" || fail "35-step trace: $out"
"$bin" generate "${common[@]}" --steps 35 --seed 5 --save-latents "$tmp/c.safetensors" >/dev/null || fail "rerun"
cmp -s "$tmp/b.safetensors" "$tmp/c.safetensors" || fail "same seed gave different latents"
"$bin" generate "${common[@]}" --steps 35 --seed 6 --save-latents "$tmp/d.safetensors" >/dev/null || fail "seed 6"
cmp -s "$tmp/b.safetensors" "$tmp/d.safetensors" && fail "different seeds gave the same latents"

# bf16 activations: deterministic, said in the JSON, and not the float32 bytes.
for run in f g; do
  out=$("$bin" generate "${common[@]}" --steps 35 --seed 5 --activations bf16 --json \
        --save-latents "$tmp/$run.safetensors") || fail "--activations bf16"
done
grep -q '"activations": "bf16"' <<<"$out" || fail "json activations: $out"
grep -qF '"trace": "W8A16x3 / W8A8x29 / W8A16x3"' <<<"$out" || fail "bf16 trace: $out"
cmp -s "$tmp/f.safetensors" "$tmp/g.safetensors" || fail "--activations bf16 reruns differ"
cmp -s "$tmp/b.safetensors" "$tmp/f.safetensors" && fail "--activations bf16 gave the float32 latents"
# The BF16 weight cache serves the W8A16 steps of bf16 activations: the same bytes; with float32 ones it
# would hold memory unused, refused.
"$bin" generate "${common[@]}" --steps 35 --seed 5 --activations bf16 --weight-cache all \
  --save-latents "$tmp/e.safetensors" >/dev/null || fail "weight cache all"
cmp -s "$tmp/f.safetensors" "$tmp/e.safetensors" || fail "--weight-cache all changed the result"
expect_error cache_f32 "--weight-cache all applies to the W8A16 steps of bf16 activations only, and --activations is f32" \
  generate "${common[@]}" --steps 2 --weight-cache all --save-latents "$tmp/x.safetensors"
# A run with no W8A16 step (the schedule off) leaves the cache unused: it runs and says so.
"$bin" generate "${common[@]}" --steps 2 --seed 5 --activations bf16 --weight-cache all --mixed-precision none \
  --save-latents "$tmp/x.safetensors" >/dev/null 2>"$tmp/err" || fail "cache with the schedule off: $(cat "$tmp/err")"
grep -qE "warning: --weight-cache all: no Linear of this run is W8A16 \(generation W8A8x2, reasoner W8A8\), so the [0-9.]+ (bytes|MiB|GiB) of BF16 weight copies go unused" \
  "$tmp/err" || fail "cache with the schedule off: no warning: $(cat "$tmp/err")"
"$bin" generate "${common[@]}" --steps 2 --seed 5 --activations bf16 --weight-cache all \
  --save-latents "$tmp/x.safetensors" >/dev/null 2>"$tmp/err" || fail "cache, 2 steps: $(cat "$tmp/err")"
grep -q "weight-cache" "$tmp/err" && fail "cache with W8A16 steps warned: $(cat "$tmp/err")"
rm -f "$tmp/x.safetensors"
# Diffusers' W8A16 rounding (the scale rounded to bf16 first): said in the JSON, another result than the
# default's, the same with the cache; refused where it changes nothing.
out=$("$bin" generate "${common[@]}" --steps 35 --seed 5 --activations bf16 --w8a16-rounding diffusers --json \
      --save-latents "$tmp/r.safetensors") || fail "--w8a16-rounding diffusers"
grep -q '"w8a16_rounding": "diffusers"' <<<"$out" || fail "json w8a16_rounding: $out"
cmp -s "$tmp/f.safetensors" "$tmp/r.safetensors" && fail "--w8a16-rounding diffusers changed nothing"
"$bin" generate "${common[@]}" --steps 35 --seed 5 --activations bf16 --w8a16-rounding diffusers --weight-cache all \
  --save-latents "$tmp/rc.safetensors" >/dev/null || fail "diffusers rounding with the cache"
cmp -s "$tmp/r.safetensors" "$tmp/rc.safetensors" || fail "the cache changed the diffusers rounding's result"
# BF16 latents (Diffusers' BF16 pipeline): said in the JSON, deterministic, not the float32 latent's bytes.
for run in l1 l2; do
  out=$("$bin" generate "${common[@]}" --steps 8 --seed 5 --activations bf16 --bf16-latents --json \
        --save-latents "$tmp/$run.safetensors") || fail "--bf16-latents"
done
grep -q '"bf16_latents": true' <<<"$out" || fail "json bf16_latents: $out"
cmp -s "$tmp/l1.safetensors" "$tmp/l2.safetensors" || fail "--bf16-latents reruns differ"
"$bin" generate "${common[@]}" --steps 8 --seed 5 --activations bf16 --save-latents "$tmp/l0.safetensors" >/dev/null ||
  fail "bf16 activations, 8 steps"
cmp -s "$tmp/l0.safetensors" "$tmp/l1.safetensors" && fail "--bf16-latents changed nothing"
# UniPC's flow shift is the request's mode default whenever UniPC runs, also over a FlowMatch file.
out=$("$bin" generate --model "$g/transformer-fp8" --prompt-ids 1,2 --guidance 1 --steps 2 --latent-shape 4,2,6,8 \
      --scheduler-config "$g/scheduler/flowmatch_euler_shift3.json" --scheduler unipc --json \
      --save-latents "$tmp/x.safetensors" 2>"$tmp/err") || fail "--scheduler unipc over FlowMatch: $(cat "$tmp/err")"
grep -q '"flow_shift": 10.0' <<<"$out" || fail "--scheduler unipc over FlowMatch: not the video default: $out"
grep -qF "flow_shift 10 (the video default;" "$tmp/err" || fail "--scheduler unipc over FlowMatch: no note: $(cat "$tmp/err")"
rm -f "$tmp/x.safetensors"
expect_error no_decode_without_vae "--no-decode: $g/transformer-fp8 has no vae/, so nothing would be decoded" \
  generate "${common[@]}" --steps 2 --no-decode --save-latents "$tmp/x.safetensors"
expect_error bf16_latents_f32 "--bf16-latents reproduces the Diffusers BF16 pipeline on the CPU: it needs --activations bf16" \
  generate "${common[@]}" --steps 2 --bf16-latents --save-latents "$tmp/x.safetensors"
expect_error rounding_f32 "--w8a16-rounding diffusers applies to the W8A16 steps of bf16 activations only" \
  generate "${common[@]}" --steps 2 --w8a16-rounding diffusers --save-latents "$tmp/x.safetensors"
expect_error rounding_word "--w8a16-rounding: expected single or diffusers, got 'half'" \
  generate "${common[@]}" --steps 2 --w8a16-rounding half --save-latents "$tmp/x.safetensors"
expect_error cache_no_fp8 "has no FP8 Linears (nothing runs W8A16)" generate --model "$g/transformer" \
  --prompt-ids 1,2 --latent-shape 4,1,6,8 --guidance 1 --steps 1 --activations bf16 --weight-cache all \
  --save-latents "$tmp/x.safetensors"
# Without --activations the CPU runs float32 (the GPU's default is bf16: cli.device).
out=$("$bin" generate "${common[@]}" --steps 2 --seed 5 --json --save-latents "$tmp/h.safetensors") ||
  fail "default activations"
grep -q '"activations": "f32"' <<<"$out" || fail "the CPU's default activations are not f32: $out"
# CFG in one batched forward (the default) or the two passes one after the
# other (STEPMIX_CFG_BATCH=0): the same bytes, for both activation dtypes, on
# the tiny checkpoint and on the embedded model.
STEPMIX_CFG_BATCH=0 "$bin" generate "${common[@]}" --steps 35 --seed 5 --save-latents "$tmp/b0.safetensors" \
  >/dev/null || fail "unbatched f32"
cmp -s "$tmp/b.safetensors" "$tmp/b0.safetensors" || fail "batched CFG changed the float32 latents"
STEPMIX_CFG_BATCH=0 "$bin" generate "${common[@]}" --steps 35 --seed 5 --activations bf16 \
  --save-latents "$tmp/f0.safetensors" >/dev/null || fail "unbatched bf16"
cmp -s "$tmp/f.safetensors" "$tmp/f0.safetensors" || fail "batched CFG changed the bf16 latents"
embedded=$data/../../models/fashion-cosmos3-fp8
for batch in 0 1; do
  STEPMIX_CFG_BATCH=$batch "$bin" generate --model "$embedded" --prompt "ankle boot" --steps 8 \
    --save-latents "$tmp/embedded-$batch.safetensors" >/dev/null || fail "embedded model, STEPMIX_CFG_BATCH=$batch"
done
cmp -s "$tmp/embedded-0.safetensors" "$tmp/embedded-1.safetensors" || fail "batched CFG changed the embedded model's latents"
# Where both CFG passes in one forward would not fit but one at a time does
# (this latent: about 82 and 97 MiB by the estimate), they run one at a time,
# with a note, the JSON saying so, and the same latents.
big=("${common[@]}" --latent-shape 4,4,64,64 --steps 1 --seed 2 --json)
out=$(STEPMIX_MEMORY_LIMIT_MIB=90 "$bin" generate "${big[@]}" --save-latents "$tmp/apart.safetensors" 2>"$tmp/err") ||
  fail "one pass at a time under a 90 MiB budget: $(cat "$tmp/err")"
grep -q '"cfg_batched": false' <<<"$out" || fail "cfg_batched under the budget: $out"
grep -q "note: CFG: the two passes of each step run one at a time (the same results): one forward for both needs" \
  "$tmp/err" || fail "no note on the unbatched passes: $(cat "$tmp/err")"
out=$("$bin" generate "${big[@]}" --save-latents "$tmp/together.safetensors" 2>"$tmp/err") || fail "batched big latent"
grep -q '"cfg_batched": true' <<<"$out" || fail "cfg_batched without a budget: $out"
grep -q "note: CFG" "$tmp/err" && fail "a note without a reason: $(cat "$tmp/err")"
cmp -s "$tmp/apart.safetensors" "$tmp/together.safetensors" || fail "one pass at a time changed the latents"
# Without CFG a negative prompt has no pass to go to: refused, not dropped.
expect_error negative_without_cfg "--negative-prompt-ids: guidance 1 runs no unconditional pass" generate \
  "${common[@]}" --steps 1 --guidance 1 --save-latents "$tmp/no-cfg.safetensors"
out=$("$bin" generate --model "$g/transformer-fp8" --prompt-ids 28,93,12,50,83,45,72,55,80,64,77,94,95 \
  --latent-shape 4,1,6,8 --steps 1 --guidance 1 --json --save-latents "$tmp/no-cfg.safetensors") || fail "guidance 1"
grep -q '"cfg_batched": false' <<<"$out" || fail "cfg_batched without CFG: $out"
# A request that cannot fit in memory is refused before sampling, with the estimate.
STEPMIX_MEMORY_LIMIT_MIB=1 expect_error too_large "does not fit in memory: needs" generate "${common[@]}" --steps 2
STEPMIX_MEMORY_LIMIT_MIB=0 expect_error bad_memory_limit "STEPMIX_MEMORY_LIMIT_MIB: expected a positive integer" \
  generate "${common[@]}" --steps 2
STEPMIX_CFG_BATCH=2 expect_error bad_cfg_batch "STEPMIX_CFG_BATCH: expected 0 or 1" generate "${common[@]}" --steps 2
out=$("$bin" generate "${common[@]}" --steps 4 --mixed-precision none) || fail "none"
grep -qx "trace: W8A8x4" <<<"$out" || fail "none trace: $out"
out=$("$bin" generate "${common[@]}" --steps 1) || fail "one step"
grep -qx "trace: W8A8x1" <<<"$out" || fail "one-step trace: $out"
out=$("$bin" generate "${common[@]}" --model "$g/transformer" --steps 3) || fail "bf16"
grep -qx "trace: BF16x3" <<<"$out" || fail "bf16 trace: $out"
out=$("$bin" generate "${common[@]}" --steps 6 --scheduler euler --flow-shift 3 --json) || fail "json"
grep -q '"trace": "W8A16x3 / W8A16x3"' <<<"$out" && fail "json trace should be merged runs"
grep -q '"trace": "W8A16x6"' <<<"$out" || fail "json trace: $out"
grep -q '"scheduler": "FlowMatchEulerDiscreteScheduler"' <<<"$out" || fail "json scheduler: $out"

expect_error unknown_scheduler "--scheduler: expected unipc or euler" generate "${common[@]}" --scheduler ddim
expect_error negative_steps "--steps" generate "${common[@]}" --steps -3
expect_error bad_activations "--activations: expected f32 or bf16" generate "${common[@]}" --activations fp16
expect_error bad_weight_cache "--weight-cache: expected none or all" generate "${common[@]}" --weight-cache some
expect_error missing_prompt "a prompt is required" generate --model "$g/transformer-fp8" --latent-shape 4,1,6,8
expect_error no_tokenizer "give token ids instead (--prompt-ids" generate --model "$g/transformer-fp8" --prompt "a boot" \
  --latent-shape 4,1,6,8
expect_error bad_shape "--latent-shape" generate "${common[@]}" --latent-shape 3,1,6,8
expect_error bad_ids "--prompt-ids" generate --model "$g/transformer-fp8" --prompt-ids 1,x --latent-shape 4,1,6,8
expect_error id_range "--prompt-ids: id 96 (position 1) is outside the vocabulary [0, 96)" generate \
  --model "$g/transformer-fp8" --prompt-ids 1,96 --latent-shape 4,1,6,8 --guidance 1
expect_error negative_id_range "--negative-prompt-ids: id 9999999 (position 0)" generate --model "$g/transformer-fp8" \
  --prompt-ids 1,2 --negative-prompt-ids 9999999,2 --latent-shape 4,1,6,8 --guidance 3
# Ids are held to the 4096 a tokenized prompt may have.
many_ids=$(seq -s, 4097 | sed 's/[0-9]*/1/g')
expect_error ids_too_many "--prompt-ids: 4097 token ids, more than the 4096 a Cosmos3 transformer takes" generate \
  --model "$g/transformer-fp8" --prompt-ids "$many_ids" --latent-shape 4,1,6,8 --guidance 1
expect_error negative_ids_too_many "--negative-prompt-ids: 4097 token ids" generate --model "$g/transformer-fp8" \
  --prompt-ids 1,2 --negative-prompt-ids "$many_ids" --latent-shape 4,1,6,8 --guidance 3
expect_error noise_shape "tensor 'noise' must be F32 [1, 4, 1, 4, 4]" generate "${common[@]}" --latent-shape 4,1,4,4 \
  --noise "$g/trajectory/inputs.safetensors"

# Interrupting a run (SIGINT, SIGTERM) is checked in interrupt.sh.

finish generate
