#!/usr/bin/env bash
# Tokenizer differential: stepmix's tokenizer (`stepmix tokenize --jsonl`) against
# the JavaScript reference (@huggingface/tokenizers, the tokenizer of
# Transformers.js) on ~200k seeded adversarial strings in 14 categories
# (whitespace and punctuation, contractions, numbers, NFC, Hangul, emoji, added
# tokens, long runs, random UTF-8, every General_Category, new Unicode, realistic
# text; decoding of random ids and of broken UTF-8 byte tokens), encoding with
# add_special_tokens false and decoding with and without skip_special_tokens.
# A mismatch counts as Unicode-version skew when the input holds code points whose
# tokenizer-relevant properties differ between the reference's Unicode (Node's ICU)
# and Unicode 14 (Oniguruma 6.9.8's regex classes; utf8proc 2.8 is Unicode 15) and
# the input agrees without them; any other mismatch fails the run (exit status 1)
# and its minimal failing inputs are printed (bench/tokenizer_differential.py). A
# broken setup (e.g. a Python whose tables are not Unicode 14) is exit status 2.
# A check, not a measurement: about 70 s on 2 cores with the defaults (197,200 strings).
#
# usage: bench/run-tokenizer-differential.sh [--strings N] [--seed S] [--json FILE]
# The stepmix binary is $STEPMIX_BIN, else target stepmix built in
# ${STEPMIX_BENCH_BUILD:-build-bench}. Needs node and npm (scripts/setup.sh --bench);
# the npm packages go into ${STEPMIX_TOKENIZER_PEER_DIR:-build-tokenizer-peer}/,
# shared with bench/run-tokenizer.sh, never needed by the build or the tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
peer="${STEPMIX_TOKENIZER_PEER_DIR:-$root/build-tokenizer-peer}"
strings=17000
seed=20240601
json="$here/results/tokenizer-differential.json"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --strings) strings="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    *) echo "usage: bench/run-tokenizer-differential.sh [--strings N] [--seed S] [--json FILE]" >&2; exit 2 ;;
  esac
done

source "$here/tokenizer_peer_setup.sh"
prepare_tokenizer_peer tokenizer_differential_peer.mjs

echo "stepmix: $stepmix; reference: @huggingface/tokenizers 0.2.0 on node $(node --version)" >&2
/usr/bin/python3 "$here/tokenizer_differential.py" --stepmix "$stepmix" \
  --peer "$peer/tokenizer_differential_peer.mjs" --tokenizer "$tok" --work "$peer/differential" \
  --strings "$strings" --seed "$seed" --json "$json"
