#!/usr/bin/env bash
# One-shot check of the "amx" GEMM variant on a machine with AMX, which may
# lack the project's build dependencies (needs only g++ with -mamx-tile):
#   1. builds bench/amx_check.cpp with the core + kernels sources, each with
#      the per-file flags the CMake build gives it (top-level CMakeLists.txt,
#      stepmix_module);
#   2. correctness of every supported variant against "ref", and of "amx"
#      under several blockings (all threads);
#   3. GFLOP/s of avx512 vs amx (all threads), a blocking sweep of amx, and
#      avx512 vs amx on 1 thread (shapes up to 30 GFLOP per call);
#   4. if PyTorch imports, bench/torch_linear.py's bf16 F.linear on the same
#      shapes with the same thread counts.
# Everything goes to stdout, and to $OUT/amx-check.log when $OUT is set.
# Exit code: 0 when every check passed (timings are not checks), else 1.
# Bounded to about 6 minutes: AMX_CHECK_SECONDS (default 360) is the budget
# of the whole run, build included; each step also has its own timeout.
#
# usage: bash bench/amx-device-check.sh           (from the repository root)
# env:   CXX (default g++), AMX_CHECK_BUILD (default build-amx-check),
#        AMX_CHECK_CXXFLAGS (extra flags, e.g. -DSTEPMIX_AMX_EMULATE to test
#        the AMX code paths on a CPU without AMX), AMX_CHECK_QUICK=1 (small
#        shapes, for a slow machine), STEPMIX_THREADS (all-threads runs).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
build="${AMX_CHECK_BUILD:-$root/build-amx-check}"
cxx="${CXX:-g++}"
quick=()
[[ "${AMX_CHECK_QUICK:-0}" == 1 ]] && quick=(--quick)

main() {
  local status=0
  echo "== amx device check: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -srm), $(nproc) CPUs"
  if command -v lscpu >/dev/null; then
    lscpu | grep -E '^(Model name|Socket|Core|Thread|L1d|L2|L3|NUMA node\(s\))' || true
    echo "amx/avx512 cpu flags: $(grep -m1 -o -E '\b(amx_[a-z0-9]+|avx512_bf16|avx512_fp16|avx512_?vbmi)\b' /proc/cpuinfo |
      sort -u | tr '\n' ' ')"
  fi
  echo "compiler: $("$cxx" --version | head -1)"

  # ------------------------------------------------------------ build
  # Per-file flags as in CMakeLists.txt (Release: -O3 -DNDEBUG).
  local common=(-O3 -DNDEBUG -std=c++20 -I"$root/include" -I"$root/src" -I"$root/tests/support" '-DSTEPMIX_VERSION="0.1.0"'
    -Wall -Wextra -Wno-unused-parameter -pthread)
  # shellcheck disable=SC2206
  local extra=(${AMX_CHECK_CXXFLAGS:-})
  local avx512=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c)
  local amx=("${avx512[@]}" -mamx-tile -mamx-bf16)
  # Every file of src/kernels (all families share the registry) and the
  # GEMM operands of tests/support.
  local plain_sources=(src/core/cpu_features.cpp src/core/dtype.cpp src/core/numerics.cpp src/core/tensor.cpp
    src/core/thread_pool.cpp src/core/runtime_words.cpp src/kernels/dispatch.cpp src/kernels/ref_table.cpp
    src/kernels/attention.cpp src/kernels/pointwise.cpp src/kernels/ref/linear_ref.cpp
    src/kernels/ref/attention_ref.cpp src/kernels/ref/attention_blocked.cpp src/kernels/ref/pointwise_ref.cpp
    src/kernels/cpu/avx512_table.cpp src/kernels/cpu/amx_table.cpp tests/support/gemm_problem.cpp bench/amx_check.cpp)
  local avx512_sources=(src/kernels/cpu/gemm_avx512.cpp src/kernels/cpu/gemm_columns_avx512.cpp
    src/kernels/cpu/quantize_avx512.cpp src/kernels/cpu/attention_avx512.cpp src/kernels/cpu/attention_bf16_avx512.cpp
    src/kernels/cpu/pointwise_avx512.cpp)
  local amx_sources=(src/kernels/cpu/gemm_amx.cpp)
  mkdir -p "$build"
  local t0=$SECONDS pids=() objects=() src obj
  compile() {  # source, flags...
    local source="$1"
    shift
    obj="$build/$(echo "$source" | tr '/' '_').o"
    objects+=("$obj")
    echo "  $cxx ${common[*]} ${extra[*]} $* -c $source"
    (cd "$root" && timeout 240 "$cxx" "${common[@]}" "${extra[@]}" "$@" -c "$source" -o "$obj") &
    pids+=($!)
  }
  echo "building $build/amx_check:"
  for src in "${plain_sources[@]}"; do compile "$src"; done
  for src in "${avx512_sources[@]}"; do compile "$src" "${avx512[@]}"; done
  for src in "${amx_sources[@]}"; do compile "$src" "${amx[@]}"; done
  local failed=0 pid
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if ((failed)); then
    echo "BUILD FAILED"
    return 1
  fi
  echo "  $cxx ${objects[*]} -pthread -o $build/amx_check"
  "$cxx" "${objects[@]}" -pthread -o "$build/amx_check" || { echo "LINK FAILED"; return 1; }
  echo "built in $((SECONDS - t0)) s"

  # ------------------------------------------------------------ runs
  local check="$build/amx_check"
  # Each step gets its own timeout, cut to what is left of the whole run's
  # budget (checks first, so an overrun only loses later timings).
  local deadline=$((${AMX_CHECK_SECONDS:-360}))
  step() {  # timeout, label, command...
    local limit="$1" label="$2" rc
    shift 2
    echo
    if ((deadline - SECONDS < limit)); then limit=$((deadline - SECONDS)); fi
    if ((limit < 10)); then
      echo "######## $label: SKIPPED (the run's time budget is spent)"
      return 125
    fi
    echo "######## $label (timeout ${limit}s)"
    local s0=$SECONDS
    timeout "$limit" "$@"
    rc=$?
    echo "######## $label: exit $rc after $((SECONDS - s0)) s$([[ $rc == 124 ]] && echo ' (TIMED OUT)')"
    return $rc
  }
  local info amx_ran=no
  info="$(timeout 60 "$check" --info 2>&1)"
  echo
  echo "$info"
  grep -q 'amx(supported)' <<<"$info" && amx_ran=yes
  step 100 "correctness + amx blocking, all threads" "$check" --correctness --blocking "${quick[@]}" || status=1
  step 70 "timing, all threads" "$check" --timing "${quick[@]}" || true
  step 40 "amx blocking sweep, all threads" "$check" --sweep "${quick[@]}" || status=1
  step 60 "timing, 1 thread" env STEPMIX_THREADS=1 "$check" --timing --max-gflop 30 --budget 0.6 "${quick[@]}" || true
  step 60 "timing, 2 threads" env STEPMIX_THREADS=2 "$check" --timing --max-gflop 60 --budget 0.6 "${quick[@]}" || true

  # ------------------------------------------------------------ PyTorch peer
  # bench/torch_linear.py (the peer of bench/run-linear.sh: its timing loop
  # and its "torch,BF16,M,K,N,seconds,GFLOP/s" lines) on the shapes amx_check
  # times, with the given thread count instead of its fixed 2.
  if timeout 60 python3 -c "import torch" 2>/dev/null; then
    cat >"$build/torch_peer.py" <<'PY'
import sys

sys.path.insert(0, sys.argv[1])
threads, max_gflop, quick = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
import torch
import torch_linear

real_set_num_threads = torch.set_num_threads
torch.set_num_threads = lambda _n: real_set_num_threads(threads)
kn = [(1024, 1024), (2048, 2048)] if quick else [(2048, 2048), (4096, 4096), (4096, 12288), (12288, 4096)]
ms = (16, 256) if quick else (16, 256, 1024, 4096)
torch_linear.shapes = lambda _quick: [(m, k, n) for (k, n) in kn for m in ms if 2.0 * m * k * n * 1e-9 <= max_gflop]
sys.argv = ["torch_linear.py", "--min-seconds", "0.2"]
print(f"torch {torch.__version__}, {threads} thread(s), mkldnn: {torch.backends.mkldnn.is_available()}", flush=True)
torch_linear.main()
PY
    local all_threads="${STEPMIX_THREADS:-$(nproc)}" q="${AMX_CHECK_QUICK:-0}"
    step 45 "torch bf16 F.linear, $all_threads threads" env OMP_NUM_THREADS="$all_threads" \
      python3 "$build/torch_peer.py" "$here" "$all_threads" 1e30 "$q" || true
    step 40 "torch bf16 F.linear, 1 thread" env OMP_NUM_THREADS=1 \
      python3 "$build/torch_peer.py" "$here" 1 30 "$q" || true
    step 40 "torch bf16 F.linear, 2 threads" env OMP_NUM_THREADS=2 \
      python3 "$build/torch_peer.py" "$here" 2 60 "$q" || true
  else
    echo
    echo "######## PyTorch not importable here: no torch comparison"
  fi

  echo
  echo "== amx device check: $([[ $status == 0 ]] && echo PASS || echo FAIL) ($SECONDS s);" \
    "$([[ $amx_ran == yes ]] && echo 'the amx variant ran' || echo 'the amx variant was NOT exercised (unsupported here)')"
  return $status
}

cd "$root" || exit 1
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  main "$@" 2>&1 | tee "$OUT/amx-check.log"
  exit "${PIPESTATUS[0]}"
fi
main "$@"
