#!/usr/bin/env bash
# The VAE step of bench/cuda-device-check.sh: the Wan2.2 decoder on the GPU,
# stepmix (bench_vae --device cuda, bf16) against the PyTorch eager peer
# (bench/peer_vae.py time --device cuda --dtype bf16: F.conv3d, cuDNN) on the
# same seeded random weights of the real layout (peer_vae.py make: 705 M
# parameters with the encoder) and the same latent, 2 latent frames of
# 44 × 80 (5 frames of 704 × 1280, the 720p size). Three decodes each, one
# JSON line per side, then the ratio of the medians. The weights are made
# once under BUILD_DIR.
#
# usage: bash bench/cuda_vae_check.sh BUILD_DIR
# (CUDA_CHECK_VAE_DEVICE=cpu runs both sides on the CPU: a dry run on a
# machine without a GPU; give it a small CUDA_CHECK_VAE_LATENT, e.g. "2 4 4".)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# python3 with the library path the caller names (the device check's own
# LD_LIBRARY_PATH leads to Debian libraries meant for stepmix only).
py() { env LD_LIBRARY_PATH="${CUDA_CHECK_PEER_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" python3 "$@"; }
build=$1
device="${CUDA_CHECK_VAE_DEVICE:-cuda}"
read -r frames height width <<<"${CUDA_CHECK_VAE_LATENT:-2 44 80}"
dir="$build/vae-wan22"
latent="$build/vae-latent-$frames-$height-$width.safetensors"
if [[ ! -f $dir/config.json ]]; then
  py "$here/peer_vae.py" make --dir "$dir.partial"
  rm -rf "$dir" && mv "$dir.partial" "$dir"
fi
[[ -f $latent ]] || py "$here/peer_vae.py" latent --out "$latent" --frames "$frames" --height "$height" --width "$width"
ours=$("$build/bench/bench_vae" --vae "$dir" --latent "$latent" --repeats 3 --activations bf16 --device "$device")
echo "stepmix: $ours"
peer=$(py "$here/peer_vae.py" time --dir "$dir" --latent "$latent" --repeats 3 --dtype bf16 --device "$device" \
  --threads "$(nproc)")
echo "pytorch: $peer"
py - "$ours" "$peer" <<'PY'
import json, statistics, sys
ours, peer = (json.loads(a) for a in sys.argv[1:])
a, b = statistics.median(ours["ms"]), statistics.median(peer["ms"])
print(f"vae decode {ours['shape']} on {ours['device']}: stepmix {a:.1f} ms, PyTorch {b:.1f} ms "
      f"(median of {len(ours['ms'])}; first calls {ours['ms'][0]:.1f} / {peer['ms'][0]:.1f} ms): "
      f"{b / a:.2f}x the peer; peak GPU memory {ours['peak_gpu_mib']:.0f} MiB "
      f"/ {peer.get('peak_gpu_bytes', 0) / 2**20:.0f} MiB")
PY
