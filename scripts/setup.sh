#!/usr/bin/env bash
# Installs what stepmix needs to build and test, from Debian packages only.
# Idempotent: does nothing when everything is already installed.
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --bench  also the benchmark peers (Debian's PyTorch, OpenBLAS)
set -euo pipefail

packages=(build-essential cmake nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch python3-numpy libopenblas0-openmp libbenchmark-dev)
fi

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
