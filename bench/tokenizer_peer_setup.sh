# Sourced by bench/run-tokenizer-differential.sh and bench/run-prompt-differential.sh:
# the stepmix binary to check, the npm reference packages and the Qwen3 tokenizer of the
# goldens, set up the same way for both.
#   prepare_tokenizer_peer PEER_SCRIPT
# expects $here (bench/), $root, $build and $peer; copies PEER_SCRIPT (an .mjs next to
# this file) into $peer, where ES modules find the packages, and sets
#   stepmix  $STEPMIX_BIN, else target stepmix built in $build
#   golden   tests/data/golden/qwen3-tokenizer
#   tok      $peer/qwen3, the golden tokenizer folder unpacked
prepare_tokenizer_peer() {
  if [[ -n "${STEPMIX_BIN:-}" ]]; then
    stepmix="$STEPMIX_BIN"
  else
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
    cmake --build "$build" --target stepmix -j2 >/dev/null
    stepmix="$build/stepmix"
  fi
  mkdir -p "$peer"
  if [[ ! -d "$peer/node_modules/@huggingface/tokenizers" || ! -d "$peer/node_modules/@huggingface/jinja" ]]; then
    (cd "$peer" && npm install --no-audit --no-fund --silent @huggingface/tokenizers@0.2.0 @huggingface/jinja@0.5.11)
  fi
  cp "$here/$1" "$peer/"
  golden="$root/tests/data/golden/qwen3-tokenizer"
  tok="$peer/qwen3"
  mkdir -p "$tok"
  gzip -dc "$golden/text_tokenizer/tokenizer.json.gz" >"$tok/tokenizer.json"
  cp "$golden/text_tokenizer/tokenizer_config.json" "$golden/text_tokenizer/chat_template.jinja" "$tok/"
}
