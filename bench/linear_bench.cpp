// Linear-layer throughput of stepmix, BF16 activations, one line per
// (mode, M, K, N): "stepmix,<mode>,<M>,<K>,<N>,<seconds per call, best batch>,<GFLOP/s>".
// Modes: W8A8, W8A16 (FP8 weights converted inside the kernel), W8A16-cached
// (WeightCache::All), BF16 (dense BF16 checkpoint weights).
//
// usage: bench_linear [--quick] [--min-seconds S] [--shape M,K,N] [--mode NAME] [--cpu-time]
//   --cpu-time  time calls with the thread's CPU clock instead of the wall
//               clock (needs STEPMIX_THREADS=1): on a loaded machine this
//               leaves out the time the thread spent preempted.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/kernel_set.hpp"
#include "quant/linear.hpp"

namespace {

using namespace stepmix;

struct Shape { int64_t M, K, N; };

std::vector<Shape> shapes(bool quick) {
  if (quick) return {{16, 4096, 4096}, {256, 4096, 4096}, {1024, 4096, 4096}, {256, 4096, 12288}};
  std::vector<Shape> s;
  const std::pair<int64_t, int64_t> kn[] = {{64, 64}, {2048, 2048}, {4096, 4096}, {4096, 12288}, {12288, 4096}};
  for (int64_t M : {16, 256, 1024, 4096})
    for (auto [K, N] : kn) s.push_back({M, K, N});
  return s;
}

TensorView view(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, std::size_t bytes) {
  TensorView v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.data = static_cast<const std::byte*>(data);
  v.nbytes = bytes;
  return v;
}

double now_seconds(bool cpu_time) {
  if (cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best (shortest) call: on a shared machine the minimum is the least noisy
// estimate of what the code can do; the mean mostly measures the neighbours.
// Calls are timed in batches of at least ~2 ms: a call of a few microseconds
// (the tiny shape) is below what the clocks resolve reliably on a VM, and a
// single-call minimum then reports impossible speeds.
double seconds_per_call(const Linear& linear, const std::vector<uint16_t>& x, int64_t M, std::vector<uint16_t>& y,
                        Precision mode, double min_seconds, bool cpu_time) {
  const double warm_start = now_seconds(cpu_time);
  linear.forward(x.data(), M, y.data(), mode);  // warm-up: scratch, caches, page faults
  const double first = std::max(now_seconds(cpu_time) - warm_start, 1e-7);
  const int batch = std::max(1, int(2e-3 / first));
  int samples = 0;
  double best = 1e30, total = 0;
  while (samples < 3 || total < min_seconds) {
    const double start = now_seconds(cpu_time);
    for (int i = 0; i < batch; ++i) linear.forward(x.data(), M, y.data(), mode);
    const double t = now_seconds(cpu_time) - start;
    best = std::min(best, t / batch);
    total += t;
    ++samples;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  double min_seconds = 0.5;
  std::vector<Shape> only;
  std::string only_mode;
  bool cpu_time = false;
  for (int i = 1; i < argc; ++i) {
    long long m = 0, k = 0, n = 0;
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--cpu-time")) {
      cpu_time = true;
    } else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) {
      min_seconds = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc &&
               std::sscanf(argv[++i], "%lld,%lld,%lld", &m, &k, &n) == 3) {
      only.push_back({m, k, n});
    } else if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) {
      only_mode = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--min-seconds S] [--shape M,K,N] [--mode NAME] [--cpu-time]\n",
                   argv[0]);
      return 2;
    }
  }
  if (cpu_time && ThreadPool::global().size() != 1) {
    std::fprintf(stderr, "--cpu-time measures one thread: run with STEPMIX_THREADS=1\n");
    return 2;
  }
  std::fprintf(stderr, "kernels: %s, threads: %d\n", kernels::active_kernels().describe().c_str(), ThreadPool::global().size());
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Shape& s : only.empty() ? shapes(quick) : only) {
    std::vector<uint8_t> codes(size_t(s.N * s.K));
    std::vector<uint16_t> bf16_weight(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      const float v = normal(rng);
      codes[i] = quantize_e4m3_saturating(v * 100.0f);
      bf16_weight[i] = float_to_bf16_rne(v);
    }
    std::vector<uint16_t> x(size_t(s.M * s.K)), y(size_t(s.M * s.N));
    for (auto& v : x) v = float_to_bf16_rne(normal(rng));

    LinearWeights fp8;
    fp8.name = "bench.fp8";
    fp8.weight = view("w", DType::F8_E4M3, {s.N, s.K}, codes.data(), codes.size());
    fp8.weight_scale = 0.01f;
    fp8.input_scale = 0.02f;
    LinearWeights dense;
    dense.name = "bench.bf16";
    dense.weight = view("w", DType::BF16, {s.N, s.K}, bf16_weight.data(), bf16_weight.size() * 2);

    const Linear fp8_linear(fp8), fp8_cached(fp8, WeightCache::All), bf16_linear(dense);
    struct Run { const char* name; const Linear* linear; Precision mode; };
    const Run runs[] = {{"W8A8", &fp8_linear, Precision::W8A8},
                        {"W8A16", &fp8_linear, Precision::W8A16},
                        {"W8A16-cached", &fp8_cached, Precision::W8A16},
                        {"BF16", &bf16_linear, Precision::BF16}};
    for (const Run& r : runs) {
      if (!only_mode.empty() && only_mode != r.name) continue;
      const double t = seconds_per_call(*r.linear, x, s.M, y, r.mode, min_seconds, cpu_time);
      std::printf("stepmix,%s,%lld,%lld,%lld,%.6g,%.2f\n", r.name, (long long)s.M, (long long)s.K, (long long)s.N, t,
                  2.0 * double(s.M) * double(s.N) * double(s.K) / t * 1e-9);
      std::fflush(stdout);
    }
  }
  return 0;
}
