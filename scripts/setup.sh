#!/usr/bin/env bash
# Installs what stepmix needs to build and test, from Debian packages only.
# Idempotent: does nothing when everything is already installed.
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --bench  also the benchmark peers (Debian's PyTorch, OpenBLAS)
#   scripts/setup.sh --fuzz   also clang and its libFuzzer/sanitizer runtimes
set -euo pipefail

packages=(build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libpng-dev
  libavcodec-dev libavformat-dev libswscale-dev libavutil-dev)
case "${1:-}" in
  --bench) packages+=(python3-torch python3-numpy libopenblas0-openmp libbenchmark-dev) ;;
  --fuzz) packages+=(clang libclang-rt-14-dev) ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
