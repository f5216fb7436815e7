#!/usr/bin/env bash
# Prompt differential: stepmix's Cosmos3 prompt builder (`stepmix prompt --jsonl`) against an
# independent reference: the metadata sentences and system message written in Python from the
# pipeline's rules (bench/prompt_differential.py), the shipped chat template rendered by
# @huggingface/jinja 0.5.11 and encoded by @huggingface/tokenizers 0.2.0, then the eos and
# <|vision_start|> ids (bench/prompt_differential_peer.mjs). Every run first checks both sides
# on the 53 golden prompt cases (tests/data/golden/qwen3-tokenizer/prompts.jsonl), then compares
# ~28,000 seeded requests in 10 categories (hostile prompt and negative texts: control tokens,
# Jinja syntax, escapes, line breaks, scripts, emoji, trailing dots and look-alikes; sizes; fps
# literals in many spellings; rounding ties of {:.1f} and {:.0f}; every frame count 2..197 at 30
# rates; prompts around the 4096-id limit; values on and beyond the bounds; a model whose
# model_index.json turns the system message off): texts, renderings, ids and lengths exactly,
# and refusals. Any mismatch, stepmix's golden cases included, fails the run (exit status 1); a
# broken setup, including a reference that does not reproduce every golden case, is exit status 2.
# A check, not a measurement: about a minute on 2 cores with the defaults.
#
# usage: bench/run-prompt-differential.sh [--requests N] [--seed S] [--json FILE]
# The stepmix binary is $STEPMIX_BIN, else target stepmix built in
# ${STEPMIX_BENCH_BUILD:-build-bench}. Needs node and npm (scripts/setup.sh --bench);
# the npm packages go into ${STEPMIX_TOKENIZER_PEER_DIR:-build-tokenizer-peer}/,
# shared with bench/run-tokenizer.sh, never needed by the build or the tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
peer="${STEPMIX_TOKENIZER_PEER_DIR:-$root/build-tokenizer-peer}"
requests=28000
seed=20240607
json="$here/results/prompt-differential.json"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --requests) requests="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    *) echo "usage: bench/run-prompt-differential.sh [--requests N] [--seed S] [--json FILE]" >&2; exit 2 ;;
  esac
done

source "$here/tokenizer_peer_setup.sh"
prepare_tokenizer_peer prompt_differential_peer.mjs

echo "stepmix: $stepmix; reference: Python sentences, @huggingface/jinja 0.5.11 and @huggingface/tokenizers 0.2.0 on node $(node --version)" >&2
/usr/bin/python3 "$here/prompt_differential.py" --stepmix "$stepmix" \
  --peer "$peer/prompt_differential_peer.mjs" --tokenizer "$tok" --golden "$golden/prompts.jsonl" \
  --work "$peer/prompt-differential" --requests "$requests" --seed "$seed" --json "$json"
