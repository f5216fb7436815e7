#!/usr/bin/env bash
# End-to-end checks of `stepmix tokenize` and `stepmix prompt` on the Qwen3
# goldens: every case through --jsonl, the single-request forms, per-line
# refusals, exit codes and one-line errors naming the line.
# $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
q=$data/golden/qwen3-tokenizer
models=$data/../../models

# A tokenizer folder as Cosmos3 ships it; tokenizer.json is stored compressed.
tok=$tmp/qwen3
mkdir -p "$tok"
gzip -dc "$q/text_tokenizer/tokenizer.json.gz" >"$tok/tokenizer.json"
cp "$q/text_tokenizer/tokenizer_config.json" "$q/text_tokenizer/chat_template.jinja" "$tok/"

# A tiny byte-level tokenizer with the same layout and control tokens, for
# the checks that do not need the real vocabulary (it loads in no time): no
# merges, so a byte's id is its value; <|im_start|> 300, <|im_end|> 301,
# <|vision_start|> 302.
tiny=$tmp/tiny
mkdir -p "$tiny"
cp "$q/text_tokenizer/chat_template.jinja" "$tiny/"
echo '{"eos_token": "<|im_end|>"}' >"$tiny/tokenizer_config.json"
/usr/bin/python3 - "$tok/tokenizer.json" "$tiny/tokenizer.json" <<'PY'
import json, sys
qwen = json.load(open(sys.argv[1]))
# GPT-2's byte alphabet: printable bytes stand for themselves, the rest for U+0100 + n.
keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
chars, n = {}, 0
for b in range(256):
    if b in keep:
        chars[b] = chr(b)
    else:
        chars[b] = chr(0x100 + n)
        n += 1
qwen["model"]["vocab"] = {chars[b]: b for b in range(256)}
qwen["model"]["merges"] = []
qwen["added_tokens"] = [dict(id=300 + i, content=c, single_word=False, lstrip=False, rstrip=False, normalized=False,
                             special=True) for i, c in enumerate(["<|im_start|>", "<|im_end|>", "<|vision_start|>"])]
json.dump(qwen, open(sys.argv[2], "w"))
PY

# compare KIND GOLDEN ANSWERS: every answer line matches its golden case.
compare() {
  checks=$((checks + 1))
  local report
  report=$(/usr/bin/python3 - "$@" <<'PY'
import json, sys
kind, golden, answers = sys.argv[1:]
cases = [json.loads(l) for l in open(golden)]
got = [json.loads(l) for l in open(answers)]
fields = {"encode": ["ids"], "decode": ["text", "text_skip_special_tokens"],
          "prompt": ["positive_text", "negative_text", "positive_rendered", "negative_rendered",
                     "positive_ids", "negative_ids", "positive_len", "negative_len"]}[kind]
bad = []
if len(got) != len(cases):
    bad.append(f"{len(got)} answers for {len(cases)} cases")
for c, g in zip(cases, got):
    if g.get("id") != c["id"]:
        bad.append(f"{c['id']}: answer for {g.get('id')}")
    elif kind == "prompt" and c["positive_len"] > 4096:
        if "more than the 4096" not in g.get("error", ""):
            bad.append(f"{c['id']}: expected a refusal, got {g}")
    else:
        bad += [f"{c['id']}: {f}" for f in fields if g.get(f) != c[f]]
print("; ".join(bad[:10]))
PY
)
  [[ -z $report ]] || fail "compare $1: $report"
}

# The request part of each golden line (the rest is expected output).
/usr/bin/python3 - "$q" "$tmp" <<'PY'
import json, sys
q, tmp = sys.argv[1:]
def strip(name, keep):
    with open(f"{tmp}/{name}.in.jsonl", "w") as out:
        for line in open(f"{q}/{name}.jsonl"):
            c = json.loads(line)
            out.write(json.dumps({k: c[k] for k in keep}) + "\n")
strip("encode", ["id", "category", "text"])
strip("decode", ["id", "note", "ids"])
strip("prompts", ["id", "note", "mode", "prompt", "negative_prompt", "height", "width", "num_frames", "fps",
                  "use_system_prompt", "resolution_sentence", "duration_sentence"])
PY

# --- every golden case through --jsonl --------------------------------------------
run_jsonl() {  # NAME ARGS...: stdout to $tmp/NAME.out; exit 0 expected
  local name=$1
  shift
  checks=$((checks + 1))
  timeout "$STEPMIX_TEST_TIMEOUT" "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/err" || fail "$name: exit $? ($(head -c 600 "$tmp/err"))"
}
run_jsonl encode tokenize --tokenizer "$tok" --jsonl "$tmp/encode.in.jsonl"
compare encode "$q/encode.jsonl" "$tmp/encode.out"
run_jsonl decode tokenize --tokenizer "$tok" --jsonl - <"$tmp/decode.in.jsonl"
compare decode "$q/decode.jsonl" "$tmp/decode.out"
run_jsonl prompts prompt --model "$tok" --jsonl "$tmp/prompts.in.jsonl"
compare prompt "$q/prompts.jsonl" "$tmp/prompts.out"
checks=$((checks + 1))
LC_ALL=C grep -q $'[\x80-\xff]' "$tmp/prompts.out" "$tmp/decode.out" && fail "answers are not ASCII-only"

# --- single requests ----------------------------------------------------------------
video_ids=$(/usr/bin/python3 -c "import json,sys; print(json.dumps(json.loads(open(sys.argv[1]).readline())['positive_ids'], separators=(',', ':')))" "$q/prompts.jsonl")
expect_ok prompt_video "\"positive_ids\":$video_ids" prompt --model "$tok" --prompt "A robot"
expect_ok text '{"ids":[65,32,114,111,98,111,116]}' tokenize --tokenizer "$tiny" --text "A robot"
expect_ok ids '{"text":"Hi<|im_end|>","text_skip_special_tokens":"Hi"}' tokenize --tokenizer "$tiny" --ids 72,105,301
expect_ok ids_skip '{"text":"Hi"}' tokenize --tokenizer "$tiny" --ids 72,105,301 --skip-special-tokens
# A later occurrence of an option wins, as in every command.
expect_ok repeated_option '{"ids":[65,32,114,111,98,111,116]}' tokenize --tokenizer "$tmp/none" --tokenizer "$tiny" \
  --text "A robot"
expect_ok prompt_repeated_option '"positive_text":"A robot. This image is of 1024x1024 resolution."' prompt \
  --model "$tmp/none" --model "$tiny" --prompt "A robot" --frames 1
mkdir -p "$tmp/model/text_tokenizer"
cp "$tiny"/* "$tmp/model/text_tokenizer/"
echo '{"default_use_system_prompt": false}' >"$tmp/model/model_index.json"
expect_ok via_model '{"ids":[65]}' tokenize --tokenizer "$tmp/model" --text "A"
expect_ok via_file '{"ids":[65]}' tokenize --tokenizer "$tiny/tokenizer.json" --text "A"
expect_ok prompt_image '"positive_text":"A robot. This image is of 720x1280 resolution."' prompt --model "$tiny" \
  --prompt "A robot" --frames 1 --height 720 --width 1280
short=(prompt -m "$tiny" -p "A robot" --frames 1 -H 720 -W 1280 -n "blurry...")
expect_ok short_names '"positive_text":"A robot. This image is of 720x1280 resolution."' "${short[@]}"
expect_ok short_names_negative '"negative_text":"blurry.' "${short[@]}"
expect_ok prompt_image_default '"positive_text":"A robot. This image is of 1024x1024 resolution."' prompt --model "$tiny" \
  --prompt "A robot" --frames 1
expect_ok prompt_fps '"positive_text":"A robot. The video is 4.9 seconds long and is of 12 FPS.' prompt --model "$tiny" \
  --prompt "A robot" --frames 61 --fps 12.5
expect_ok negative '"negative_text":"blurry. The video is not 7.9 seconds' prompt --model "$tiny" --prompt "A robot" \
  --negative-prompt "blurry..."
expect_ok system '"positive_rendered":"<|im_start|>system\nYou are a helpful assistant who will generate videos' prompt \
  --model "$tiny" --prompt "A robot"
expect_ok no_system '"positive_rendered":"<|im_start|>user\nA robot' prompt --model "$tiny" --prompt "A robot" --no-system-prompt
expect_ok model_default '"positive_rendered":"<|im_start|>user\nA robot' prompt --model "$tmp/model" --prompt "A robot"
expect_ok system_forced '"positive_rendered":"<|im_start|>system\nYou are a helpful assistant who will generate videos' \
  prompt --model "$tmp/model" --prompt "A robot" --system-prompt
expect_rejected system_both "" "excludes" prompt --model "$tmp/model" --prompt "A robot" --system-prompt --no-system-prompt
expect_ok sentences_off '"positive_text":"A robot.","negative_text":""' prompt --model "$tiny" --prompt "A robot." \
  --no-resolution-sentence --no-duration-sentence
# stepmix's own WordLevel model: the prompt as given, then eos and <|vision_start|>.
expect_ok plain_model '"positive_ids":[10,5,12,37,36,1,2]' prompt --model "$models/fashion-cosmos3-bf16" \
  --prompt "photo of an ankle boot"
expect_ok plain_tokenize '{"ids":[10,5,12,37,36]}' tokenize --tokenizer "$models/fashion-cosmos3-bf16" \
  --text "Photo of an ankle boot"

# --- refusals answered per line ---------------------------------------------------------
printf '%s\n' '{"id": "ok", "ids": [72]}' '{"id": "far", "ids": [72, 999]}' >"$tmp/unknown_id.jsonl"
expect_ok unknown_id '{"id":"far","error":"[tokenizer] '"$tiny"'/tokenizer.json: cannot decode id 999: not in the vocabulary"}' \
  tokenize --tokenizer "$tiny" --jsonl "$tmp/unknown_id.jsonl"
# The golden case over the limit (the real ids: 4588) and an invalid request, answered in place.
tail -n 1 "$tmp/prompts.in.jsonl" >"$tmp/long.jsonl"
expect_ok over_limit '{"id":"A-prm-0053","error":"[prompt] positive prompt: 4588 token ids, more than the 4096' prompt \
  --model "$tok" --jsonl "$tmp/long.jsonl"
printf '%s\n' '{"id": "zero", "prompt": "p", "height": 0}' '{"id": "next", "prompt": "p"}' >"$tmp/zero.jsonl"
expect_ok zero_height '{"id":"zero","error":"[prompt] height: expected a positive integer, got 0"}' prompt --model "$tiny" \
  --jsonl "$tmp/zero.jsonl"
expect_ok after_refusal '{"id":"next","positive_text":"p. The video' prompt --model "$tiny" --jsonl "$tmp/zero.jsonl"

# --- errors: exit 2, one line naming the line, nothing of that line printed ------------
# bad_line NAME CONTENT_OF_LINE_2 PROBLEM COMMAND...: line 1 is answered, line 2 stops the run.
bad_line() {
  local name=$1 line2=$2 problem=$3
  shift 3
  printf '%s\n%s\n%s\n' "${good_line:?}" "$line2" "$good_line" >"$tmp/$name.jsonl"
  expect_rejected "$name" "$tmp/$name.jsonl: line 2" "$problem" "$@" --jsonl "$tmp/$name.jsonl"
  checks=$((checks + 1))
  [[ $(wc -l <"$tmp/out") -eq 1 ]] || fail "$name: expected exactly the answer to line 1, got: $(head -c 300 "$tmp/out")"
}
good_line='{"id": 1, "text": "A robot"}'
bad_line not_object '[1, 2]' "expected a JSON object" tokenize --tokenizer "$tiny"
bad_line not_json '{"id": 2, "text": "unterminated}' "not valid JSON" tokenize --tokenizer "$tiny"
bad_line not_utf8 $'{"id": 2, "text": "caf\xe9"}' "not valid UTF-8 (byte 22)" tokenize --tokenizer "$tiny"
bad_line surrogate '{"id": 2, "text": "\ud800"}' "not valid JSON" tokenize --tokenizer "$tiny"
bad_line unknown_field '{"id": 2, "txt": "A"}' 'unknown field "txt"' tokenize --tokenizer "$tiny"
bad_line both '{"id": 2, "text": "A", "ids": [1]}' 'expected either "text" (encode) or "ids" (decode)' tokenize --tokenizer "$tiny"
bad_line ids_type '{"id": 2, "ids": [1, "2"]}' "ids: expected an array of integers" tokenize --tokenizer "$tiny"
bad_line deep "$(printf '[%.0s' {1..100})" "nested deeper than" tokenize --tokenizer "$tiny"
good_line='{"id": 1, "prompt": "A robot"}'
bad_line prompt_unknown '{"id": 2, "prompt": "A", "frames": 1}' 'unknown field "frames"' prompt --model "$tiny"
bad_line prompt_type '{"id": 2, "prompt": "A", "fps": "24"}' "fps: expected a number" prompt --model "$tiny"
bad_line prompt_mode '{"id": 2, "prompt": "A", "mode": "image"}' 'mode: "image" does not match num_frames 189' prompt --model "$tiny"
bad_line prompt_missing '{"id": 2}' "prompt: required" prompt --model "$tiny"
bad_line prompt_not_utf8 $'{"prompt": "\xff"}' "not valid UTF-8" prompt --model "$tiny"

expect_rejected two_modes "" "give exactly one of --text, --ids and --jsonl" tokenize --tokenizer "$tiny" --text a --ids 1
expect_rejected no_mode "" "give exactly one of --text, --ids and --jsonl" tokenize --tokenizer "$tiny"
expect_rejected bad_ids "--ids" "expected comma-separated integers, got '1,,2'" tokenize --tokenizer "$tiny" --ids 1,,2
expect_rejected no_folder "$tmp/none" "no such file or directory" tokenize --tokenizer "$tmp/none" --text a
mkdir -p "$tmp/empty"
expect_rejected empty_folder "[tokenizer] $tmp/empty" "no text_tokenizer/tokenizer.json" prompt --model "$tmp/empty" --prompt a
expect_rejected tokenize_empty_folder "[tokenizer] $tmp/empty" "no text_tokenizer/tokenizer.json" \
  tokenize --tokenizer "$tmp/empty" --text a
expect_rejected no_jsonl "$tmp/missing.jsonl" "cannot open" tokenize --tokenizer "$tiny" --jsonl "$tmp/missing.jsonl"
expect_rejected prompt_no_request "" "give --prompt" prompt --model "$tiny"
expect_rejected prompt_and_jsonl "" "excludes" prompt --model "$tiny" --prompt a --jsonl "$tmp/zero.jsonl"
expect_rejected prompt_not_utf8_arg "--prompt" "not valid UTF-8" prompt --model "$tiny" --prompt $'caf\xe9'
expect_rejected text_not_utf8_arg "--text" "not valid UTF-8" tokenize --tokenizer "$tiny" --text $'caf\xe9'
expect_rejected prompt_limit "" "positive prompt: 5021 token ids, more than the 4096" prompt --model "$tiny" \
  --prompt "$(printf 'x%.0s' {1..5000})" --no-system-prompt --no-resolution-sentence --no-duration-sentence
mkdir -p "$tmp/no_template"
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$tmp/no_template/"
/usr/bin/python3 - "$tmp/no_template/tokenizer_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("chat_template", None)
json.dump(c, open(sys.argv[1], "w"))
PY
expect_rejected no_template "$tmp/no_template/tokenizer.json" "without a chat template" prompt --model "$tmp/no_template" --prompt a
cp "$tok/chat_template.jinja" "$tmp/no_template/" && echo >>"$tmp/no_template/chat_template.jinja"
expect_rejected unknown_template "$tmp/no_template/chat_template.jinja" "unknown chat template" prompt --model "$tmp/no_template" --prompt a
mkdir -p "$tmp/split"
cp "$tiny"/* "$tmp/split/"
echo '{"eos_token": "<|im_end|>", "split_special_tokens": true}' >"$tmp/split/tokenizer_config.json"
expect_rejected split_special "$tmp/split/tokenizer_config.json: split_special_tokens" "expected false or absent" \
  prompt --model "$tmp/split" --prompt a

finish tokenize
