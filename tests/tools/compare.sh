#!/usr/bin/env bash
# End-to-end checks of `stepmix compare` on the tiny golden checkpoints
# (2 prompts x 2 seeds x 4 steps): the report files, the keys of report.json,
# byte-identical reports across runs, classifier accuracy, the BF16 reference,
# one-line errors with exit code 2 and nothing left behind on failure.
# $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
g=$golden

printf '# two prompts; the label is the class index for the classifier\n' >"$tmp/prompts.txt"
printf 'ids:28,93,12,50,83,45,72,55,80,64,77,94,95\tlabel:1\n' >>"$tmp/prompts.txt"
printf '{"ids": [28, 12, 50, 94, 95], "label": 0}\n' >>"$tmp/prompts.txt"

# A classifier over the 4x1x6x8 output that always answers class 1 (zero
# weights, bias [0, 1]): accuracy 1/2 in every mode, full agreement.
mkdir "$tmp/cls"
le64() { for i in 0 1 2 3 4 5 6 7; do printf "\\$(printf '%03o' $((($1 >> (8 * i)) & 255)))"; done; }
header='{"fc1.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"fc1.weight":{"dtype":"F32","shape":[2,192],"data_offsets":[8,1544]}}'
while (( ${#header} % 8 )); do header+=' '; done
{ le64 ${#header}; printf '%s' "$header"; printf '\x00\x00\x00\x00\x00\x00\x80\x3f'; head -c 1536 /dev/zero; } \
  >"$tmp/cls/classifier.safetensors"
cat >"$tmp/cls/classifier.json" <<'EOF'
{"input": {"shape": [4, 1, 6, 8], "range": [-1, 1]},
 "layers": [{"type": "linear", "weight": "fc1.weight", "bias": "fc1.bias", "in": 192, "out": 2}],
 "classes": ["zero", "one"]}
EOF

common=(--model "$g/transformer-fp8" --prompts "$tmp/prompts.txt" --seeds 2 --steps 4 --latent-shape 4,1,6,8
        --guidance 3 --negative-prompt-ids 17,32,40,41,23,76,94,95 --policy first-last:1,1)

out=$("$bin" compare "${common[@]}" --classifier "$tmp/cls" --out "$tmp/a" 2>"$tmp/err") || fail "run a: $(cat "$tmp/err")"
for f in report.json report.md grid.png step_error.png; do
  [[ -s $tmp/a/$f ]] || fail "missing $f"
done
grep -q "reference: W8A16 on every step of --model" <<<"$out" || fail "summary: $out"
grep -q "^first-last:1,1 .*W8A16x1 / W8A8x2 / W8A16x1" <<<"$out" || fail "summary trace: $out"
for key in '"format": "stepmix-compare/1"' '"modes":' '"pooled":' '"psnr_db":' '"ssim":' '"mae":' \
           '"paired_vs_w8a8":' '"median_psnr_gain_db":' '"ci95_db":' '"improved_fraction":' \
           '"improved_fraction_mae":' '"step_error":' '"per_image":' '"images": 4' '"accuracy": 0.5' \
           '"agreement_with_reference": 1.0' '"labelled_images": 4' '"name": "w8a8"' '"name": "mixed"' \
           '"trace": "W8A8x4"' '"trace": "W8A16x4"'; do
  grep -qF -- "$key" "$tmp/a/report.json" || fail "report.json lacks $key"
done
grep -qF '| first-last:1,1 | W8A16x1 / W8A8x2 / W8A16x1 |' "$tmp/a/report.md" || fail "report.md table"
[[ $(head -c 8 "$tmp/a/grid.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "grid.png is not a PNG"

# Same inputs, same report, byte for byte (no timings or output paths inside).
"$bin" compare "${common[@]}" --classifier "$tmp/cls" --out "$tmp/b" >/dev/null 2>&1 || fail "run b"
cmp -s "$tmp/a/report.json" "$tmp/b/report.json" || fail "report.json differs between identical runs"
cmp -s "$tmp/a/grid.png" "$tmp/b/grid.png" || fail "grid.png differs between identical runs"

# The BF16 checkpoint as reference adds a w8a16 column.
printf 'ids:28,93,12,50,83,45,72,55,80,64,77,94,95\n' >"$tmp/one.txt"
out=$("$bin" compare --model "$g/transformer-fp8" --reference "$g/transformer" --prompts "$tmp/one.txt" --seeds 1 \
      --steps 4 --latent-shape 4,1,6,8 --guidance 1 --out "$tmp/c" 2>"$tmp/err") || fail "bf16 reference: $(cat "$tmp/err")"
grep -qF '"name": "w8a16"' "$tmp/c/report.json" || fail "bf16 reference: no w8a16 mode"
grep -qF 'BF16 checkpoint' "$tmp/c/report.json" || fail "bf16 reference: description"
grep -qF '"classifier": null' "$tmp/c/report.json" || fail "no classifier expected"

# A model with vae/ (vae-model quantized here): compare measures the final
# latent, not decoded pixels, and its report says so.
printf 'ids:5,9,13\n' >"$tmp/vae_prompt.txt"
"$bin" quantize --model "$data/vae-model" --out "$tmp/vae_fp8" --calib-prompts "$tmp/vae_prompt.txt" --calib-seeds 1 \
  --steps 2 --frames 1 -H 64 -W 64 --negative-prompt-ids 1,2 >/dev/null 2>"$tmp/err" || fail "quantize vae-model: $(cat "$tmp/err")"
"$bin" compare --model "$tmp/vae_fp8" --prompts "$tmp/vae_prompt.txt" --seeds 1 --steps 2 --frames 1 -H 64 -W 64 \
  --guidance 1 --out "$tmp/v" >/dev/null 2>"$tmp/err" || fail "compare with vae/: $(cat "$tmp/err")"
grep -qF '"output": "latent"' "$tmp/v/report.json" || fail "compare with vae/: the report does not say latent"
grep -qF 'compare does not decode it through vae/' "$tmp/v/report.json" || fail "compare with vae/: no note"

expect_error out_exists "--out $tmp/a: exists; only a folder stepmix wrote can be replaced" compare "${common[@]}" --out "$tmp/a"
"$bin" compare "${common[@]}" --out "$tmp/a" --force >/dev/null 2>&1 || fail "--force"
expect_error zero_seeds "--seeds: expected an integer in [1, 10000]" compare "${common[@]}" --seeds 0 --out "$tmp/e"
expect_error bad_policy "--policy: expected first-last:F,L" compare "${common[@]}" --policy 3,3 --out "$tmp/e"
expect_error twice "is given twice" compare "${common[@]}" --policy first-last:1,1 --out "$tmp/e"
expect_error no_prompts "no such file" compare "${common[@]}" --prompts "$tmp/none.txt" --out "$tmp/e"
expect_error bf16_model "has no FP8 Linears" compare "${common[@]}" --model "$g/transformer" --out "$tmp/e"
expect_error fp8_reference "must be a BF16 checkpoint" compare "${common[@]}" --reference "$g/transformer-fp8" --out "$tmp/e"
expect_error diff_gain "--diff-gain" compare "${common[@]}" --diff-gain 0 --out "$tmp/e"
expect_error diff_gain_inf "--diff-gain: expected a number in (0, 1e6], got inf" compare "${common[@]}" --diff-gain 1e999 --out "$tmp/e"
expect_error bad_activations "--activations: expected f32 or bf16" compare "${common[@]}" --activations fp8 --out "$tmp/e"
expect_error missing_seeds "--seeds is required" compare --model "$g/transformer-fp8" --prompts "$tmp/prompts.txt" --out "$tmp/e"
printf 'ids:1,2\tlabel:7\n' >"$tmp/label.txt"
expect_error label_range "has label 7; the classifier has 2 classes" compare "${common[@]}" --prompts "$tmp/label.txt" \
  --classifier "$tmp/cls" --out "$tmp/e"
for bad in 'ids:1,2 label:x' 'ids:1,2 label:4x' $'ids:1,2\tlabel:4\tlabel:5' 'ids:1,2 label:'; do
  printf '%s\n' "$bad" >"$tmp/bad_label.txt"
  expect_error "label_malformed:$bad" "$tmp/bad_label.txt:1: a label is the last word" compare "${common[@]}" \
    --prompts "$tmp/bad_label.txt" --out "$tmp/e"
done
expect_error classifier_size "--classifier" compare "${common[@]}" --latent-shape 4,1,4,4 --classifier "$tmp/cls" --out "$tmp/e"
[[ -e $tmp/e ]] && fail "a failed run left $tmp/e"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary report folder was left: $(ls "$tmp")"

finish compare
