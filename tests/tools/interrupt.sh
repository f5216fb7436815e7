#!/usr/bin/env bash
# Interrupting `stepmix generate` and `stepmix quantize` mid-run, with SIGINT
# (Ctrl-C) and SIGTERM, on the tiny golden checkpoints: the run stops, no
# partial or temporary file is left next to the outputs, and an output that
# existed before the run is byte-for-byte unchanged.
#   generate + SIGINT: stops after the current step, exit 2, one stderr line
#                      "cancelled after step i of N";
#   generate + SIGTERM, quantize + SIGINT/SIGTERM: the default action (the
#                      process ends with the signal, exit 128 + signal).
# $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"

# A background command of a non-interactive shell starts with SIGINT ignored;
# `env --default-signal` gives stepmix the disposition it has under a terminal.
run_bg() {
  env --default-signal=INT,TERM "$bin" "$@" >"$tmp/run.out" 2>"$tmp/run.err" &
  pid=$!
}

# snapshot DIR: every file under DIR with its checksum (sorted), so that any
# new, missing, temporary or modified file shows up as a difference.
snapshot() {
  (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | while read -r f; do
     if [[ -f $f ]]; then echo "$f $(sha256sum <"$f" | cut -c1-64)"; else echo "$f"; fi
   done)
}

# interrupt NAME SIGNAL DELAY ARGS...: runs stepmix ARGS in the background,
# sends SIGNAL after DELAY seconds, and sets rc to its exit status. A run
# that already ended by then (it must not: every run here is far longer)
# is a failure.
interrupt() {
  local name=$1 sig=$2 delay=$3
  shift 3
  checks=$((checks + 1))
  run_bg "$@"
  sleep "$delay"
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    rc=$?
    fail "$name: the run ended (exit $rc) before it was interrupted: $(head -c 600 "$tmp/run.err")"
    return 1
  fi
  kill -s "$sig" "$pid"
  # The signal must end the run promptly (within one step, or at once).
  local waited=0
  while kill -0 "$pid" 2>/dev/null && ((waited < 600)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    fail "$name: still running 60 s after SIG$sig"
    kill -KILL "$pid"
  fi
  wait "$pid"
  rc=$?
  return 0
}

common=(--model "$golden/transformer-fp8" --prompt-ids 28,93,12,50,83,45,72,55,80,64,77,94,95
        --negative-prompt-ids 17,32,40,41,23,76,94,95 --guidance 3)
# Long enough that no run can finish before the signal (about 1 ms per step
# in a release build): 10^4 Euler steps (the limit) on a 4x1x64x64 latent.
long=(--latent-shape 4,1,64,64 --steps 10000 --scheduler euler)

# --- generate ----------------------------------------------------------------
out=$tmp/gen
mkdir "$out"
# The previous outputs of an earlier, complete run.
"$bin" generate "${common[@]}" --latent-shape 4,1,6,8 --steps 2 --save-latents "$out/latent.safetensors" \
  --json >"$out/previous.json" 2>"$tmp/err" || fail "previous generate run: $(cat "$tmp/err")"
[[ -s $out/latent.safetensors ]] || fail "previous generate run wrote no latent"
before=$(snapshot "$out")

# SIGINT (Ctrl-C): the loop stops after the current step and writes nothing.
# A signal that arrives while the model is still loading, before the handler
# is installed, ends the process at once (exit 130); the delay then doubles.
delay=1
for attempt in 1 2 3 4; do
  interrupt "generate SIGINT" INT "$delay" generate "${common[@]}" "${long[@]}" \
    --save-latents "$out/latent.safetensors" || break
  [[ $rc -eq 130 && $attempt -lt 4 ]] || break
  delay=$((delay * 2))
done
if [[ $rc -ne 2 ]]; then
  fail "generate SIGINT: exit $rc, expected 2 ($(head -c 600 "$tmp/run.err"))"
else
  [[ $(grep -cv "^note: \|^warning: " "$tmp/run.err") -eq 1 ]] || fail "generate SIGINT: the error is not one line: $(cat "$tmp/run.err")"
  grep -q '^stepmix: \[generate\] cancelled after step [0-9]* of 10000' "$tmp/run.err" ||
    fail "generate SIGINT: message: $(cat "$tmp/run.err")"
fi
[[ $(snapshot "$out") == "$before" ]] || fail "generate SIGINT changed $out:"$'\n'"$(snapshot "$out")"

# SIGTERM: the default action, at once; nothing written, nothing changed.
interrupt "generate SIGTERM" TERM 1 generate "${common[@]}" "${long[@]}" --save-latents "$out/latent.safetensors" &&
  { [[ $rc -eq 143 ]] || fail "generate SIGTERM: exit $rc, expected 143 ($(head -c 600 "$tmp/run.err"))"; }
[[ $(snapshot "$out") == "$before" ]] || fail "generate SIGTERM changed $out:"$'\n'"$(snapshot "$out")"

# Two outputs (a picture and the latent, on the pixel-space embedded model):
# neither appears.
interrupt "generate SIGTERM (two outputs)" TERM 1 generate --model "$models/fashion-cosmos3-fp8" --prompt "a coat" \
  --steps 10000 --scheduler euler --save-latents "$out/new.safetensors" --out "$out/new.png" &&
  { [[ $rc -eq 143 ]] || fail "generate SIGTERM (two outputs): exit $rc, expected 143"; }
[[ $(snapshot "$out") == "$before" ]] || fail "generate SIGTERM (two outputs) changed $out:"$'\n'"$(snapshot "$out")"

# --- quantize ----------------------------------------------------------------
q=$tmp/quant
mkdir "$q"
printf 'ids:28,93,12,50,83,45,72,55,80,64,77,94,95\n' >"$tmp/prompts.txt"
# quantize reads a Diffusers model directory: the BF16 golden as its transformer/.
mkdir "$tmp/bf16"
cp -r "$golden/transformer" "$tmp/bf16/transformer"
qargs=(quantize --model "$tmp/bf16" --calib-prompts "$tmp/prompts.txt" --calib-seeds 1
       --negative-prompt-ids 17,32,40,41,23,76,94,95 --guidance 3)
# A complete earlier output.
"$bin" "${qargs[@]}" --latent-shape 4,1,6,8 --steps 2 --out "$q/done" >/dev/null 2>"$tmp/err" ||
  fail "previous quantize run: $(cat "$tmp/err")"
[[ -s $q/done/transformer/diffusion_pytorch_model.safetensors && -s $q/done/transformer/config.json ]] ||
  fail "previous quantize run: incomplete output: $(cd "$q" && find . | sort)"
before=$(snapshot "$q")
for sig in INT TERM; do
  want=$((128 + $(kill -l "$sig")))
  interrupt "quantize SIG$sig" "$sig" 1 "${qargs[@]}" "${long[@]:0:4}" --out "$q/new" &&
    { [[ $rc -eq $want ]] || fail "quantize SIG$sig: exit $rc, expected $want ($(head -c 600 "$tmp/run.err"))"; }
  [[ $(snapshot "$q") == "$before" ]] || fail "quantize SIG$sig left or changed files in $q:"$'\n'"$(snapshot "$q")"
done

finish interrupt
