# Helpers shared by the CLI test scripts in tests/tools/ (sourced, never run
# on its own; tests/CMakeLists.txt registers every tests/tools/*.sh except
# this one as ctest cli.<name>). A script starts with
#
#   source "$(dirname "$0")/lib.sh" "$@"
#
# which sets
#   bin      the stepmix binary ($1)
#   data     tests/data ($2)
#   golden   tests/data/golden/cosmos3-tiny
#   tmp      a fresh temporary folder, removed when the script exits
#   checks   the number of expect_ok / expect_rejected / expect_error calls so far
#   failures the number of failed checks so far
# and defines the safetensors helpers header, floats and deviation (below).
# It ends with `finish NAME`, which prints the summary and sets the exit code.
# shellcheck shell=bash

if [[ $# -lt 2 ]]; then
  echo "usage: $0 STEPMIX_BINARY TESTS_DATA_DIR" >&2
  exit 2
fi
bin=$1
data=$2
golden=$data/golden/cosmos3-tiny
# The embedded models (pixel-space: their latents are pictures).
models=$(cd "$data/../../models" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checks=0
failures=0
# Seconds one stepmix command may take before it counts as hung (sanitizer
# builds are several times slower than release).
: "${STEPMIX_TEST_TIMEOUT:=300}"

# png_size FILE: "WIDTHxHEIGHT" from the IHDR chunk.
png_size() {
  local w h
  w=$(od -A n -t u1 -j 16 -N 4 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')
  h=$(od -A n -t u1 -j 20 -N 4 "$1" | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')
  echo "${w}x${h}"
}

# fail MESSAGE...: records one failed check.
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect_ok NAME EXPECTED_SUBSTRING ARGS...: stepmix ARGS exits 0 and its
# stdout contains EXPECTED_SUBSTRING.
expect_ok() {
  local name=$1 want=$2
  shift 2
  checks=$((checks + 1))
  local out rc
  out=$(timeout "$STEPMIX_TEST_TIMEOUT" "$bin" "$@" 2>"$tmp/err")
  rc=$?
  [[ $rc -eq 0 ]] || fail "$name: exit $rc ($(head -c 600 "$tmp/err"))"
  grep -qF -- "$want" <<<"$out" || fail "$name: output lacks '$want'"$'\n'"$out"
}

# expect_rejected NAME WHERE PROBLEM ARGS...: stepmix ARGS exits 2 with
# exactly one line on stderr, starting with "stepmix: " and containing both
# WHERE (the file, folder or option) and PROBLEM. Either may be empty.
expect_rejected() {
  local name=$1 where=$2 problem=$3
  shift 3
  checks=$((checks + 1))
  timeout "$STEPMIX_TEST_TIMEOUT" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then
    fail "$name: exit $rc, expected 2 ($(head -c 600 "$tmp/err"))"
    return
  fi
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "$name: stderr is not one line: $(head -c 600 "$tmp/err")"
  grep -q '^stepmix: ' "$tmp/err" || fail "$name: stderr lacks the 'stepmix: ' prefix: $(head -c 600 "$tmp/err")"
  grep -qF -- "$where" "$tmp/err" || fail "$name: stderr does not name '$where': $(head -c 600 "$tmp/err")"
  grep -qF -- "$problem" "$tmp/err" || fail "$name: stderr does not say '$problem': $(head -c 600 "$tmp/err")"
}

# expect_error NAME EXPECTED_SUBSTRING ARGS...: exit 2 and one "stepmix: "
# line on stderr containing EXPECTED_SUBSTRING (may be empty).
expect_error() {
  local name=$1 want=$2
  shift 2
  expect_rejected "$name" "" "$want" "$@"
}

# header FILE: the JSON header of a safetensors file.
header() {
  local n
  n=$(od -A n -t u8 -N 8 "$1" | tr -d ' ')
  head -c $((8 + n)) "$1" | tail -c "$n"
}

# floats FILE TENSOR: the F32 values of one tensor, one per line.
floats() {
  local n entry begin end
  n=$(od -A n -t u8 -N 8 "$1" | tr -d ' ')
  entry=$(header "$1" | grep -o "\"$2\":{[^}]*}")
  [[ -n $entry ]] || return 1
  begin=$(sed -E 's/.*"data_offsets":\[([0-9]+),([0-9]+)\].*/\1/' <<<"$entry")
  end=$(sed -E 's/.*"data_offsets":\[([0-9]+),([0-9]+)\].*/\2/' <<<"$entry")
  od -A n -v -t f4 -j $((8 + n + begin)) -N $((end - begin)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}

# deviation ACTUAL EXPECTED: max|a - g| / max|g| over two value lists.
deviation() {
  paste "$1" "$2" | awk '
    { d = $1 - $2; if (d < 0) d = -d; g = $2 < 0 ? -$2 : $2
      if (d > md) md = d; if (g > mg) mg = g; n++ }
    END { if (n == 0 || mg == 0) print "nan"; else printf "%.3e\n", md / mg }'
}

# finish NAME: prints "NAME: C check(s), F failure(s)" and exits 0 only when
# none failed.
finish() {
  echo "$1: $checks check(s), $failures failure(s)"
  [[ $failures -eq 0 ]]
  exit
}
