#!/usr/bin/env bash
# bench/cuda_sanitizer_check.sh (the device check's compute-sanitizer step)
# against a stand-in compute-sanitizer and test_cuda: which tests each tool
# is given (the failed ones from ctest's list, parametrised names cut at
# "  # GetParam()", the CLI script left out; else the quick kernel set), the
# exit status from the tools' summaries (errors or hazards: 1; clean: 0),
# the output appended to the log, and a missing tool skipped with a message.
# $1 = bench/
set -u
script="$1/cuda_sanitizer_check.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkdir -p "$tmp/build/tests" "$tmp/build/Testing/Temporary" "$tmp/bin"
# test_cuda stand-in: echoes its filter as gtest would report one test.
cat >"$tmp/build/tests/test_cuda" <<'EOF'
#!/bin/bash
echo "filter: ${1#--gtest_filter=}"
echo "[       OK ] Some.Test (1 ms)"
EOF
# compute-sanitizer stand-in: --tool T --print-limit N BINARY ARGS...
cat >"$tmp/bin/compute-sanitizer" <<'EOF'
#!/bin/bash
tool=$2
shift 4
"$@"
if [[ $tool == racecheck ]]; then
  echo "========= RACECHECK SUMMARY: ${FAKE_HAZARDS:-0} hazards displayed (${FAKE_HAZARDS:-0} errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: ${FAKE_ERRORS:-0} errors"
fi
EOF
chmod +x "$tmp/build/tests/test_cuda" "$tmp/bin/compute-sanitizer"
run() {  # log, then env assignments for the stand-ins
  local log=$1
  shift
  env COMPUTE_SANITIZER="$tmp/bin/compute-sanitizer" "$@" bash "$script" "$tmp/build" "$log" 60 >"$tmp/out" 2>&1
}

# No failed test: memcheck over the quick set, racecheck over the flash variants.
run "$tmp/clean.log" || fail "a clean run exits $?: $(cat "$tmp/out")"
grep -q '^filter: CudaQuantize\.\*:CudaPointwise\.\*:.*RaggedShapes/CudaAttention\.\*$' "$tmp/clean.log" ||
  fail "memcheck did not get the quick set: $(cat "$tmp/clean.log")"
grep -q '^filter: RaggedShapes/CudaAttention.FlashVariantsAgreeWithTheReferenceAndFloat64/\*$' "$tmp/clean.log" ||
  fail "racecheck did not get the flash variants"
grep -q 'ERROR SUMMARY: 0 errors (tests: 1 passed, 0 failed)' "$tmp/out" || fail "summary line: $(cat "$tmp/out")"

# The failed tests, as ctest lists them.
printf '%s\n' '12:CudaQuantize.EveryBf16PatternMatchesBitForBit' \
  '40:RaggedShapes/CudaAttention.ReferenceKernelIsTheCpuReference/q5_kv5_heads4x2_d64_causal  # GetParam() = 48-byte object <05-00>' \
  '188:cli.device' >"$tmp/build/Testing/Temporary/LastTestsFailed.log"
run "$tmp/failed.log" FAKE_ERRORS=3
rc=$?
((rc == 1)) || fail "memcheck errors exit $rc, not 1"
grep -qx 'filter: CudaQuantize.EveryBf16PatternMatchesBitForBit:RaggedShapes/CudaAttention.ReferenceKernelIsTheCpuReference/q5_kv5_heads4x2_d64_causal' \
  "$tmp/failed.log" || fail "memcheck did not get the failed tests: $(grep filter "$tmp/failed.log")"
grep -q 'ERROR SUMMARY: 3 errors' "$tmp/failed.log" || fail "the tool's output is not in the log"

run "$tmp/race.log" FAKE_HAZARDS=2
rc=$?
((rc == 1)) || fail "racecheck hazards exit $rc, not 1"

# No compute-sanitizer anywhere: skipped, exit 0.
env PATH=/usr/bin:/bin COMPUTE_SANITIZER="$tmp/none" bash "$script" "$tmp/build" "$tmp/none.log" 60 >"$tmp/out" 2>&1 ||
  fail "a missing tool exits $?"
grep -q 'compute-sanitizer not found: skipped' "$tmp/out" || fail "missing tool: $(cat "$tmp/out")"
echo "ok"
