#!/usr/bin/env bash
# bench/cuda-device-check.sh's steps after the build (after_build, with the
# script sourced) against stand-ins of its programs, for CUDA_CHECK_STEPS:
# unset, every step runs; a list runs those steps and the summary only; the
# cuDNN step keeps attention_bf16's default when its spot check passes, and
# without that step the choice is what the caller set; a name the script does
# not know, or a list that names none, is refused with exit 2 before anything
# runs or is written; under a tight budget the forward's steps leave the
# kernel benchmarks their time. Only which steps ran (and, there, their
# timeouts) is looked at: the stand-ins make the others fail, as they would
# without a GPU.
# $1 = bench/
set -u
script="$1/cuda-device-check.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

build="$tmp/build"
mkdir -p "$build/bench"
# bench_cuda: a passing spot check for --cudnn-attention, nothing for the rest.
cat >"$build/bench/bench_cuda" <<'EOF'
#!/bin/bash
[[ " $* " == *" --cudnn-attention "* ]] &&
  echo '{"impl": "stepmix", "bench": "check", "what": "cudnn sdpa rows 0-7 and last 8 vs reference kernel", "max_abs_error": 0.001, "pass": true, "optional": true}'
exit 0
EOF
printf '#!/bin/bash\nexit 0\n' >"$build/bench/bench_cuda_forward"
printf '#!/bin/bash\necho "no GPU here" >&2\nexit 1\n' >"$build/stepmix"
chmod +x "$build/bench/bench_cuda" "$build/bench/bench_cuda_forward" "$build/stepmix"

labels=("cuDNN attention (optional)" "ctest -L cuda" "generate on both devices" "Nano-shaped forward (stepmix)"
  "Nano-shaped forward (PyTorch peer)" "bench_cuda" "PyTorch peer" "summary" "VAE decode (stepmix and PyTorch)"
  "compute-sanitizer (memcheck, racecheck)")
# run NAME STEPS ATTENTION: after_build with CUDA_CHECK_STEPS=STEPS (unset when
# "all") and STEPMIX_CUDA_ATTENTION=ATTENTION (unset when empty); its output
# in $tmp/NAME.log.
run() {
  local name="$1" out="$tmp/$1"
  mkdir -p "$out"
  (
    unset CUDA_CHECK_STEPS STEPMIX_CUDA_ATTENTION
    [[ "$2" != all ]] && export CUDA_CHECK_STEPS="$2"
    [[ -n "$3" ]] && export STEPMIX_CUDA_ATTENTION="$3"
    export CUDA_CHECK_BUILD="$build" CUDA_CHECK_SECONDS=1000
    # shellcheck disable=SC1090
    source "$script" || exit 1
    after_build "$out" "$build/bench/bench_cuda"
  ) >"$tmp/$name.log" 2>&1
}
# ran NAME LABEL...: exactly these steps started, in this order.
ran() {
  local name="$1" want got
  shift
  want="$(printf '%s\n' "$@")"
  got="$(sed -n 's/^######## \(.*\) (timeout [0-9]*s)$/\1/p' "$tmp/$name.log")"
  [[ "$got" == "$want" ]] || fail "$name: steps run"$'\n'"$got"$'\n'"expected"$'\n'"$want"$'\n'"$(cat "$tmp/$name.log")"
  # The summary reads whatever the steps wrote (here: nothing) and succeeds.
  grep -q "^######## summary: exit 0 after" "$tmp/$name.log" || fail "$name: the summary"$'\n'"$(cat "$tmp/$name.log")"
}

run every all ""
ran every "${labels[@]}"
grep -q "^cuDNN's attention passed its spot check: the run keeps attention_bf16's default (auto)$" "$tmp/every.log" ||
  fail "every: the cuDNN gate"$'\n'"$(cat "$tmp/every.log")"
[[ -f "$tmp/every/summary.txt" ]] || fail "every: no summary.txt"

run tests tests ""
ran tests "ctest -L cuda" "summary"
grep -q "^steps after the build: tests (CUDA_CHECK_STEPS)$" "$tmp/tests.log" || fail "tests: the selection line"
grep -q "^cuDNN attention step not selected: attention_bf16's choice is STEPMIX_CUDA_ATTENTION=auto$" "$tmp/tests.log" ||
  fail "tests: the attention choice"$'\n'"$(cat "$tmp/tests.log")"

run kernels kernels,sanitizer flash
ran kernels "bench_cuda" "PyTorch peer" "summary" "compute-sanitizer (memcheck, racecheck)"
grep -q "^cuDNN attention step not selected: attention_bf16's choice is STEPMIX_CUDA_ATTENTION=flash$" \
  "$tmp/kernels.log" || fail "kernels: the attention choice"$'\n'"$(cat "$tmp/kernels.log")"

# A tight budget: the forward's steps leave 80 s to the kernel benchmarks
# (beside the summary's 15 s), which still get their own 90 s caps when the
# forward is quick.
mkdir -p "$tmp/tight"
(
  unset CUDA_CHECK_STEPS STEPMIX_CUDA_ATTENTION
  export CUDA_CHECK_BUILD="$build" CUDA_CHECK_SECONDS=200 CUDA_CHECK_STEPS=forward,kernels
  # shellcheck disable=SC1090
  source "$script" || exit 1
  after_build "$tmp/tight" "$build/bench/bench_cuda"
) >"$tmp/tight.log" 2>&1
limit() { sed -n "s/^######## $1 (timeout \([0-9]*\)s)\$/\1/p" "$tmp/tight.log"; }
forward="$(limit "Nano-shaped forward (stepmix)")"
[[ -n "$forward" ]] && ((forward + 80 + 15 <= 200 && forward >= 90)) ||
  fail "tight: the forward's timeout '$forward' does not leave 80 s"$'\n'"$(cat "$tmp/tight.log")"
[[ "$(limit "bench_cuda")" == 90 && "$(limit "PyTorch peer")" == 90 ]] ||
  fail "tight: the kernel benchmarks' timeouts"$'\n'"$(cat "$tmp/tight.log")"

# Refused before anything runs: no output folder, no build folder.
for steps in "tests,gpu" ","; do
  CUDA_CHECK_STEPS="$steps" CUDA_CHECK_BUILD="$tmp/refused-build" bash "$script" "$tmp/refused" \
    >"$tmp/refused.out" 2>"$tmp/refused.err"
  rc=$?
  [[ $rc == 2 ]] || fail "CUDA_CHECK_STEPS='$steps': exit $rc, expected 2"
  grep -q "^CUDA_CHECK_STEPS: .*(expected all, or a comma list of: cudnn tests generate forward kernels vae sanitizer)$" \
    "$tmp/refused.err" || fail "CUDA_CHECK_STEPS='$steps': $(cat "$tmp/refused.err")"
  [[ ! -e "$tmp/refused" && ! -e "$tmp/refused-build" && ! -s "$tmp/refused.out" ]] ||
    fail "CUDA_CHECK_STEPS='$steps' left something behind"
done
grep -q "unknown step 'gpu'" <(CUDA_CHECK_STEPS=tests,gpu bash "$script" "$tmp/refused" 2>&1) ||
  fail "the unknown name is not named"
echo "ok: CUDA_CHECK_STEPS selects the steps after the build; unknown or empty lists are refused"
