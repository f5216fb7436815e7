#!/usr/bin/env bash
# The optional diagnosis step of bench/cuda-device-check.sh: NVIDIA's
# compute-sanitizer over test_cuda, so that a GPU run which finds a wrong
# result also says whether a kernel read or wrote memory it does not own, or
# raced on shared memory (hazards the CPU's SIMT emulator checks only on the
# kernels' own model of the hardware).
#   1. memcheck over the CUDA tests that failed in the ctest step (read from
#      ctest's LastTestsFailed.log; the CLI script cli.device is left out), or,
#      when none failed, over a quick set of kernel tests: the quantizer, the
#      pointwise kernels, the denoising loop's kernels, the GEMM edges and the
#      attention kernels on their ragged shapes;
#   2. racecheck over the flash attention variants on those shapes (the
#      cp.async / ldmatrix pipeline through shared memory), with the time left.
# Each tool's whole output is appended to LOG; its summary lines are printed.
# A tool is given about 60% (memcheck) and the rest (racecheck) of SECONDS and
# is slow (10-100x): a run cut short by its timeout still leaves the errors it
# printed in LOG.
# Exit: 0 every run clean, 1 a tool reported errors or hazards, 2 no test
# binary, 0 with a message when compute-sanitizer is not installed.
#
# usage: bash bench/cuda_sanitizer_check.sh BUILD_DIR LOG SECONDS
#        (COMPUTE_SANITIZER names the tool when it is not on PATH or beside nvcc)
set -uo pipefail
build=$1 log=$2 seconds=$3
test_binary="$build/tests/test_cuda"
[[ -x $test_binary ]] || { echo "no $test_binary"; exit 2; }

sanitizer="${COMPUTE_SANITIZER:-}"
if [[ -z $sanitizer ]]; then
  sanitizer="$(command -v compute-sanitizer || true)"
  if [[ -z $sanitizer ]] && command -v nvcc >/dev/null; then
    sanitizer="$(dirname "$(readlink -f "$(command -v nvcc)")")/compute-sanitizer"
  fi
  [[ -x $sanitizer ]] || sanitizer=/usr/local/cuda/bin/compute-sanitizer
fi
if [[ ! -x $sanitizer ]]; then
  echo "compute-sanitizer not found: skipped"
  exit 0
fi

# ctest's names of the failed tests, as gtest filters: "NN:Suite.Name" lines,
# a parametrised test's name followed by "  # GetParam() = ...".
failed_filter() {
  local list="$build/Testing/Temporary/LastTestsFailed.log"
  [[ -f $list ]] || return 0
  sed -n 's/^[0-9]*://p' "$list" | sed 's/  #.*//' | grep -v '^cli\.' | grep '\.' | paste -sd: -
}

quick_filter='CudaQuantize.*:CudaPointwise.*:CudaDenoiseLoop.*:CudaGemmEdges.*:RaggedShapes/CudaAttention.*'
race_filter='RaggedShapes/CudaAttention.FlashVariantsAgreeWithTheReferenceAndFloat64/*'

status=0
run_tool() {  # tool, seconds, gtest filter, what
  local tool=$1 limit=$2 filter=$3 what=$4 tmp rc
  if ((limit < 10)); then
    echo "$tool: not run (${limit} s left)"
    return 0
  fi
  tmp="$(mktemp)"
  echo "$tool over $what (timeout ${limit}s)"
  timeout -k 5 "$limit" "$sanitizer" --tool "$tool" --print-limit 20 "$test_binary" --gtest_filter="$filter" \
    >"$tmp" 2>&1
  rc=$?
  { echo; echo "######## compute-sanitizer --tool $tool --gtest_filter=$filter: exit $rc"; cat "$tmp"; } >>"$log"
  # The tool's own summary: "ERROR SUMMARY: 0 errors" (memcheck),
  # "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)".
  local summary
  summary="$(grep -E '=+ (ERROR|RACECHECK) SUMMARY' "$tmp" | tail -1 | sed 's/^=* *//')"
  ((rc == 124)) && echo "  timed out: the errors printed so far are in $(basename "$log")"
  # gtest names a failed test twice (when it fails, and in the closing list).
  local passed failed
  passed="$(grep -cE '^\[ +OK +\]' "$tmp")"
  failed="$(grep -oE '^\[ +FAILED +\] [^ ]+\.[^ ]+' "$tmp" | sort -u | wc -l)"
  echo "  ${summary:-no summary line} (tests: $passed passed, $failed failed)"
  if grep -qE '=+ ERROR SUMMARY: [1-9]|=+ RACECHECK SUMMARY: [1-9]' "$tmp"; then status=1; fi
  rm -f "$tmp"
}

start=$SECONDS
filter="$(failed_filter)"
what="the tests that failed in the ctest step"
if [[ -z $filter ]]; then
  filter=$quick_filter
  what="the quick set of kernel tests (no CUDA test failed)"
fi
run_tool memcheck $((seconds * 6 / 10)) "$filter" "$what"
run_tool racecheck $((seconds - (SECONDS - start) - 5)) "$race_filter" "the flash attention variants"
exit "$status"
