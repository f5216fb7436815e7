// One attention call at the Cosmos3-Nano shapes (32 query / 8 KV heads,
// head_dim 128), every kernel variant that runs here, bf16 operands (what the
// bf16-activation forward calls) and optionally float32. Run by
// bench/run-attention.sh, which measures the instruction peaks in the same
// run (bench/peak_dot_bf16.cpp) and passes them in.
//
// usage: bench_attention [--shape NAME] [--variant NAME] [--f32] [--min-seconds S]
//                        [--peak-bf16 G] [--peak-amx G] [--peak-f32 G]
// Prints one JSON line per (shape, arithmetic, variant): the best call's CPU
// time (with STEPMIX_THREADS=1 the calling thread's, so the neighbours' share
// of the machine does not count; with more threads the process's, so GFLOP/s
// are per CPU second, against the one-thread peak), GFLOP/s counted as the
// transformer benchmark counts them (4 · D · heads per visible (query, key)
// pair: the two products; a causal problem sees S(S+1)/2 pairs) and, when the
// peak of the instruction it runs on was given, the fraction of it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/attention.hpp"
#include "kernels/kernel_set.hpp"

namespace {

using namespace stepmix;
using namespace stepmix::kernels;

struct Shape {
  const char* name;
  int64_t q_rows, kv_rows;
  bool causal;
};

// The generation stream attends over [300 understanding keys; its own
// tokens]; the understanding prefill is causal over the 300 text tokens. The
// "_q256" shapes run 256 query rows of the long key sequence: the same work
// per query (it depends only on the keys) in a fraction of the time.
const Shape kShapes[] = {
    {"generation_1024", 1024, 1324, false},
    {"generation_4096", 4096, 4396, false},
    {"generation_4096_q256", 256, 4396, false},
    {"generation_1024_q256", 256, 1324, false},
    {"understanding_300", 300, 300, true},
};
constexpr int64_t kQueryHeads = 32, kKvHeads = 8, kHeadDim = 128;

using bench::best_seconds;

struct Peaks {
  double f32 = 0, bf16 = 0, amx = 0;
};

double attention_flops(const Shape& s) {
  const double pairs = s.causal ? double(s.q_rows) * double(s.q_rows + 1) / 2 : double(s.q_rows) * double(s.kv_rows);
  return 4.0 * pairs * double(kHeadDim) * double(kQueryHeads);
}

void report(const Shape& s, const char* arithmetic, const char* variant, double seconds, const char* unit,
            double peak) {
  const double flops = attention_flops(s), gflops = flops / seconds / 1e9;
  std::printf("{\"shape\": \"%s\", \"q_rows\": %lld, \"kv_rows\": %lld, \"causal\": %s, \"arithmetic\": \"%s\", "
              "\"variant\": \"%s\", \"threads\": %d, \"gflop\": %.2f, \"cpu_ms\": %.2f, \"gflops\": %.1f, "
              "\"peak_unit\": \"%s\"",
              s.name, (long long)s.q_rows, (long long)s.kv_rows, s.causal ? "true" : "false", arithmetic, variant,
              ThreadPool::global().size(), flops / 1e9, 1e3 * seconds, gflops, unit);
  if (peak > 0) std::printf(", \"peak_gflops\": %.1f, \"fraction_of_peak\": %.3f", peak, gflops / peak);
  std::printf("}\n");
  std::fflush(stdout);
}

void run_shape(const Shape& s, bool f32, const std::string& only_variant, double min_seconds, const Peaks& peaks) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const AttentionProblem p{s.q_rows, s.kv_rows, kQueryHeads, kKvHeads, kHeadDim, s.causal};
  const std::size_t q_count = std::size_t(s.q_rows * kQueryHeads * kHeadDim);
  const std::size_t kv_count = std::size_t(s.kv_rows * kKvHeads * kHeadDim);
  std::vector<float> q(q_count), k(kv_count), v(kv_count), out(q_count);
  for (float& x : q) x = normal(rng);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  std::vector<uint16_t> qb(q_count), kb(kv_count), vb(kv_count), outb(q_count);
  for (std::size_t i = 0; i < q_count; ++i) qb[i] = float_to_bf16_rne(q[i]);
  for (std::size_t i = 0; i < kv_count; ++i) kb[i] = float_to_bf16_rne(k[i]), vb[i] = float_to_bf16_rne(v[i]);

  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.attention.supported() || std::string(variant.name) == "ref") continue;
    if (!only_variant.empty() && only_variant != variant.name) continue;
    const bool tiles = std::string(variant.name) == "amx";
    double seconds = best_seconds(
        [&] { variant.attention.bf16(p, qb.data(), kb.data(), vb.data(), outb.data()); }, min_seconds);
    report(s, "bf16", variant.name, seconds, tiles ? "tdpbf16ps" : "vdpbf16ps", tiles ? peaks.amx : peaks.bf16);
    if (!f32 || tiles) continue;  // the amx variant's float32 attention is the avx512 one
    seconds = best_seconds([&] { variant.attention.f32(p, q.data(), k.data(), v.data(), out.data()); }, min_seconds);
    report(s, "f32", variant.name, seconds, "vfmadd231ps", peaks.f32);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string only_shape, only_variant;
  bool f32 = false;
  double min_seconds = 1.0;
  Peaks peaks;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", key.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (key == "--shape") only_shape = value();
    else if (key == "--variant") only_variant = value();
    else if (key == "--f32") f32 = true;
    else if (key == "--min-seconds") min_seconds = std::atof(value().c_str());
    else if (key == "--peak-bf16") peaks.bf16 = std::atof(value().c_str());
    else if (key == "--peak-amx") peaks.amx = std::atof(value().c_str());
    else if (key == "--peak-f32") peaks.f32 = std::atof(value().c_str());
    else {
      std::fprintf(stderr,
                   "usage: bench_attention [--shape NAME] [--variant NAME] [--f32] [--min-seconds S] "
                   "[--peak-bf16 G] [--peak-amx G] [--peak-f32 G]\n");
      return 2;
    }
  }
  bool found = only_shape.empty();
  for (const Shape& s : kShapes) {
    if (!only_shape.empty() && only_shape != s.name) continue;
    found = true;
    run_shape(s, f32, only_variant, min_seconds, peaks);
  }
  if (!found) {
    std::fprintf(stderr, "bench_attention: unknown shape '%s'\n", only_shape.c_str());
    return 2;
  }
  return 0;
}
