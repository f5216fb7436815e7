// Peak of the BF16 dot-product instruction the GEMM is built on (AVX512_BF16
// vdpbf16ps): 12 independent accumulators, no memory traffic. Prints
// "peak,<threads>,<GFLOP/s>" for bench/run-linear.sh, which reports every
// GEMM as a fraction of it. (AMX tiles would be the peak on CPUs that have
// them; this machine's family has none.) Timed by the thread's CPU clock, so
// other processes on a shared machine do not lower the figure.
#include <immintrin.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

double run_one_thread(long iterations) {
  // Twelve named accumulators (an array would be kept in memory by the
  // compiler): enough independent chains to cover the instruction latency.
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
         a9 = a0, a10 = a0, a11 = a0;
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3F80);  // 1.0 in bf16
  const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3C00);  // small value, keeps sums finite
  timespec t0{}, t1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  for (long i = 0; i < iterations; ++i) {
    a0 = _mm512_dpbf16_ps(a0, x, y);
    a1 = _mm512_dpbf16_ps(a1, x, y);
    a2 = _mm512_dpbf16_ps(a2, x, y);
    a3 = _mm512_dpbf16_ps(a3, x, y);
    a4 = _mm512_dpbf16_ps(a4, x, y);
    a5 = _mm512_dpbf16_ps(a5, x, y);
    a6 = _mm512_dpbf16_ps(a6, x, y);
    a7 = _mm512_dpbf16_ps(a7, x, y);
    a8 = _mm512_dpbf16_ps(a8, x, y);
    a9 = _mm512_dpbf16_ps(a9, x, y);
    a10 = _mm512_dpbf16_ps(a10, x, y);
    a11 = _mm512_dpbf16_ps(a11, x, y);
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  const double seconds = double(t1.tv_sec - t0.tv_sec) + 1e-9 * double(t1.tv_nsec - t0.tv_nsec);
  const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                   _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                                 _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
  volatile float sink = _mm512_reduce_add_ps(sum);
  (void)sink;
  // Each vdpbf16ps: 16 lanes x 2 products x 2 flops.
  return double(iterations) * 12 * 64 / seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const long iterations = 200'000'000 / 12;
  std::vector<double> gflops(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { gflops[std::size_t(t)] = run_one_thread(iterations); });
  for (auto& th : pool) th.join();
  double total = 0;
  for (double g : gflops) total += g;
  std::printf("peak,%d,%.1f\n", threads, total);
  return 0;
}
