#!/usr/bin/env bash
# `stepmix bench` on the tiny golden checkpoints: the table lists every mode,
# the JSON has every field, bad options are one-line errors. No timing is
# asserted, and the PyTorch peer is skipped (--no-peer) to stay fast.
# $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
g=$golden

common=(--model "$g/transformer-fp8" --prompt-ids 28,93,12,50,83,45,72,55,80,64,77,94,95
        --negative-prompt-ids 17,32,40,41,23,76,94,95 --latent-shape 4,1,6,8 --guidance 3 --steps 8
        --repeat 2 --warmup 0 --no-peer)

out=$("$bin" bench "${common[@]}" --reference "$g/transformer" --json "$tmp/bench.json" 2>"$tmp/err") ||
  fail "bench: $(cat "$tmp/err")"
for row in "^bf16 .*BF16x8" "^w8a16 .*W8A16x8" "^w8a8 .*W8A8x8" "^mixed .*W8A16x3 / W8A8x2 / W8A16x3" \
           "^mixed over w8a8: [+-][0-9.]*% end-to-end, [+-][0-9.]*% CPU time (median of 2 paired rounds" \
           "^peer: not run: skipped"; do
  grep -q "$row" <<<"$out" || fail "table lacks $row"$'\n'"$out"
done
for key in '"model":' '"steps": 8' '"repeat": 2' '"threads":' '"modes":' '"step_ms":' '"median":' '"p10":' \
           '"p90":' '"step_ms_median_by_precision":' '"step_cpu_ms":' '"W8A8":' '"end_to_end_s":' '"steps_per_s":' \
           '"images_per_s":' '"end_to_end_cpu_s":' '"mixed_over_w8a8":' '"peak_rss_bytes":' '"weight_bytes_resident":' '"weight_cache_bytes":' '"peer":'; do
  grep -qF -- "$key" "$tmp/bench.json" || fail "bench.json lacks $key"
done
# Every mode ran once per round: two timed generations each, every step timed.
/usr/bin/python3 - "$tmp/bench.json" <<'EOF' || fail "bench.json samples"
import json, sys
r = json.load(open(sys.argv[1]))
for m in r["modes"]:
    assert m["end_to_end_s"]["samples"] == 2 and m["end_to_end_cpu_s"]["samples"] == 2, m["name"]
    assert m["step_ms"]["samples"] == 16, (m["name"], m["step_ms"]["samples"])
assert r["mixed_over_w8a8"]["end_to_end"]["samples"] == 2
EOF
# The mapped weights of the FP8 file are resident after the runs.
grep -q '"weight_bytes_resident": [1-9]' "$tmp/bench.json" || fail "weight bytes: $(grep weight_bytes "$tmp/bench.json")"

out=$("$bin" bench "${common[@]}" --model "$g/transformer" --repeat 1) || fail "bf16 model"
grep -q "^bf16 .*BF16x8" <<<"$out" || fail "bf16 model table: $out"

"$bin" bench "${common[@]}" --repeat 1 --activations bf16 --weight-cache all --json "$tmp/bf16.json" >/dev/null ||
  fail "bench --activations bf16"
grep -qF '"activations": "bf16"' "$tmp/bf16.json" || fail "bench.json lacks the activation dtype"
grep -q '"weight_cache_bytes": [1-9]' "$tmp/bf16.json" || fail "--weight-cache all: no cache bytes reported"

# A BF16 --reference opens without the options only FP8 Linears take.
"$bin" bench "${common[@]}" --repeat 1 --activations bf16 --weight-cache all --w8a16-rounding diffusers \
  --reference "$g/transformer" >"$tmp/ref.txt" 2>"$tmp/err" || fail "bench --reference with --weight-cache all: $(cat "$tmp/err")"
grep -q '^ *bf16 ' "$tmp/ref.txt" || fail "bench --reference: no bf16 row: $(cat "$tmp/ref.txt")"
expect_error repeat "--repeat: expected an integer in [1, 1000], got 0" bench "${common[@]}" --repeat 0
expect_error steps "--steps: expected an integer in [1, 10000], got 0" bench "${common[@]}" --steps 0
expect_error fp8_reference "is not a BF16 checkpoint" bench "${common[@]}" --reference "$g/transformer-fp8"
expect_error two_prompts "give --prompt or --prompt-ids" bench "${common[@]}" --prompt "a boot"
expect_error activations "--activations: expected f32 or bf16" bench "${common[@]}" --activations int8
# A peer asked for by name must exist (checked before anything runs); only
# the default one may be missing.
with_peer=("${common[@]:0:$((${#common[@]} - 1))}")  # common without --no-peer
expect_error python_missing "--python $tmp/none: no such file or directory" bench "${with_peer[@]}" --python "$tmp/none"
expect_error peer_threads "--peer-threads: expected an integer in [1, 1024], got 99999" bench "${with_peer[@]}" \
  --peer-threads 99999
expect_error script_missing "--peer-script $tmp/none.py: not a regular file" bench "${with_peer[@]}" \
  --peer-script "$tmp/none.py"
expect_error no_peer_python "--no-peer runs no peer" bench "${common[@]}" --python /usr/bin/python3
# Every peer option is refused where no peer runs, not ignored.
expect_error no_peer_threads "--no-peer runs no peer: --peer-threads would be ignored" bench "${common[@]}" \
  --peer-threads 4
expect_error no_peer_dtype "--no-peer runs no peer: --peer-dtype would be ignored" bench "${common[@]}" \
  --peer-dtype fp32

finish bench
