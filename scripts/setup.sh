#!/usr/bin/env bash
# Installs what stepmix needs to build and test, from Debian packages only.
# Idempotent: does nothing when everything is already installed.
#   scripts/setup.sh          build + test dependencies
#   scripts/setup.sh --bench  also the benchmark peers (Debian's PyTorch, OpenBLAS, Node.js, Pillow)
#   scripts/setup.sh --fuzz   also clang and its libFuzzer/sanitizer runtimes
set -euo pipefail

# libfreetype-dev + libfontconfig-dev + fonts-dejavu-core: the labels of the
# compare plots (without a font at run time the plots have no labels);
# libonig-dev + libutf8proc-dev: the tokenizer's regex engine and NFC;
# libssl-dev: SHA-256 fingerprints of chat templates; zlib1g-dev: the
# compressed golden tokenizer in the tests; libav*-dev: H.264/MP4 video
# output and input (src/io/video.cpp); libboost-context-dev: the fibers of the
# tests' SIMT emulator, which runs the CUDA kernels on the CPU
# (tests/cuda/on_cpu/).
packages=(build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libpng-dev zlib1g-dev
  libonig-dev libutf8proc-dev libssl-dev libfreetype-dev libfontconfig-dev fonts-dejavu-core
  libavcodec-dev libavformat-dev libswscale-dev libavutil-dev libboost-context-dev)
case "${1:-}" in
  --bench)
    # python3-pil: bench/run-png-pillow.sh compares the PNG reader with Pillow.
    # bench/run-diffusers-differential.sh runs Diffusers' files on python3-torch
    # and python3-numpy (the Diffusers checkout it needs is not a package).
    packages+=(python3-torch python3-numpy python3-pil libopenblas0-openmp libbenchmark-dev)
    # bench/run-tokenizer.sh runs the JavaScript tokenizer (npm) as its peer.
    command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm) ;;
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
