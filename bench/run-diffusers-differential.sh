#!/usr/bin/env bash
# Diffusers differential: stepmix against Diffusers' own source, executed from a
# Diffusers checkout with only its imports stood in for (bench/diffusers_reference.py,
# training/diffusers_schedulers.py), in float32, on seeded random configurations
# and fixed probes of three parts:
#   scheduler    UniPC and FlowMatch Euler (bench/diffusers_scheduler_part.py):
#                schedules and FlowMatch latents bit for bit, UniPC latents within
#                2e-5 of their size or no farther than Diffusers from its float64 run;
#   transformer  Cosmos3 forward, dense, f32 activations (bench/diffusers_transformer_part.py):
#                velocity within 5e-5 (the goldens' dense bound);
#   vae          Wan2.2 VAE decode and encode (bench/diffusers_vae_part.py): pixels
#                within 5e-5, mu and latent within 1e-5; networks with a layer under
#                4 channels within 5e-3 (float32 summation order, stated there).
# A refusal counts as by design only when its text is on the part's list and, where
# the refusal rests on Diffusers' behaviour, Diffusers' own run shows it; any other
# refusal, any disagreement past the tolerance or a case only Diffusers fails on
# fails the run (exit status 1); a broken setup (no Diffusers checkout, no torch) is
# exit status 2 (bench/diffusers_differential.py). A check, not a measurement:
# about 5 minutes on 2 cores with the defaults, the build aside.
#
# usage: bench/run-diffusers-differential.sh --diffusers DIR [--part scheduler|transformer|vae|all]
#                                            [--seed N] [--cases N] [--json FILE]
# DIR (or $DIFFUSERS_SRC) is a clone of huggingface/diffusers, ideally at the goldens'
# commit 58eb52c0803ea9af3abec60841c2a093bdf1f951. --cases: random configurations per
# part (default: scheduler 5000, transformer 1000, vae 160). The stepmix binary is
# $STEPMIX_BIN, else target stepmix built in ${STEPMIX_BENCH_BUILD:-build-bench}, where
# target bench_scheduler_replay is built too and the cases' files go
# (diffusers-differential/). Needs Debian's PyTorch, NumPy and Pillow for /usr/bin/python3
# (scripts/setup.sh --bench).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${STEPMIX_BENCH_BUILD:-$root/build-bench}"
diffusers="${DIFFUSERS_SRC:-}"
part=all
options=()
json="$here/results/diffusers-differential.json"
usage="usage: bench/run-diffusers-differential.sh --diffusers DIR [--part scheduler|transformer|vae|all] [--seed N] [--cases N] [--json FILE]"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --diffusers) diffusers="$2"; shift 2 ;;
    --part) part="$2"; shift 2 ;;
    --seed|--cases) options+=("$1" "$2"); shift 2 ;;
    --json) json="$2"; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
if [[ -z "$diffusers" ]]; then
  echo "$usage" >&2
  echo "(a Diffusers checkout: git clone https://github.com/huggingface/diffusers)" >&2
  exit 2
fi

targets=()
[[ -z "${STEPMIX_BIN:-}" ]] && targets+=(stepmix)
[[ "$part" == all || "$part" == scheduler ]] && targets+=(bench_scheduler_replay)
if ((${#targets[@]})); then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTEPMIX_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target "${targets[@]}" -j2 >/dev/null
fi
stepmix="${STEPMIX_BIN:-$build/stepmix}"

echo "stepmix: $stepmix; reference: Diffusers in $diffusers on $(/usr/bin/python3 --version 2>&1)" >&2
/usr/bin/python3 "$here/diffusers_differential.py" --diffusers "$diffusers" --stepmix "$stepmix" \
  --replay "$build/bench/bench_scheduler_replay" --work "$build/diffusers-differential" \
  --part "$part" --json "$json" "${options[@]}"
