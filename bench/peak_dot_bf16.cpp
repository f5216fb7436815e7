// Peak of the BF16 instructions the GEMMs are built on, no memory traffic:
//   bench_peak_dot_bf16 [threads]        AVX512_BF16 vdpbf16ps, 12 independent
//                                        accumulators -> "peak,<threads>,<GFLOP/s>"
//   bench_peak_dot_bf16 [threads] --f32  AVX-512 vfmadd231ps (the float32
//                                        convolutions of the VAE), 12
//                                        accumulators -> "f32_peak,<threads>,<GFLOP/s>"
//   bench_peak_dot_bf16 [threads] --amx  AMX-BF16 tdpbf16ps on 4 accumulator
//                                        tiles from 2 A and 2 B tiles (the amx
//                                        GEMM's inner loop without its loads)
//                                        -> "amx_peak,<threads>,<GFLOP/s>", or
//                                        "amx_peak,<threads>,unsupported"
// bench/run-linear.sh reports every GEMM as a fraction of the peak of the
// fastest unit the machine has. Timed by the thread's CPU clock, so other
// processes on a shared machine do not lower the figure.
#include <immintrin.h>

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/cpu/amx_kernels.hpp"

namespace {

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// The twelve accumulators start equal and get the same operands, so without
// this the compiler may keep one and compute it once per iteration (GCC 12
// at -O2 does: the loop then measures one dependent chain, the instruction's
// latency, and reports 12x that as a peak). An empty asm that claims to read
// and write every register keeps all twelve chains.
#define STEPMIX_KEEP_CHAINS(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)                                   \
  __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), \
                   "+v"(a9), "+v"(a10), "+v"(a11))

// Twelve independent chains acc = step(acc), timed by the thread's CPU
// clock; named accumulators (an array would be kept in memory by the
// compiler): enough chains to cover the instruction latency.
template <class Step>
double run_twelve_chains(long iterations, const Step& step, double flops_per_instruction) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
         a9 = a0, a10 = a0, a11 = a0;
  const double t0 = thread_seconds();
  for (long i = 0; i < iterations; ++i) {
    a0 = step(a0);
    a1 = step(a1);
    a2 = step(a2);
    a3 = step(a3);
    a4 = step(a4);
    a5 = step(a5);
    a6 = step(a6);
    a7 = step(a7);
    a8 = step(a8);
    a9 = step(a9);
    a10 = step(a10);
    a11 = step(a11);
    STEPMIX_KEEP_CHAINS(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11);
  }
  const double seconds = thread_seconds() - t0;
  const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                   _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                                 _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
  volatile float sink = _mm512_reduce_add_ps(sum);
  (void)sink;
  return double(iterations) * 12 * flops_per_instruction / seconds / 1e9;
}

// vdpbf16ps: 16 lanes x 2 products x 2 flops.
double run_one_thread(long iterations) {
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3F80);  // 1.0 in bf16
  const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3C00);  // small value, keeps sums finite
  return run_twelve_chains(iterations, [&](__m512 a) { return _mm512_dpbf16_ps(a, x, y); }, 64);
}

// vfmadd231ps: 16 lanes x 2 flops.
double run_one_thread_f32(long iterations) {
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-3f);
  return run_twelve_chains(iterations, [&](__m512 a) { return _mm512_fmadd_ps(x, y, a); }, 32);
}

__attribute__((target("amx-tile,amx-bf16"))) double run_one_thread_amx(long iterations) {
  alignas(64) static const uint16_t operand[512] = {};  // zeros: sums stay finite
  alignas(64) float out[256];
  _tile_loadconfig(&stepmix::kernels::amx::kTileConfig);
  _tile_zero(0);  // tile numbers must be literals
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  const double t0 = thread_seconds();
  for (long i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const double seconds = thread_seconds() - t0;
  _tile_stored(0, out, 64);
  volatile float sink = out[0];
  (void)sink;
  _tile_release();
  // Each tdpbf16ps: 16 x 16 outputs x 32 products x 2 flops.
  return double(iterations) * 4 * 16 * 16 * 32 * 2 / seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  bool amx = false, f32 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--amx")) {
      amx = true;
    } else if (!std::strcmp(argv[i], "--f32")) {
      f32 = true;
    } else {
      threads = std::atoi(argv[i]);
    }
  }
  if (threads < 1) {
    std::fprintf(stderr, "usage: %s [threads] [--amx | --f32]\n", argv[0]);
    return 2;
  }
  if (amx && !(stepmix::cpu_features().can_run_amx_bf16() && stepmix::request_amx_permission())) {
    std::printf("amx_peak,%d,unsupported\n", threads);
    return 0;
  }
  const long iterations = amx ? 20'000'000 / 4 : 200'000'000 / 12;
  auto one_thread = [&]() {
    if (amx) return run_one_thread_amx(iterations);
    return f32 ? run_one_thread_f32(iterations) : run_one_thread(iterations);
  };
  std::vector<double> gflops(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(
        [&, t] { gflops[std::size_t(t)] = one_thread(); });
  for (auto& th : pool) th.join();
  double total = 0;
  for (double g : gflops) total += g;
  std::printf("%s,%d,%.1f\n", amx ? "amx_peak" : f32 ? "f32_peak" : "peak", threads, total);
  return 0;
}
