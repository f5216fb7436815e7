// Standalone check and benchmark of the GEMM kernel variants, for machines
// without the test dependencies (GoogleTest, nlohmann-json, CLI11, libpng):
// links only the core and kernels sources. Built and run by
// bench/amx-device-check.sh.
//
// usage: amx_check [--info] [--correctness] [--blocking] [--timing] [--sweep]
//                  [--quick] [--nano] [--max-gflop G] [--budget S]
//   --info         only the CPU flags, AMX permission and variants found
//   sections (all of them when none is named):
//   --correctness  every supported variant against "ref" on a grid of shapes,
//                  every BF16-arithmetic operand combination, bias
//                  none/f32/bf16, output f32/bf16; the tolerance is the one
//                  tests/kernels/gemm_variants_test.cpp uses
//   --blocking     "amx" only: shapes crossing its blocking (M = 1100: gemm()'s
//                  512-row blocks of x), under several blockings; each
//                  against "ref" and bit-identical to the default blocking
//   --timing       GFLOP/s (best call) of "avx512" and "amx", W8A8 / W8A16 /
//                  BF16, on ThreadPool::global() (STEPMIX_THREADS); the best
//                  call's process CPU time too (the figure to compare on a
//                  shared machine with STEPMIX_THREADS=1)
//   --sweep        "amx" only: timing of a few blockings on two shapes
//   --quick        smaller shapes everywhere (for a slow machine)
//   --nano         timing: only "amx", W8A16 and BF16, at the Linears of a
//                  Cosmos3-Nano-width transformer (K=4096: N=4096, 1024,
//                  12288; K=12288: N=4096) with M = 1324 (1024 vision + 300
//                  text tokens) and 2648 (both CFG passes in one batch);
//                  sweep: those shapes, with blockings for many rows of x
//   --max-gflop G  timing: skip shapes of more than G GFLOP per call
//   --budget S     timing: stop repeating a call after S seconds (default 1)
// Exit code 1 if any check fails, 2 on bad usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/amx_kernels.hpp"
#include "gemm_problem.hpp"
#include "kernels/kernel_set.hpp"

namespace {

using namespace stepmix;
using namespace stepmix::kernels;

int g_failures = 0;

// ---------------------------------------------------------------- data
// Operands, combinations and the bound: tests/support/gemm_problem.hpp.
using stepmix::test::activation_value;
using stepmix::test::GemmComparison;
using Activations = stepmix::test::GemmActivations;
using Weights = stepmix::test::GemmWeights;
using Combo = stepmix::test::GemmCombo;

Activations make_activations(int64_t M, int64_t K, uint64_t seed) { return stepmix::test::make_gemm_activations(M, K, seed); }
Weights make_weights(int64_t N, int64_t K, uint64_t seed) { return stepmix::test::make_gemm_weights(N, K, seed); }

// Every BF16-arithmetic combination (operands exact in bf16).
std::vector<Combo> bf16_combos() {
  std::vector<Combo> v;
  for (const Combo& c : stepmix::test::all_gemm_combos())
    if (c.arithmetic == GemmArithmetic::BF16) v.push_back(c);
  return v;
}
const std::vector<Combo> kCombos = bf16_combos();

const char* bias_name(BiasType b) { return b == BiasType::None ? "none" : b == BiasType::F32 ? "f32" : "bf16"; }
const char* out_name(OutputType o) { return o == OutputType::F32 ? "f32" : "bf16"; }

GemmArgs make_args(const Activations& x, const Weights& w, const Combo& c, BiasType bias, OutputType out, float alpha,
                   void* y) {
  return stepmix::test::make_gemm_args(x, w, c, bias, out, alpha, y);
}

// ---------------------------------------------------------------- reference
// ref::gemm on blocks of rows and columns, in parallel: ref::gemm computes
// every element on its own (dot product over k in order, then the epilogue),
// so a block computed by its own call is bit-identical to the whole call.
void ref_gemm_parallel(const GemmArgs& g) {
  const int64_t a_element = g.a_type == ActivationOperand::F32 ? 4 : g.a_type == ActivationOperand::BF16 ? 2 : 1;
  const int64_t w_element = g.w_type == WeightOperand::F32 || g.w_type == WeightOperand::E4M3TimesScaleF32 ? 4
                            : g.w_type == WeightOperand::BF16                                            ? 2
                                                                                                         : 1;
  const int64_t bias_element = g.bias_type == BiasType::F32 ? 4 : 2;
  const int64_t y_element = g.y_type == OutputType::F32 ? 4 : 2;
  ThreadPool& pool = ThreadPool::global();
  const int64_t wanted = 8 * int64_t(pool.size());
  const int64_t m_tasks = std::min<int64_t>(g.M, wanted);
  const int64_t n_tasks = std::min<int64_t>(g.N, std::max<int64_t>(1, wanted / m_tasks));
  pool.parallel_for(m_tasks * n_tasks, [&](int64_t t) {
    const int64_t mi = t / n_tasks, ni = t % n_tasks;
    const int64_t m0 = g.M * mi / m_tasks, m1 = g.M * (mi + 1) / m_tasks;
    const int64_t n0 = g.N * ni / n_tasks, n1 = g.N * (ni + 1) / n_tasks;
    if (m1 <= m0 || n1 <= n0) return;
    std::vector<char> y(size_t((m1 - m0) * (n1 - n0) * y_element));
    GemmArgs s = g;
    s.M = m1 - m0;
    s.N = n1 - n0;
    s.a = static_cast<const char*>(g.a) + m0 * g.K * a_element;
    s.w = static_cast<const char*>(g.w) + n0 * g.K * w_element;
    if (g.bias_type != BiasType::None) s.bias = static_cast<const char*>(g.bias) + n0 * bias_element;
    s.y = y.data();
    ref::gemm(s);
    for (int64_t m = m0; m < m1; ++m)
      std::memcpy(static_cast<char*>(g.y) + (m * g.N + n0) * y_element, y.data() + (m - m0) * (n1 - n0) * y_element,
                  size_t((n1 - n0) * y_element));
  });
}

using stepmix::test::sum_abs_products;
using Comparison = GemmComparison;
void compare(const GemmArgs& g, const void* got_y, const void* want_y, const std::vector<double>& sum_abs,
             Comparison& r) {
  r = stepmix::test::compare_gemm_outputs(g, got_y, want_y, sum_abs);
}

size_t y_bytes(const GemmArgs& g) { return size_t(g.M * g.N) * (g.y_type == OutputType::F32 ? 4 : 2); }

float alpha_for(const Combo& c) { return c.a == ActivationOperand::E4M3Codes ? 3.7e-4f : 0.75f; }

std::vector<const KernelSet*> optimised_variants() {
  std::vector<const KernelSet*> v;
  for (const KernelSet& k : kernel_variants())
    if (std::string(k.name) != "ref" && k.linear.supported()) v.push_back(&k);
  return v;
}

bool kernel_variant_supported(const char* name) {
  for (const KernelSet& k : kernel_variants())
    if (std::string(k.name) == name) return k.linear.supported();
  return false;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// ---------------------------------------------------------------- correctness
void run_correctness(bool quick) {
  struct KN { int64_t K, N; };
  std::vector<KN> kns = {{16, 16}, {64, 64}, {48, 40}, {2048, 2048}, {4096, 4096}};
  if (quick) kns = {{16, 16}, {64, 64}, {48, 40}, {200, 72}};
  const int64_t Ms[] = {1, 3, 16, 33, 256};
  const auto variants = optimised_variants();
  std::printf("\n== correctness: every supported variant against ref (tolerance of gemm_variants_test)\n");
  if (variants.empty()) std::printf("no optimised variant runs here\n");
  const double start = now();
  for (const KN& kn : kns) {
    const Weights w = make_weights(kn.N, kn.K, uint64_t(kn.K * 7 + kn.N));
    for (int64_t M : Ms) {
      if (kn.K == 4096 && M > 33) continue;
      const Activations x = make_activations(M, kn.K, uint64_t(M * 131 + kn.K));
      for (const Combo& c : kCombos) {
        const std::vector<double> sum_abs = sum_abs_products(x, w, c);
        // One reference per epilogue, shared by the variants.
        std::vector<std::vector<char>> want;
        for (BiasType bias : {BiasType::None, BiasType::F32, BiasType::BF16})
          for (OutputType out : {OutputType::F32, OutputType::BF16}) {
            const GemmArgs g = make_args(x, w, c, bias, out, alpha_for(c), nullptr);
            want.emplace_back(y_bytes(g));
            GemmArgs gr = g;
            gr.y = want.back().data();
            ref_gemm_parallel(gr);
          }
        for (const KernelSet* v : variants) {
          Comparison worst;
          double worst_rel = 0;
          std::string worst_epilogue;
          int64_t violations = 0;
          std::string first;
          int e = 0;
          for (BiasType bias : {BiasType::None, BiasType::F32, BiasType::BF16})
            for (OutputType out : {OutputType::F32, OutputType::BF16}) {
              const GemmArgs g0 = make_args(x, w, c, bias, out, alpha_for(c), nullptr);
              std::vector<char> got(y_bytes(g0), char(0x7F));  // poison: unwritten outputs show
              GemmArgs g = g0;
              g.y = got.data();
              v->linear.gemm(g);
              Comparison r;
              compare(g, got.data(), want[size_t(e++)].data(), sum_abs, r);
              const double rel = r.max_abs_ref > 0 ? r.max_abs_diff / r.max_abs_ref : r.max_abs_diff;
              if (rel >= worst_rel) {
                worst_rel = rel;
                worst_epilogue = std::string("bias=") + bias_name(bias) + " out=" + out_name(out);
              }
              if (r.violations && first.empty()) first = r.first;
              violations += r.violations;
            }
          const bool pass = violations == 0;
          if (!pass) ++g_failures;
          std::printf("check %-6s M=%-4lld K=%-5lld N=%-5lld %-24s max|diff|/max|ref| = %.3e (%s)  %s\n", v->name,
                      (long long)M, (long long)kn.K, (long long)kn.N, stepmix::test::combo_name(c).c_str(), worst_rel, worst_epilogue.c_str(),
                      pass ? "PASS" : "FAIL");
          if (!pass)
            std::printf("  %lld elements out of tolerance over the 6 epilogues; first: %s\n", (long long)violations,
                        first.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  std::printf("correctness: %.1f s\n", now() - start);
}

// ---------------------------------------------------------------- blocking
void run_blocking_checks(bool quick) {
  std::printf("\n== amx blocking: shapes crossing the blocking, several blockings, against ref and bit-identical\n");
  if (!kernel_variant_supported("amx")) {
    std::printf("amx not supported here: skipped\n");
    return;
  }
  struct Shape { int64_t M, N, K; };
  std::vector<Shape> shapes = {{1, 1, 1},       {5, 3, 37},      {33, 200, 300}, {40, 97, 513},
                               {300, 100, 520}, {260, 20, 1500}, {513, 130, 1030}, {1100, 40, 300}};
  if (quick) shapes.resize(6);
  struct Named { const char* name; amx::Blocking b; bool use_default; };
  const Named blockings[] = {
      {"gemm()", {}, true},
      {"32/32/32 auto", {32, 32, 32, -1}, false},
      {"32/32/32 prepack", {32, 32, 32, 1}, false},
      {"64/96/96 per-unit", {64, 96, 96, 0}, false},
      {"256/256/256 prepack", {256, 256, 256, 1}, false},
      {"256/256/256 per-unit", {256, 256, 256, 0}, false},
      {"512/64/1024 auto", {512, 64, 1024, -1}, false},
  };
  int config = 0;
  for (const Shape& s : shapes) {
    const Weights w = make_weights(s.N, s.K, uint64_t(s.N * 3 + s.K));
    const Activations x = make_activations(s.M, s.K, uint64_t(s.M * 5 + s.K));
    for (const Combo& c : kCombos) {
      const BiasType bias = BiasType(config % 3);
      const OutputType out = (config / 3) % 2 ? OutputType::BF16 : OutputType::F32;
      ++config;
      const std::vector<double> sum_abs = sum_abs_products(x, w, c);
      const GemmArgs g0 = make_args(x, w, c, bias, out, alpha_for(c), nullptr);
      std::vector<char> want(y_bytes(g0)), first_got;
      GemmArgs gr = g0;
      gr.y = want.data();
      ref_gemm_parallel(gr);
      int bad = 0;
      std::string detail;
      for (const Named& nb : blockings) {
        std::vector<char> got(y_bytes(g0), char(0x7F));
        GemmArgs g = g0;
        g.y = got.data();
        if (nb.use_default) {
          kernel_variant("amx").linear.gemm(g);
        } else {
          amx::gemm_with_blocking(g, nb.b);
        }
        Comparison r;
        compare(g, got.data(), want.data(), sum_abs, r);
        if (r.violations) {
          ++bad;
          detail += std::string("  ") + nb.name + ": " + std::to_string(r.violations) + " out of tolerance, first " +
                    r.first + "\n";
        }
        if (first_got.empty()) {
          first_got = got;
        } else if (got != first_got) {
          ++bad;
          detail += std::string("  ") + nb.name + ": not bit-identical to gemm()\n";
        }
      }
      if (bad) ++g_failures;
      std::printf("blocking M=%-4lld N=%-4lld K=%-5lld %-24s bias=%-4s out=%-4s %s\n", (long long)s.M, (long long)s.N,
                  (long long)s.K, stepmix::test::combo_name(c).c_str(), bias_name(bias), out_name(out), bad ? "FAIL" : "PASS");
      if (bad) std::printf("%s", detail.c_str());
      std::fflush(stdout);
    }
  }
}

// ---------------------------------------------------------------- timing
struct Mode {
  const char* name;
  ActivationOperand a;
  WeightOperand w;
};
const Mode kModes[] = {
    {"W8A8", ActivationOperand::E4M3Codes, WeightOperand::E4M3},
    {"W8A16", ActivationOperand::BF16, WeightOperand::E4M3TimesScaleBF16},
    {"BF16", ActivationOperand::BF16, WeightOperand::BF16},
};

GemmArgs timing_args(const Activations& x, const Weights& w, const Mode& mode, std::vector<uint16_t>& y) {
  const Combo c{GemmArithmetic::BF16, mode.a, mode.w};
  return make_args(x, w, c, BiasType::None, OutputType::BF16, mode.a == ActivationOperand::E4M3Codes ? 2e-4f : 1.0f,
                   y.data());
}

// Best call after a warm-up: at least one timed call, up to `reps`, fewer
// once `budget` seconds are spent. Wall seconds; *best_cpu (if given): the
// least process CPU time of those calls.
template <class Fn>
double best_seconds(const Fn& fn, int reps, double budget, double* best_cpu = nullptr) {
  fn();
  double best = 1e30, cpu_best = 1e30, total = 0;
  for (int i = 0; i < reps && (i == 0 || total < budget); ++i) {
    const double c0 = process_cpu_seconds(), t0 = now();
    fn();
    const double t = now() - t0;
    best = std::min(best, t);
    cpu_best = std::min(cpu_best, process_cpu_seconds() - c0);
    total += t;
  }
  if (best_cpu) *best_cpu = cpu_best;
  return best;
}

void run_timing(bool quick, bool nano, double max_gflop, double budget) {
  const int threads = ThreadPool::global().size();
  std::printf("\n== timing: GEMM only (BF16 output, no bias), best of up to 3 calls, %d thread(s)\n", threads);
  std::printf("columns: time,threads,mode,M,K,N,variant,wall seconds,GFLOP/s (wall),CPU seconds,GFLOP/s per CPU second\n");
  std::vector<const KernelSet*> variants;
  for (const char* name : {"avx512", "amx"})
    if (kernel_variant_supported(name) && !(nano && std::string(name) != "amx")) variants.push_back(&kernel_variant(name));
  if (variants.empty()) {
    std::printf("neither avx512 nor amx runs here\n");
    return;
  }
  struct KN { int64_t K, N; };
  std::vector<KN> kns = {{2048, 2048}, {4096, 4096}, {4096, 12288}, {12288, 4096}};
  std::vector<int64_t> Ms = {16, 256, 1024, 4096};
  if (quick) kns = {{1024, 1024}, {2048, 2048}}, Ms = {16, 256};
  if (nano) kns = {{4096, 4096}, {4096, 1024}, {4096, 12288}, {12288, 4096}}, Ms = {1324, 2648};
  struct Row { std::string key; double gflops[2]; };
  std::vector<Row> rows;
  const double start = now();
  for (const KN& kn : kns) {
    const Weights w = make_weights(kn.N, kn.K, uint64_t(kn.N + kn.K));
    for (int64_t M : Ms) {
      const double gflop = 2.0 * double(M) * double(kn.N) * double(kn.K) * 1e-9;
      if (gflop > max_gflop) {
        std::printf("time,%d,*,%lld,%lld,%lld,skipped (%.0f GFLOP > --max-gflop)\n", threads, (long long)M,
                    (long long)kn.K, (long long)kn.N, gflop);
        continue;
      }
      const Activations x = make_activations(M, kn.K, uint64_t(M + kn.K));
      std::vector<uint16_t> y(size_t(M * kn.N));
      for (const Mode& mode : kModes) {
        if (nano && mode.a == ActivationOperand::E4M3Codes) continue;
        Row row;
        char key[96];
        std::snprintf(key, sizeof key, "%-5s %5lld %6lld %6lld", mode.name, (long long)M, (long long)kn.K,
                      (long long)kn.N);
        row.key = key;
        row.gflops[0] = row.gflops[1] = 0;
        for (const KernelSet* v : variants) {
          const GemmArgs g = timing_args(x, w, mode, y);
          double cpu = 0;
          const double t = best_seconds([&] { v->linear.gemm(g); }, 3, budget, &cpu);
          const double gf = gflop / t;
          row.gflops[std::string(v->name) == "amx" ? 1 : 0] = gf;
          std::printf("time,%d,%s,%lld,%lld,%lld,%s,%.6g,%.1f,%.6g,%.1f\n", threads, mode.name, (long long)M,
                      (long long)kn.K, (long long)kn.N, v->name, t, gf, cpu, gflop / cpu);
          std::fflush(stdout);
        }
        rows.push_back(row);
      }
    }
  }
  std::printf("\nsummary, %d thread(s), GFLOP/s:\n%-5s %5s %6s %6s | %9s %9s | amx/avx512\n", threads, "mode", "M", "K",
              "N", "avx512", "amx");
  for (const Row& r : rows) {
    auto cell = [](double g) {
      char text[32] = "-";
      if (g > 0) std::snprintf(text, sizeof text, "%.1f", g);
      return std::string(text);
    };
    std::printf("%s | %9s %9s | ", r.key.c_str(), cell(r.gflops[0]).c_str(), cell(r.gflops[1]).c_str());
    if (r.gflops[0] > 0 && r.gflops[1] > 0) {
      std::printf("%.2fx\n", r.gflops[1] / r.gflops[0]);
    } else {
      std::printf("-\n");
    }
  }
  std::printf("timing: %.1f s\n", now() - start);
}

void run_sweep(bool quick, bool nano, double budget) {
  const int threads = ThreadPool::global().size();
  std::printf("\n== amx blocking sweep, %d thread(s): GFLOP/s per blocking (x_rows/w_rows/k_chunk/prepack)\n", threads);
  if (!kernel_variant_supported("amx")) {
    std::printf("amx not supported here: skipped\n");
    return;
  }
  struct Shape { int64_t M, K, N; };
  std::vector<Shape> shapes = {{16, 4096, 4096}, {256, 4096, 4096}, {1024, 4096, 4096}, {4096, 4096, 4096}};
  if (quick) shapes = {{256, 1024, 1024}};
  std::vector<amx::Blocking> blockings = {
      {256, 256, 256, -1}, {256, 256, 256, 1},  {256, 256, 128, -1}, {256, 256, 512, -1}, {256, 256, 1024, -1},
      {128, 128, 256, -1}, {512, 256, 256, -1}, {256, 512, 256, -1}, {512, 512, 256, -1}, {1024, 256, 256, -1},
      {256, 64, 2048, -1},
  };
  if (nano) {
    shapes = {{1324, 4096, 4096}, {1324, 4096, 12288}, {1324, 12288, 4096}, {2648, 4096, 12288}};
    blockings = {{512, 256, 256, -1}, {512, 256, 256, 0}, {1024, 256, 256, -1}, {1024, 128, 256, 0},
                 {2048, 128, 256, 0}, {2048, 64, 256, 0},  {2048, 128, 128, 0}, {512, 512, 256, -1}};
  }
  for (const Shape& s : shapes) {
    const Weights w = make_weights(s.N, s.K, uint64_t(s.N * 11 + s.K));
    const Activations x = make_activations(s.M, s.K, uint64_t(s.M * 13 + s.K));
    const double gflop = 2.0 * double(s.M) * double(s.N) * double(s.K) * 1e-9;
    for (const Mode& mode : nano ? std::vector<Mode>{kModes[1], kModes[2]} : std::vector<Mode>{kModes[0], kModes[2]}) {
      std::vector<uint16_t> reference(size_t(s.M * s.N));
      kernel_variant("amx").linear.gemm(timing_args(x, w, mode, reference));
      std::string line;
      for (const amx::Blocking& b : blockings) {
        std::vector<uint16_t> y(size_t(s.M * s.N));
        const GemmArgs g = timing_args(x, w, mode, y);
        const double t = best_seconds([&] { amx::gemm_with_blocking(g, b); }, 3, budget);
        const bool same = y == reference;
        if (!same) ++g_failures;
        char cell[96];
        std::snprintf(cell, sizeof cell, " %lld/%lld/%lld/%d=%.0f%s", (long long)b.x_rows, (long long)b.w_rows,
                      (long long)b.k_chunk, b.prepack_weights, gflop / t, same ? "" : "(BITS DIFFER: FAIL)");
        line += cell;
      }
      std::printf("sweep %-5s M=%lld K=%lld N=%lld:%s\n", mode.name, (long long)s.M, (long long)s.K, (long long)s.N,
                  line.c_str());
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool correctness = false, blocking = false, timing = false, sweep = false, quick = false, nano = false, info = false;
  double max_gflop = 1e30, budget = 1.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--info") {
      info = true;
    } else if (arg == "--correctness") {
      correctness = true;
    } else if (arg == "--blocking") {
      blocking = true;
    } else if (arg == "--timing") {
      timing = true;
    } else if (arg == "--sweep") {
      sweep = true;
    } else if (arg == "--quick") {
      quick = true;
    } else if (arg == "--nano") {
      nano = true;
    } else if (arg == "--max-gflop" && i + 1 < argc) {
      max_gflop = std::atof(argv[++i]);
    } else if (arg == "--budget" && i + 1 < argc) {
      budget = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--info] [--correctness] [--blocking] [--timing] [--sweep] [--quick] "
                   "[--nano] [--max-gflop G] [--budget S]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!info && !correctness && !blocking && !timing && !sweep) correctness = blocking = timing = sweep = true;
  try {
    const stepmix::CpuFeatures& f = stepmix::cpu_features();
    std::printf("cpu flags: %s\n", f.describe().c_str());
    std::printf("can_run_avx512_bf16: %s, can_run_amx_bf16: %s\n", f.can_run_avx512_bf16() ? "yes" : "no",
                f.can_run_amx_bf16() ? "yes" : "no");
    if (f.can_run_amx_bf16()) {
      std::printf("AMX permission (arch_prctl ARCH_REQ_XCOMP_PERM): %s\n",
                  stepmix::request_amx_permission() ? "granted" : "REFUSED");
    } else {
      std::printf("AMX permission: not asked (the CPU/OS cannot run AMX-BF16)\n");
    }
    std::printf("variants:");
    for (const stepmix::kernels::KernelSet& k : stepmix::kernels::kernel_variants())
      std::printf(" %s(%s)", k.name, k.linear.supported() ? "supported" : "unsupported");
    std::printf("\nactive (start-up choice): %s, threads: %d\n", stepmix::kernels::active_kernels().describe().c_str(),
                stepmix::ThreadPool::global().size());
    std::fflush(stdout);
    if (info) return 0;
    if (correctness) run_correctness(quick);
    if (blocking) run_blocking_checks(quick);
    if (timing) run_timing(quick, nano, max_gflop, budget);
    if (sweep) run_sweep(quick, nano, budget);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  std::printf("\n%s: %d failing check(s)\n", g_failures ? "FAIL" : "OK", g_failures);
  return g_failures ? 1 : 0;
}
