#!/usr/bin/env bash
# End-to-end checks of `stepmix inspect`: traces, JSON, exit codes and
# one-line errors. $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
fp8=$golden/transformer-fp8
bf16=$golden/transformer

# A copy of the FP8 transformer folder whose config.json is edited by a python snippet.
edited_copy() {
  local dest=$tmp/$1 snippet=$2
  mkdir -p "$dest"
  cp "$fp8/diffusion_pytorch_model.safetensors" "$dest/"
  /usr/bin/python3 - "$fp8/config.json" "$dest/config.json" <<PY
import json, sys
c = json.load(open(sys.argv[1]))
p = c["quantization_config"]["runtime"]["diffusion_step_policy"] if c["quantization_config"].get("runtime") else None
q = c["quantization_config"]
$snippet
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
  echo "$dest"
}

expect_ok trace35 "trace: W8A16x3 / W8A8x29 / W8A16x3" inspect "$fp8" --steps 35
expect_ok default_steps "trace: W8A16x3 / W8A8x29 / W8A16x3" inspect "$fp8"
expect_ok model_option "trace: W8A16x3 / W8A8x29 / W8A16x3" inspect -m "$fp8"
expect_ok trace50 "trace: W8A16x3 / W8A8x44 / W8A16x3" inspect "$fp8" --steps 50
expect_ok source "source=checkpoint reasoner=W8A16" inspect "$fp8"
expect_ok one_step "trace: W8A8x1" inspect "$fp8" --steps 1
# The noruntime golden holds only config.json; its weights are transformer-fp8's.
mkdir -p "$tmp/noruntime"
cp "$data/golden/cosmos3-tiny/transformer-fp8-noruntime/config.json" "$tmp/noruntime/"
ln -s "$(cd "$fp8" && pwd)/diffusion_pytorch_model.safetensors" "$tmp/noruntime/"
expect_ok noruntime "trace: W8A8x35" inspect "$tmp/noruntime"
expect_ok noruntime_source "source=no-policy" inspect "$tmp/noruntime"
expect_error noruntime_override "" inspect "$tmp/noruntime" --first-steps 2
expect_ok noruntime_forced "trace: W8A16x3 / W8A8x29 / W8A16x3" inspect "$tmp/noruntime" --mixed-precision fp8
expect_ok bf16 "trace: BF16x35" inspect "$bf16"
expect_ok none "trace: W8A8x35" inspect "$fp8" --mixed-precision none
expect_ok override "trace: W8A16x2 / W8A8x4 / W8A16x4" inspect "$fp8" --steps 10 --first-steps 2 --last-steps 4
expect_ok overlap "trace: W8A16x2 / W8A8x1 / W8A16x2" inspect "$fp8" --steps 5 --overlap native
expect_ok overlap_source "source=checkpoint+override" inspect "$fp8" --steps 5 --overlap native
expect_ok json_trace '"trace": "W8A16x3 / W8A8x29 / W8A16x3"' inspect "$fp8" --json
expect_ok json_plan '"w8a16",' inspect "$fp8" --json --steps 4
expect_ok json_reasoner '"reasoner": "w8a16"' inspect "$fp8" --json
expect_ok json_governed '"generation_fp8": 14' inspect "$fp8" --json
expect_ok help "inspect" --help
expect_ok version "stepmix " --version

expect_error missing_dir "no such file or directory" inspect "$tmp/nope"
expect_error zero_steps "" inspect "$fp8" --steps 0
expect_error force_bf16 "" inspect "$bf16" --mixed-precision fp8
expect_error none_with_override "" inspect "$fp8" --mixed-precision none --first-steps 2
expect_error bad_mode "" inspect "$fp8" --mixed-precision maybe
expect_error negative_count "" inspect "$fp8" --first-steps -1
# A negative count is refused with the value given, also one an int cannot hold.
expect_error negative_huge_count "override first_steps: expected an integer >= 0, got -4294967295" inspect "$fp8" \
  --mixed-precision fp8 --first-steps -4294967295
# A count larger than any run is legal: every step W8A16.
expect_ok huge_count "trace: W8A16x10" inspect "$fp8" --steps 10 --first-steps 99999999999
d=$(edited_copy huge_count 'p["last_steps"]["count"] = 2**64 - 1')
expect_ok huge_checkpoint_count "trace: W8A16x10" inspect "$d" --steps 10
expect_error no_subcommand "" 

d=$(edited_copy schema 'p["schema_version"] = True')
expect_error schema_bool "schema_version" inspect "$d"
grep -qF "$d/config.json" "$tmp/err" || fail "schema_bool: error does not name the config file"
d=$(edited_copy unknown 'p["future_knob"] = 1')
expect_error unknown_field "future_knob" inspect "$d"
d=$(edited_copy nvfp4 'q["quant_algo"] = "NVFP4"')
expect_error nvfp4 "NVFP4" inspect "$d"
# The policy is checked before the quantization (spec order), by inspect as by
# a run: both name the same first failure.
d=$(edited_copy nvfp4_and_schema 'q["quant_algo"] = "NVFP4"; p["schema_version"] = 2')
expect_error nvfp4_and_schema "schema_version: expected the integer 1, got 2" inspect "$d"
expect_error nvfp4_and_schema_run "schema_version: expected the integer 1, got 2" generate -m "$d" --prompt-ids 1,2 \
  --latent-shape 16,1,28,28 --steps 1
d=$(edited_copy vae_scope 'p["scope"] = ["vae"]')
expect_ok inert_scope "trace: W8A8x35" inspect "$d"

mkdir -p "$tmp/trunc"
cp "$fp8/config.json" "$tmp/trunc/"
head -c 200000 "$fp8/diffusion_pytorch_model.safetensors" >"$tmp/trunc/diffusion_pytorch_model.safetensors"
expect_error truncated "diffusion_pytorch_model.safetensors: tensor" inspect "$tmp/trunc"

finish inspect
