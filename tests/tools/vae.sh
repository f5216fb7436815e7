#!/usr/bin/env bash
# End-to-end checks of `stepmix vae decode` and `stepmix vae encode` on the
# tiny Wan2.2 goldens: decoded pixels within the golden README §7 bound
# (5e-5 of max|pixels|), the encoder's latent and mean within 1e-5, PNG and
# MP4 outputs of the right size, --vae given a model folder, and one-line
# errors with exit code 2 for every kind of bad input. $1 = stepmix binary,
# $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
vae_golden=$data/golden/wan22-vae-tiny
vae=$vae_golden/vae

# tensor_file FILE NAME DTYPE SHAPE DATA_FILE: a one-tensor safetensors file.
tensor_file() {
  local file=$1 name=$2 dtype=$3 shape=$4 data=$5 size header len
  size=$(stat -c %s "$data")
  header="{\"$name\":{\"dtype\":\"$dtype\",\"shape\":$shape,\"data_offsets\":[0,$size]}}"
  while ((${#header} % 8)); do header+=" "; done
  len=${#header}
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' $((len & 255)) $(((len >> 8) & 255)) \
    $(((len >> 16) & 255)) $(((len >> 24) & 255)))" >"$file"
  printf '%s' "$header" >>"$file"
  cat "$data" >>"$file"
}


# within NAME ACTUAL_FILE TENSOR GOLDEN_FILE GOLDEN_TENSOR BOUND
within() {
  local name=$1
  checks=$((checks + 1))
  floats "$2" "$3" >"$tmp/actual" || { fail "$name: no tensor $3 in $2"; return; }
  floats "$4" "$5" >"$tmp/expected"
  [[ $(wc -l <"$tmp/actual") -eq $(wc -l <"$tmp/expected") ]] || { fail "$name: size differs"; return; }
  local d
  d=$(deviation "$tmp/actual" "$tmp/expected")
  awk -v d="$d" -v b="$6" 'BEGIN { exit !(d != "nan" && d + 0 <= b + 0) }' || fail "$name: deviation $d exceeds $6"
}

# ---------------------------------------------------------------- decode
for name in image video short; do
  expect_ok "decode-$name" "-> $tmp/$name.safetensors" \
    vae decode --vae "$vae" --latent "$vae_golden/decode/$name.safetensors" --out "$tmp/$name.safetensors"
  within "decode-$name" "$tmp/$name.safetensors" pixels "$vae_golden/decode/$name.safetensors" pixels 5e-5
done
header "$tmp/video.safetensors" | grep -qF '"dtype":"F32","shape":[1,3,9,64,96]' ||
  fail "decode: pixels tensor is not F32 [1, 3, 9, 64, 96]"

expect_ok decode-png "pixels [1, 3, 1, 48, 80]" \
  vae decode --vae "$vae" --latent "$vae_golden/decode/image.safetensors" -o "$tmp/image.png"
[[ $(png_size "$tmp/image.png") == 80x48 ]] || fail "decode-png: $(png_size "$tmp/image.png"), expected 80x48"
# A clip as PNG: its frames side by side.
expect_ok decode-strip "pixels [1, 3, 5, 48, 80]" \
  vae decode --vae "$vae" --latent "$vae_golden/decode/short.safetensors" --out "$tmp/strip.png"
[[ $(png_size "$tmp/strip.png") == 400x48 ]] || fail "decode-strip: $(png_size "$tmp/strip.png"), expected 400x48"
expect_ok decode-mp4 "-> $tmp/video.mp4" \
  vae decode --vae "$vae" --latent "$vae_golden/decode/video.safetensors" --out "$tmp/video.mp4" --fps 12
[[ $(od -A n -c -j 4 -N 4 "$tmp/video.mp4" | tr -d ' ') == ftyp ]] || fail "decode-mp4: not an MP4 file"
expect_ok decode-frames-dir "and $tmp/frames" \
  vae decode --vae "$vae" --latent "$vae_golden/decode/video.safetensors" --out "$tmp/video2.mp4" --frames-dir "$tmp/frames"
[[ $(ls "$tmp/frames" | grep -c '^frame_0000[0-8]\.png$') -eq 9 ]] || fail "decode-frames-dir: expected 9 frames"
[[ $(png_size "$tmp/frames/frame_00008.png") == 96x64 ]] || fail "decode-frames-dir: frame size"
expect_rejected fps-without-mp4 "--fps" "$tmp/fps.png is not one, so it would be ignored" \
  vae decode --vae "$vae" --latent "$vae_golden/decode/image.safetensors" --out "$tmp/fps.png" --fps 30
expect_rejected frames-dir-exists "$tmp/frames" "exists; expected a path that does not exist" \
  vae decode --vae "$vae" --latent "$vae_golden/decode/video.safetensors" --out "$tmp/video3.mp4" --frames-dir "$tmp/frames"
[[ ! -e $tmp/video3.mp4 ]] || fail "frames-dir-exists: the video was written anyway"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary output was left behind"

# bf16 activations: close to the float32 goldens (bound 7e-2, as in
# tests/vae/run_test.cpp), not equal to them.
expect_ok decode-bf16 "bf16 activations" \
  vae decode --vae "$vae" --latent "$vae_golden/decode/image.safetensors" --out "$tmp/bf16.safetensors" --activations bf16
within decode-bf16 "$tmp/bf16.safetensors" pixels "$vae_golden/decode/image.safetensors" pixels 7e-2
cmp -s "$tmp/bf16.safetensors" "$tmp/image.safetensors" && fail "--activations bf16 gave the float32 bytes"

# --vae may name the model folder that holds vae/.
mkdir -p "$tmp/model"
ln -s "$(cd "$vae" && pwd)" "$tmp/model/vae"
expect_ok model-folder "-> $tmp/via-model.safetensors" \
  vae decode --vae "$tmp/model" --latent "$vae_golden/decode/image.safetensors" --out "$tmp/via-model.safetensors"
cmp -s "$tmp/via-model.safetensors" "$tmp/image.safetensors" || fail "model-folder: different pixels"

# ---------------------------------------------------------------- encode
for name in image video; do
  expect_ok "encode-$name" "-> $tmp/enc-$name.safetensors" \
    vae encode --vae "$vae" --pixels "$vae_golden/encode/$name.safetensors" --out "$tmp/enc-$name.safetensors"
  within "encode-$name-latent" "$tmp/enc-$name.safetensors" latent "$vae_golden/encode/$name.safetensors" latent 1e-5
  within "encode-$name-mu" "$tmp/enc-$name.safetensors" mu "$vae_golden/encode/$name.safetensors" mu 1e-5
done
expect_ok encode-image-png "latent [1, 48, 1, 3, 5]" \
  vae encode --vae "$vae" --image "$tmp/image.png" --out "$tmp/enc-png.safetensors"

# ---------------------------------------------------------------- errors
latent=$vae_golden/decode/image.safetensors
head -c $((48 * 4)) /dev/zero >"$tmp/zeros48"
tensor_file "$tmp/bf16-latent.safetensors" latent BF16 "[1,48,2,1,1]" "$tmp/zeros48"
tensor_file "$tmp/rank4.safetensors" latent F32 "[48,1,1,1]" "$tmp/zeros48"
head -c $((47 * 4)) /dev/zero >"$tmp/zeros47"
tensor_file "$tmp/channels.safetensors" latent F32 "[1,47,1,1,1]" "$tmp/zeros47"
{ printf '\x00\x00\xc0\x7f'; head -c $((47 * 4)) /dev/zero; } >"$tmp/nan48"
tensor_file "$tmp/nan.safetensors" latent F32 "[1,48,1,1,1]" "$tmp/nan48"
head -c $((3 * 2 * 16 * 16 * 4)) /dev/zero >"$tmp/px2"
tensor_file "$tmp/two-frames.safetensors" pixels F32 "[1,3,2,16,16]" "$tmp/px2"
head -c $((3 * 32 * 24 * 4)) /dev/zero >"$tmp/px24"
tensor_file "$tmp/size24.safetensors" pixels F32 "[1,3,1,32,24]" "$tmp/px24"

out=$tmp/err.safetensors
expect_rejected bad-extension "--out $tmp/x.avi" "extension '.avi' is not supported here; expected .safetensors, .png or .mp4" \
  vae decode --vae "$vae" --latent "$latent" --out "$tmp/x.avi"
expect_rejected no-latent-tensor "$vae/diffusion_pytorch_model.safetensors" "no tensor 'latent' (expected F32 [1, 48, T, h, w])" \
  vae decode --vae "$vae" --latent "$vae/diffusion_pytorch_model.safetensors" --out "$out"
expect_rejected latent-dtype "$tmp/bf16-latent.safetensors" "tensor 'latent' is BF16, expected F32" \
  vae decode --vae "$vae" --latent "$tmp/bf16-latent.safetensors" --out "$out"
expect_rejected latent-rank "$tmp/rank4.safetensors" "expected shape [1, 48, T, h, w], got [48, 1, 1, 1]" \
  vae decode --vae "$vae" --latent "$tmp/rank4.safetensors" --out "$out"
expect_rejected latent-channels "$tmp/channels.safetensors" "got [1, 47, 1, 1, 1]" \
  vae decode --vae "$vae" --latent "$tmp/channels.safetensors" --out "$out"
expect_rejected latent-nan "$tmp/nan.safetensors" "element 0 is NaN; expected finite values" \
  vae decode --vae "$vae" --latent "$tmp/nan.safetensors" --out "$out"
expect_rejected too-big "$latent" "needs about" \
  vae decode --vae "$vae" --latent "$latent" --out "$out" --max-memory 1M
expect_rejected bad-max-memory "--max-memory" "expected a positive size such as 8G" \
  vae decode --vae "$vae" --latent "$latent" --out "$out" --max-memory lots
expect_rejected zero-max-memory "--max-memory" "expected a positive size such as 8G, 512M or 1048576, got '0.5'" \
  vae decode --vae "$vae" --latent "$latent" --out "$out" --max-memory 0.5
expect_rejected bad-activations "--activations" "expected f32 or bf16, got 'f16'" \
  vae decode --vae "$vae" --latent "$latent" --out "$out" --activations f16
expect_rejected no-vae "$tmp" "expected a vae folder" \
  vae decode --vae "$tmp" --latent "$latent" --out "$out"
mkdir -p "$tmp/bad-vae"
cp "$vae/diffusion_pytorch_model.safetensors" "$tmp/bad-vae/"
sed 's/"z_dim": 48/"z_dim": 16/' "$vae/config.json" >"$tmp/bad-vae/config.json"
expect_rejected bad-config "$tmp/bad-vae/config.json" "z_dim: expected 48" \
  vae decode --vae "$tmp/bad-vae" --latent "$latent" --out "$out"

/usr/bin/python3 - "$vae_golden/encode/image.safetensors" "$tmp/bright.safetensors" <<'PY' || fail "could not build the out-of-range pixels"
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
begin = 8 + n + json.loads(data[8:8 + n])["pixels"]["data_offsets"][0]
data[begin + 12:begin + 16] = struct.pack("<f", 2.0)  # element 3
open(sys.argv[2], "wb").write(bytes(data))
PY
expect_rejected encode-out-of-range "$tmp/bright.safetensors: tensor 'pixels'" "element 3 is 2; expected values in [-1, 1]" \
  vae encode --vae "$vae" --pixels "$tmp/bright.safetensors" --out "$out"
expect_rejected encode-frames "$tmp/two-frames.safetensors" "expected 1 + 4k frames" \
  vae encode --vae "$vae" --pixels "$tmp/two-frames.safetensors" --out "$out"
expect_rejected encode-size "$tmp/size24.safetensors" "multiples of 16, got 32x24" \
  vae encode --vae "$vae" --pixels "$tmp/size24.safetensors" --out "$out"
expect_rejected encode-not-png "$latent" "not a PNG file (no PNG signature)" \
  vae encode --vae "$vae" --image "$latent" --out "$out"
head -c 100 "$tmp/image.png" >"$tmp/truncated.png"
expect_rejected encode-truncated-png "$tmp/truncated.png" "not a valid PNG" \
  vae encode --vae "$vae" --image "$tmp/truncated.png" --out "$out"
expect_rejected encode-png-folder "$tmp" "not a regular file" vae encode --vae "$vae" --image "$tmp" --out "$out"
samples=$(dirname "$0")/../../models/fashion-cosmos3-bf16/samples.png
expect_rejected encode-png-size "$samples" "image of 604x604: expected width and height multiples of 16" \
  vae encode --vae "$vae" --image "$samples" --out "$out"
expect_rejected encode-no-input "" "give exactly one of --pixels IN.safetensors and --image IN.png" \
  vae encode --vae "$vae" --out "$out"
expect_rejected encode-both "--image" "excludes" \
  vae encode --vae "$vae" --pixels "$latent" --image "$tmp/image.png" --out "$out"
expect_rejected encode-out "--out $tmp/x.png" "extension '.png' is not supported here; expected .safetensors" \
  vae encode --vae "$vae" --image "$tmp/image.png" --out "$tmp/x.png"
[[ ! -e $out ]] || fail "a failed run left an output file"

finish vae
