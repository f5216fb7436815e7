#!/usr/bin/env bash
# `stepmix generate` on a model with vae/ (tests/data/vae-model: a seeded
# 48-channel transformer beside the tiny Wan2.2 VAE): a video to MP4 and a
# PNG frame folder in one run, the frames equal to `stepmix vae decode` of
# the saved latent, an image to PNG, image-to-video from a PNG, --no-decode,
# FFmpeg loaded by MP4 runs only, and one-line errors (exit 2, nothing written) for requests that cannot
# work. $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
model=$data/vae-model
run=(generate --model "$model" --prompt-ids 5,9,13 --guidance 1 --steps 2 --height 32 --width 48)

expect_ok video "video: $tmp/clip.mp4" \
  "${run[@]}" --frames 5 --fps 12 --out "$tmp/clip.mp4" --frames-dir "$tmp/frames" --save-latents "$tmp/latent.safetensors"
[[ $(od -A n -c -j 4 -N 4 "$tmp/clip.mp4" | tr -d ' ') == ftyp ]] || fail "video: not an MP4 file"
[[ $(ls "$tmp/frames" | grep -c '^frame_0000[0-4]\.png$') -eq 5 ]] || fail "video: expected 5 frames in $tmp/frames"
[[ $(png_size "$tmp/frames/frame_00004.png") == 48x32 ]] || fail "video: frame size $(png_size "$tmp/frames/frame_00004.png")"
# The frames are the VAE's decode of the latent saved beside them.
expect_ok decode-again "and $tmp/again" \
  vae decode --vae "$model" --latent "$tmp/latent.safetensors" --out "$tmp/again.png" --frames-dir "$tmp/again"
for i in 0 1 2 3 4; do
  cmp -s "$tmp/frames/frame_0000$i.png" "$tmp/again/frame_0000$i.png" || fail "decode-again: frame $i differs"
done

expect_ok image "image: $tmp/image.png" "${run[@]}" --frames 1 --out "$tmp/image.png"
[[ $(png_size "$tmp/image.png") == 48x32 ]] || fail "image: $(png_size "$tmp/image.png"), expected 48x32"

# Image-to-video from one of the frames (a 48x32 PNG).
expect_ok image-to-video "video: $tmp/i2v.mp4" \
  "${run[@]}" --frames 5 --fps 12 --image "$tmp/frames/frame_00002.png" --out "$tmp/i2v.mp4" --save-latents "$tmp/i2v.safetensors"
cmp -s "$tmp/i2v.safetensors" "$tmp/latent.safetensors" && fail "image-to-video: the image changed nothing"

expect_ok json '"video": "'"$tmp/j.mp4"'"' "${run[@]}" --frames 5 --out "$tmp/j.mp4" --frames-dir "$tmp/j" --json
grep -qF '"frames_dir": "'"$tmp/j2"'"' <<<"$(timeout "$STEPMIX_TEST_TIMEOUT" "$bin" "${run[@]}" --frames 5 --frames-dir "$tmp/j2" --json)" ||
  fail "json: no frames_dir in the outputs"
# No scheduler file: UniPC with the flow shift of the request's mode, 10 for
# a video (2 frames or more, even one latent frame), 3 for an image.
for case in "5 10.0" "3 10.0" "1 3.0"; do
  read -r frames shift <<<"$case"
  grep -qF '"flow_shift": '"$shift" <<<"$(timeout "$STEPMIX_TEST_TIMEOUT" "$bin" "${run[@]}" --frames "$frames" \
    --no-decode --save-latents "$tmp/shift$frames.safetensors" --json)" ||
    fail "flow_shift: --frames $frames did not sample with $shift"
done
expect_ok no-decode "latents: $tmp/only.safetensors" "${run[@]}" --frames 5 --fps 12 --no-decode --save-latents "$tmp/only.safetensors"
cmp -s "$tmp/only.safetensors" "$tmp/latent.safetensors" || fail "no-decode: another latent than the decoding run's"

# FFmpeg's libraries are opened at the first video (src/io/ffmpeg_library.hpp):
# a run with PNG outputs never loads them, an MP4 run does (the loader's
# LD_DEBUG=files lines name every library it maps).
ffmpeg_loads() {
  LD_DEBUG=files timeout "$STEPMIX_TEST_TIMEOUT" "$bin" "$@" 2>&1 >/dev/null | grep -c 'file=libavcodec\.so'
}
[[ $(ffmpeg_loads "${run[@]}" --frames 1 --out "$tmp/lazy.png") -eq 0 ]] || fail "lazy: a PNG run loaded libavcodec"
[[ $(ffmpeg_loads "${run[@]}" --frames 5 --out "$tmp/lazy.mp4") -gt 0 ]] || fail "lazy: an MP4 run did not load libavcodec"
[[ -s $tmp/lazy.mp4 && -s $tmp/lazy.png ]] || fail "lazy: the runs did not write their outputs"
# Nor does an output refused for its extension (the error lists .mp4 without opening FFmpeg).
[[ $(ffmpeg_loads "${run[@]}" --frames 5 --out "$tmp/lazy.avi") -eq 0 ]] || fail "lazy: a refused .avi loaded libavcodec"

# ---------------------------------------------------------------- errors
expect_rejected no-decode-out "--no-decode" "give --save-latents FILE instead of --out/--frames-dir" \
  "${run[@]}" --no-decode --out "$tmp/x.png" --save-latents "$tmp/x.safetensors"
expect_rejected no-decode-alone "--no-decode" "give --save-latents FILE" "${run[@]}" --no-decode
expect_rejected image-not-png "$model/transformer/config.json" "" \
  "${run[@]}" --frames 5 --image "$model/transformer/config.json" --out "$tmp/x.mp4"
expect_rejected image-of-an-image "--image" "image-to-video needs a video of 5 or more frames" \
  "${run[@]}" --frames 1 --image "$tmp/image.png" --out "$tmp/x.png"
expect_rejected bad-extension "$tmp/x.avi" "extension '.avi' is not supported here; expected .png, .mp4 or .safetensors" \
  "${run[@]}" --frames 5 --out "$tmp/x.avi"
expect_rejected frames-dir-exists "$tmp/frames" "exists" "${run[@]}" --frames 5 --frames-dir "$tmp/frames" --out "$tmp/x.mp4"
expect_rejected video-without-vae "--out $tmp/x.mp4" "video is decoded by the model's vae/" \
  generate --model "$golden/transformer" --prompt-ids 28,93,94,95 --guidance 1 --latent-shape 4,2,4,4 --steps 1 --out "$tmp/x.mp4"
for f in x.png x.mp4 x.safetensors x.avi; do [[ ! -e $tmp/$f ]] || fail "$f was written by a refused run"; done
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary output was left behind"

finish generate_vae
