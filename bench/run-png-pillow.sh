#!/usr/bin/env bash
# PNG reader differential: stepmix's read_png_rgb (the conditioning image's
# reader) against Pillow's Image.open(f).convert("RGB"), the reference
# pipeline's, on ~540 seeded PNG files written chunk by chunk (every colour type
# and bit depth, plain and Adam7, all filter types, tRNS, gAMA/cHRM/sRGB/iCCP/
# sBIT/bKGD, split IDAT, a PLTE in RGB, indices past a short palette), compared
# byte for byte. 16-bit gray without alpha is refused by design (Pillow clips
# those samples at 255), and counts as such only while Pillow still clips them
# on the same file; any mismatch or other refusal fails the run (exit status 1),
# a broken setup (e.g. no Pillow) is exit status 2 (bench/png_pillow_check.py).
# A check, not a measurement: about 0.6 s on 2 cores, the build aside.
#
# usage: bench/run-png-pillow.sh [--json FILE]
# The harness is $STEPMIX_PNG_READER, else target bench_png_reader built in
# ${STEPMIX_BENCH_BUILD:-build-bench}, where the PNG files go too (png-pillow/).
# Needs Debian's Pillow and NumPy for /usr/bin/python3 (scripts/setup.sh --bench).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
json="$here/results/png-pillow.json"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json="$2"; shift 2 ;;
    *) echo "usage: bench/run-png-pillow.sh [--json FILE]" >&2; exit 2 ;;
  esac
done

if [[ -n "${STEPMIX_PNG_READER:-}" ]]; then
  reader="$STEPMIX_PNG_READER"
else
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target bench_png_reader -j2 >/dev/null
  reader="$build/bench/bench_png_reader"
fi

echo "stepmix: $reader; reference: Pillow on $(/usr/bin/python3 --version 2>&1)" >&2
/usr/bin/python3 "$here/png_pillow_check.py" --reader "$reader" --work "$build/png-pillow" --json "$json"
