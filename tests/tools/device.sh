#!/usr/bin/env bash
# `--device cuda` (and STEPMIX_DEVICE=cuda) on every command that takes it.
# Where no GPU is usable (no NVIDIA driver, no device, compute capability
# below 9.0, or a build without CUDA), each is refused with exit 2 and one
# line naming what is missing, before anything is written. Where a GPU is
# usable, a bf16 forward runs, a generation on a model with vae/ decodes its
# picture on the GPU, image-to-video encodes its picture there, `vae decode`
# and `vae encode` run there, bench reports peak GPU memory, compare writes
# its report, activations are bf16 unless --activations says otherwise, and
# float32 activations are refused with one line. The tests'
# CPU build of the CUDA backend (stepmix_on_cpu) takes the GPU branch too.
# $1 = stepmix binary, $2 = tests/data.
set -u
source "$(dirname "$0")/lib.sh" "$@"
g=$golden
case_file=$g/forward/image.safetensors
missing='--device cuda: (.*built without CUDA|no NVIDIA driver|NVIDIA driver too old|no CUDA device|device 0 .* has compute capability|cuda[A-Za-z]+: )'

# expect_missing NAME ARGS...: exit 2, one "stepmix: [cuda] --device cuda: <reason>" line, no output file.
expect_missing() {
  local name=$1
  shift
  checks=$((checks + 1))
  timeout "$STEPMIX_TEST_TIMEOUT" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [[ $rc -eq 2 ]] || { fail "$name: exit $rc, expected 2 ($(head -c 600 "$tmp/err"))"; return; }
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "$name: stderr is not one line: $(head -c 600 "$tmp/err")"
  grep -qE "^stepmix: \[cuda\] $missing" "$tmp/err" || fail "$name: stderr does not name what is missing: $(cat "$tmp/err")"
  [[ ! -e $tmp/x.safetensors && ! -e $tmp/x.png ]] || fail "$name: an output was written"
}

forward=(forward --model "$g/transformer" --inputs "$case_file" --out "$tmp/x.safetensors" --precision dense)
vae_dir=$data/golden/wan22-vae-tiny
decode=(vae decode --vae "$vae_dir/vae" --latent "$vae_dir/decode/image.safetensors" --out "$tmp/x.png")
encode=(vae encode --vae "$vae_dir/vae" --pixels "$vae_dir/encode/image.safetensors" --out "$tmp/x.safetensors")
bench=(bench --model "$g/transformer-fp8" --prompt-ids 28,93,12,95 --latent-shape 4,1,6,8 --steps 2 --repeat 1
  --warmup 0 --no-peer --device cuda --activations bf16)
printf 'ids:28,93,12,50,83,45,72,55,80,64,77,94,95\tlabel:1\n' >"$tmp/prompts.txt"
compare=(compare --model "$g/transformer-fp8" --reference "$g/transformer" --prompts "$tmp/prompts.txt" --seeds 1
  --steps 2 --latent-shape 4,1,6,8 --device cuda --activations bf16 --out "$tmp/report")
if "$bin" "${forward[@]}" --device cuda --activations bf16 >"$tmp/out" 2>"$tmp/err"; then
  # A usable GPU: the forward ran.
  echo "device: a usable GPU is present"
  checks=$((checks + 1))
  [[ -s $tmp/x.safetensors ]] || fail "the cuda forward wrote no output"
  mv "$tmp/x.safetensors" "$tmp/bf16.safetensors"
  # cuBLASLt is opened there, not linked (the CPU build of the backend,
  # STEPMIX_TEST_ON_CPU=1, runs on its model of the library instead).
  if [[ ${STEPMIX_TEST_ON_CPU:-0} != 1 ]]; then
    checks=$((checks + 1))
    LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld-gpu" "$bin" "${forward[@]}" --device cuda --activations bf16 \
      >/dev/null 2>"$tmp/err" || fail "the cuda forward under LD_DEBUG: $(cat "$tmp/err")"
    cat "$tmp"/ld-gpu.* 2>/dev/null | grep -qE "file=[^ ]*libcublasLt\.so.*dynamically loaded by" ||
      fail "the cuda forward did not open cuBLASLt with dlopen"
  fi
  # Without --activations the GPU runs bf16: the same bytes as asking for it.
  checks=$((checks + 1))
  rm -f "$tmp/x.safetensors"
  STEPMIX_DEVICE=cuda "$bin" "${forward[@]}" >/dev/null 2>"$tmp/err" || fail "the default cuda forward: $(cat "$tmp/err")"
  cmp -s "$tmp/bf16.safetensors" "$tmp/x.safetensors" || fail "the default cuda forward is not the bf16 one"
  rm -f "$tmp/x.safetensors" "$tmp/bf16.safetensors"
  expect_error f32-on-cuda "--activations f32 is CPU-only; use --activations bf16 with --device cuda" \
    "${forward[@]}" --device cuda --activations f32
  STEPMIX_DEVICE=cuda expect_error f32-on-cuda-env "--activations f32 is CPU-only" "${forward[@]}" --activations f32
  # The VAE decodes on the GPU, from the CLI and after a generation.
  checks=$((checks + 1))
  "$bin" "${decode[@]}" --device cuda --activations bf16 >"$tmp/out" 2>"$tmp/err" || fail "vae decode on cuda: $(cat "$tmp/err")"
  grep -q "bf16 activations, on the GPU)" "$tmp/out" || fail "vae decode on cuda: $(cat "$tmp/out")"
  [[ -s $tmp/x.png ]] || fail "vae decode on cuda wrote no picture"
  rm -f "$tmp/x.png"
  expect_error vae-f32-on-cuda "--activations f32 is CPU-only" "${decode[@]}" --device cuda --activations f32
  checks=$((checks + 1))
  "$bin" "${decode[@]}" --device cuda >"$tmp/out" 2>"$tmp/err" || fail "vae decode on cuda, default dtype: $(cat "$tmp/err")"
  grep -q "bf16 activations, on the GPU)" "$tmp/out" || fail "vae decode on cuda, default dtype: $(cat "$tmp/out")"
  rm -f "$tmp/x.png"
  checks=$((checks + 1))
  "$bin" "${encode[@]}" --device cuda --activations bf16 >"$tmp/out" 2>"$tmp/err" || fail "vae encode on cuda: $(cat "$tmp/err")"
  grep -q "bf16 activations, on the GPU)" "$tmp/out" || fail "vae encode on cuda: $(cat "$tmp/out")"
  [[ -s $tmp/x.safetensors ]] || fail "vae encode on cuda wrote no latent"
  rm -f "$tmp/x.safetensors"
  checks=$((checks + 1))
  "$bin" generate --model "$data/vae-model" --prompt-ids 5,9,13 --steps 2 --height 32 --width 48 --frames 1 \
    --out "$tmp/x.png" --device cuda --activations bf16 >"$tmp/out" 2>"$tmp/err" || fail "generate with vae/ on cuda: $(cat "$tmp/err")"
  [[ -s $tmp/x.png ]] || fail "generate with vae/ on cuda wrote no picture"
  # Image-to-video on the GPU: that picture (already 48x32, so no FFmpeg is
  # needed to fit it) is encoded there and conditions frame 0.
  i2v=(generate --model "$data/vae-model" --prompt-ids 5,9,13 --steps 2 --height 32 --width 48 --frames 5
    --device cuda --activations bf16)
  checks=$((checks + 1))
  "$bin" "${i2v[@]}" --image "$tmp/x.png" --frames-dir "$tmp/i2v" --save-latents "$tmp/i2v.safetensors" \
    >"$tmp/out" 2>"$tmp/err" || fail "image-to-video on cuda: $(cat "$tmp/err")"
  [[ -s $tmp/i2v/frame_00004.png && ! -e $tmp/i2v/frame_00005.png ]] || fail "image-to-video on cuda: not 5 frames"
  "$bin" "${i2v[@]}" --save-latents "$tmp/t2v.safetensors" >"$tmp/out" 2>"$tmp/err" ||
    fail "text-to-video on cuda: $(cat "$tmp/err")"
  cmp -s "$tmp/i2v.safetensors" "$tmp/t2v.safetensors" && fail "image-to-video on cuda: the picture changed nothing"
  rm -rf "$tmp/x.png" "$tmp/i2v" "$tmp/i2v.safetensors" "$tmp/t2v.safetensors"
  # bench reports the peak GPU memory of each mode; compare writes its report.
  checks=$((checks + 1))
  "$bin" "${bench[@]}" >"$tmp/out" 2>"$tmp/err" || fail "bench on cuda: $(cat "$tmp/err")"
  grep -qE "^peak GPU memory: w8a16 .* w8a8 .* mixed " "$tmp/out" || fail "bench on cuda: no peak GPU memory: $(cat "$tmp/out")"
  grep -q "  device cuda$" "$tmp/out" || fail "bench on cuda: the header does not name the device: $(head -1 "$tmp/out")"
  # Its PyTorch peer runs on the CPU: no GPU-against-CPU ratio, said, or refused when asked for.
  checks=$((checks + 1))
  bench_with_peer=()
  for arg in "${bench[@]}"; do [[ $arg == --no-peer ]] || bench_with_peer+=("$arg"); done
  "$bin" "${bench_with_peer[@]}" >"$tmp/out" 2>"$tmp/err" || fail "bench on cuda with its peer: $(cat "$tmp/err")"
  grep -q "^peer: not run: skipped on --device cuda (the PyTorch peer runs on the CPU" "$tmp/out" ||
    fail "bench on cuda ran its CPU peer: $(cat "$tmp/out")"
  ! grep -q "speed-up over the peer" "$tmp/out" || fail "bench on cuda printed a ratio to a CPU peer"
  expect_error bench-cuda-peer-script "--peer-script: the PyTorch peer of bench runs on the CPU" \
    "${bench_with_peer[@]}" --peer-script "$tmp/peer.py"
  expect_error bench-cuda-peer-threads "--peer-threads: the PyTorch peer of bench runs on the CPU" \
    "${bench_with_peer[@]}" --peer-threads 4
  checks=$((checks + 1))
  "$bin" "${compare[@]}" >"$tmp/out" 2>"$tmp/err" || fail "compare on cuda: $(cat "$tmp/err")"
  [[ -s $tmp/report/report.json && -s $tmp/report/grid.png ]] || fail "compare on cuda wrote no report"
  rm -rf "$tmp/report"
elif ! grep -qE "^stepmix: \[cuda\] $missing" "$tmp/err"; then
  # A GPU whose forward failed for another reason: say so, not "no GPU".
  checks=$((checks + 1))
  fail "the cuda forward failed, and not for want of a GPU: $(head -c 600 "$tmp/err")"
else
  echo "device: no usable GPU: $(cat "$tmp/err")"
  expect_missing forward "$bin" "${forward[@]}" --device cuda --activations bf16
  expect_missing forward-f32 "$bin" "${forward[@]}" --device cuda
  expect_missing forward-env env STEPMIX_DEVICE=cuda "$bin" "${forward[@]}"
  expect_missing generate "$bin" generate --model "$g/transformer-fp8" --prompt-ids 28,93,12,95 --latent-shape 4,1,6,8 \
    --steps 2 --save-latents "$tmp/x.safetensors" --device cuda --activations bf16
  expect_missing bench "$bin" "${bench[@]}"
  expect_missing compare "$bin" "${compare[@]}"
  [[ ! -e $tmp/report ]] || fail "compare: a report folder was written"
  expect_missing vae-decode "$bin" "${decode[@]}" --device cuda --activations bf16
  expect_missing vae-decode-env env STEPMIX_DEVICE=cuda "$bin" "${decode[@]}" --activations bf16
  expect_missing vae-encode "$bin" "${encode[@]}" --device cuda --activations bf16
  expect_missing generate-vae "$bin" generate --model "$data/vae-model" --prompt-ids 5,9,13 --steps 2 --height 32 \
    --width 48 --frames 1 --out "$tmp/x.png" --device cuda --activations bf16
fi
# A malformed STEPMIX_THREADS is refused on every device (a GPU run starts no
# CPU thread pool, and used to ignore it).
STEPMIX_THREADS=0 expect_error threads-cuda "STEPMIX_THREADS must be an integer in [1, 1024], got '0'" \
  "${forward[@]}" --device cuda
STEPMIX_THREADS=-5 expect_error threads-cuda-vae "STEPMIX_THREADS must be an integer in [1, 1024], got '-5'" \
  "${decode[@]}" --device cuda
# quantize calibrates on the CPU only: a device in the environment is refused.
STEPMIX_DEVICE=cuda expect_error quantize-env "STEPMIX_DEVICE=cuda: quantize calibrates on the CPU only" \
  quantize --model "$g/transformer" --out "$tmp/q"
[[ ! -e $tmp/q ]] || fail "quantize-env: wrote $tmp/q"
# The CPU stays the default, and --device says what it accepts.
"$bin" "${forward[@]}" >/dev/null 2>"$tmp/err" || fail "default device: $(cat "$tmp/err")"
# A CPU run maps no CUDA library (the runtime is linked statically, cuBLASLt
# opened at the first GPU GEMM): the dynamic loader's log names every file it
# maps.
checks=$((checks + 1))
LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld-cpu" "$bin" "${forward[@]}" --device cpu >/dev/null 2>"$tmp/err" ||
  fail "forward --device cpu: $(cat "$tmp/err")"
cat "$tmp"/ld-cpu.* >"$tmp/ld-cpu" 2>/dev/null
grep -q "file=libc\.so" "$tmp/ld-cpu" || fail "LD_DEBUG=files logged nothing: $(head -c 300 "$tmp/ld-cpu")"
! grep -qE "file=[^ ]*lib(cublas|cudart|cuda\.so)" "$tmp/ld-cpu" ||
  fail "a CPU run loaded CUDA libraries: $(grep -E "file=[^ ]*lib(cublas|cudart|cuda\.so)" "$tmp/ld-cpu" | head -3)"
expect_error bad-device "--device: expected cpu or cuda, got 'tpu'" "${forward[@]}" --device tpu

finish device
