// Benchmarks of the CUDA backend's kernels, one JSON object per line, for
// bench/cuda-device-check.sh (which runs bench/cuda_peer.py, the PyTorch
// peer, in the same run and bench/cuda_summary.py over both).
//
//   bench_cuda --info                 the device, as JSON
//   bench_cuda --ceilings             bf16 and FP8 GEMM at 8192³ and a device copy:
//                                     the ceilings the other numbers are read against
//   bench_cuda --linear               W8A8 / W8A8+quantize / W8A16 / W8A16 cached / BF16 at
//                                     M ∈ {1024, 4096, 44160}, (K, N) ∈ {4096², 4096×1024,
//                                     4096×12288, 12288×4096}, with a CPU spot check of rows
//   bench_cuda --attention            flash attention at 44,160 + 300 tokens (32 / 8 heads,
//                                     head_dim 128), every flash variant, spot-checked against the
//                                     reference kernel; and the 300-token causal prefill
//   bench_cuda --cudnn-attention      cuDNN's fused attention at that problem, spot-checked the same
//                                     way (an optional case: a failure is reported, not counted)
//   --quick                           small shapes (a smoke run)
//   --tiny                            shapes the CPU build's SIMT emulator runs in seconds
//                                     (bench_cuda_on_cpu, tests/cuda/bench_on_cpu.sh)
//   --reps N                          timed repetitions per case (median reported; default 15)
// Inputs are seeded device fills (never zeros). Timings are CUDA events
// around a batch of calls long enough (>= 2 ms) to hide launch overhead.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/numerics.hpp"
#include "cuda_bench_cases.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/linear_kernels.hpp"
#include "stepmix/error.hpp"

using namespace stepmix;
using cuda::DeviceBuffer;

namespace {

struct Options {
  bool info = false, ceilings = false, linear = false, attention = false, cudnn_attention = false, quick = false,
       tiny = false;
  int reps = 15;
};

// The problem sizes of a run: the (default), --quick's, --tiny's.
struct Sizes {
  int64_t ceiling_n;
  std::size_t copy_bytes;
  std::vector<int64_t> Ms;
  std::vector<std::pair<int64_t, int64_t>> KNs;
  int64_t und, vision, Hq, Hkv, D;  // attention: understanding and vision tokens, heads, head_dim
};

Sizes sizes_of(const Options& o) {
  if (o.tiny) return {128, std::size_t(1) << 20, {16, 48}, {{128, 128}, {128, 384}}, 20, 70, 4, 2, 128};
  if (o.quick)
    return {2048, std::size_t(256) << 20, {256, 1024}, {{1024, 1024}, {1024, 3072}}, 300, 4096, 32, 8, 128};
  return {8192, std::size_t(2) << 30, {1024, 4096, 44160}, {{4096, 4096}, {4096, 1024}, {4096, 12288}, {12288, 4096}},
          300, 44160, 32, 8, 128};
}

using bench::json_quoted;
using bench::run_case;

void emit(const std::string& json) {
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
}

std::string num(double x) {
  if (!std::isfinite(x)) return "null";  // JSON has no NaN: the summary shows it as not finite
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

struct Timing {
  double ms = 0;      // median per call
  double min_ms = 0;  // fastest per call
  int calls = 0;      // calls per timed batch
};

// Median time of one call of `f`, from `reps` timed batches.
Timing time_calls(const std::function<void()>& f, int reps) {
  cuda::StreamTimer timer;
  f();  // warm-up: plans, module load
  cuda::synchronize(nullptr);
  timer.start(nullptr);
  f();
  const double once = std::max(timer.stop_ms(nullptr), 1e-3);
  Timing t;
  t.calls = std::clamp(int(std::ceil(2.0 / once)), 1, 1000);
  std::vector<double> per_call;
  for (int r = 0; r < reps; ++r) {
    timer.start(nullptr);
    for (int c = 0; c < t.calls; ++c) f();
    per_call.push_back(timer.stop_ms(nullptr) / t.calls);
  }
  std::sort(per_call.begin(), per_call.end());
  t.ms = per_call[per_call.size() / 2];
  t.min_ms = per_call.front();
  return t;
}

std::string timing_fields(const Timing& t, double flop) {
  return "\"ms\": " + num(t.ms) + ", \"min_ms\": " + num(t.min_ms) + ", \"calls_per_batch\": " +
         std::to_string(t.calls) + ", \"tflops\": " + num(flop / (t.ms * 1e-3) / 1e12);
}

void info() {
  const cuda::DeviceInfo d = cuda::probe_device(0);
  std::string json = "{\"impl\": \"stepmix\", \"bench\": \"info\", \"usable\": " +
                     std::string(d.usable ? "true" : "false") + ", \"reason\": " + json_quoted(d.reason) +
                     ", \"build\": " + json_quoted(cuda::build_info());
  if (d.usable) {
    const cuda::MemoryInfo m = cuda::device_memory();
    json += ", \"name\": " + json_quoted(d.name) + ", \"compute_capability\": \"" + std::to_string(d.compute_major) +
            "." + std::to_string(d.compute_minor) + "\", \"multiprocessors\": " + std::to_string(d.multiprocessors) +
            ", \"l2_bytes\": " + std::to_string(d.l2_bytes) + ", \"memory_total\": " + std::to_string(m.total_bytes) +
            ", \"memory_free\": " + std::to_string(m.free_bytes) + ", \"driver\": " + std::to_string(d.driver_version) +
            ", \"runtime\": " + std::to_string(d.runtime_version);
  }
  emit(json + "}");
}

// ---------------------------------------------------------------- ceilings
void ceilings(const Options& o) {
  const int64_t n = sizes_of(o).ceiling_n;
  cuda::GemmRunner runner;
  DeviceBuffer a(n * n * 2), b(n * n * 2), y(n * n * 2), scales = DeviceBuffer::from_host(std::vector<float>{0.01f, 0.01f});
  cuda::fill_uniform_bf16(a.as<uint16_t>(), n * n, 1, -1, 1, nullptr);
  cuda::fill_uniform_bf16(b.as<uint16_t>(), n * n, 2, -1, 1, nullptr);
  const double flop = 2.0 * double(n) * double(n) * double(n);
  run_case("\"bench\": \"ceiling\", \"what\": \"bf16_gemm\"", [&] {
    const Timing t = time_calls(
        [&] { cuda::gemm_bf16(runner, a.as<uint16_t>(), b.as<uint16_t>(), n, n, n, {}, y.as<uint16_t>(), nullptr); },
        o.reps);
    emit("{\"impl\": \"stepmix\", \"bench\": \"ceiling\", \"what\": \"bf16_gemm\", \"n\": " + std::to_string(n) +
         ", " + timing_fields(t, flop) + "}");
  });
  run_case("\"bench\": \"ceiling\", \"what\": \"fp8_gemm\"", [&] {
    // a and b again, now holding finite FP8 codes.
    cuda::fill_random_e4m3(a.as<uint8_t>(), n * n, 3, nullptr);
    cuda::fill_random_e4m3(b.as<uint8_t>(), n * n, 4, nullptr);
    const Timing t = time_calls(
        [&] {
          cuda::gemm_w8a8(runner, a.as<uint8_t>(), b.as<uint8_t>(), n, n, n, scales.as<float>(),
                          scales.as<float>() + 1, {}, y.as<uint16_t>(), nullptr);
        },
        o.reps);
    emit("{\"impl\": \"stepmix\", \"bench\": \"ceiling\", \"what\": \"fp8_gemm\", \"n\": " + std::to_string(n) +
         ", " + timing_fields(t, flop) + "}");
  });
  run_case("\"bench\": \"ceiling\", \"what\": \"device_copy\"", [&] {
    const std::size_t bytes = sizes_of(o).copy_bytes;
    DeviceBuffer src(bytes), dst(bytes);
    cuda::fill_zero(src.data(), bytes, nullptr);
    const Timing t = time_calls([&] { cuda::copy_device(dst.data(), src.data(), bytes, nullptr); }, o.reps);
    emit("{\"impl\": \"stepmix\", \"bench\": \"ceiling\", \"what\": \"device_copy\", \"bytes\": " +
         std::to_string(bytes) + ", \"ms\": " + num(t.ms) +
         ", \"tb_per_s\": " + num(2.0 * double(bytes) / (t.ms * 1e-3) / 1e12) + "}");
  });
}

// ---------------------------------------------------------------- linear
// Largest |got − want| / max|want|.
double relative_error(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, double(std::fabs(bf16_to_float(got[i]) - bf16_to_float(want[i]))));
    scale = std::max(scale, double(std::fabs(bf16_to_float(want[i]))));
  }
  return scale > 0 ? worst / scale : worst;
}

void linear(const Options& o) {
  const Sizes sizes = sizes_of(o);
  const std::vector<int64_t>& Ms = sizes.Ms;
  const std::vector<std::pair<int64_t, int64_t>>& KNs = sizes.KNs;
  cuda::GemmRunner runner;
  const float s_x = 4.0f / 448.0f, s_w = 0.05f / 448.0f;
  DeviceBuffer scales = DeviceBuffer::from_host(std::vector<float>{s_x, s_w});
  for (const auto& [K, N] : KNs) {
    DeviceBuffer w_bf16(N * K * 2), w_codes(N * K), w_decoded(N * K * 2), scratch(N * K * 2);
    cuda::fill_uniform_bf16(w_bf16.as<uint16_t>(), N * K, 11, -0.05f, 0.05f, nullptr);
    cuda::quantize_e4m3_bf16(w_bf16.as<uint16_t>(), N * K, s_w, w_codes.as<uint8_t>(), nullptr);
    cuda::dequantize_e4m3_to_bf16(w_codes.as<uint8_t>(), N * K, s_w, w_decoded.as<uint16_t>(), nullptr);
    for (int64_t M : Ms) {
      DeviceBuffer x(M * K * 2), x_codes(M * K), y(M * N * 2);
      cuda::fill_uniform_bf16(x.as<uint16_t>(), M * K, 12 + uint64_t(M), -4.0f, 4.0f, nullptr);
      cuda::quantize_e4m3_bf16(x.as<uint16_t>(), M * K, s_x, x_codes.as<uint8_t>(), nullptr);
      const double flop = 2.0 * double(M) * double(N) * double(K);
      const std::string shape = "\"M\": " + std::to_string(M) + ", \"K\": " + std::to_string(K) +
                                ", \"N\": " + std::to_string(N);
      auto report = [&](const char* mode, const std::function<void()>& f) {
        const std::string fields = "\"bench\": \"linear\", \"mode\": \"" + std::string(mode) + "\", " + shape;
        run_case(fields, [&] {
          const Timing t = time_calls(f, o.reps);
          emit("{\"impl\": \"stepmix\", " + fields + ", " + timing_fields(t, flop) +
               ", \"peak_allocated_bytes\": " + std::to_string(cuda::peak_allocated_bytes()) + "}");
        });
      };
      auto w8a8 = [&] {
        cuda::gemm_w8a8(runner, x_codes.as<uint8_t>(), w_codes.as<uint8_t>(), M, N, K, scales.as<float>(),
                        scales.as<float>() + 1, {}, y.as<uint16_t>(), nullptr);
      };
      report("W8A8", w8a8);
      // CPU spot check of the first rows of the W8A8 product.
      if (M == Ms.front())
        run_case("\"bench\": \"check\", \"what\": \"W8A8 rows 0-3 vs CPU reference\", " + shape, [&] {
          const int64_t rows = 4;
          const std::vector<uint8_t> xc = x_codes.to_host<uint8_t>(std::size_t(rows * K));
          const std::vector<uint8_t> wc = w_codes.to_host<uint8_t>(std::size_t(N * K));
          std::vector<uint16_t> cpu(std::size_t(rows * N));
          kernels::GemmArgs args;
          args.M = rows, args.N = N, args.K = K, args.arithmetic = kernels::GemmArithmetic::BF16;
          args.a_type = kernels::ActivationOperand::E4M3Codes, args.a = xc.data();
          args.w_type = kernels::WeightOperand::E4M3, args.w = wc.data(), args.alpha = s_x * s_w;
          args.y_type = kernels::OutputType::BF16, args.y = cpu.data();
          kernels::ref::gemm(args);
          w8a8();
          cuda::synchronize(nullptr);
          const double error = relative_error(y.to_host<uint16_t>(cpu.size()), cpu);
          emit("{\"impl\": \"stepmix\", \"bench\": \"check\", \"what\": \"W8A8 rows 0-3 vs CPU reference\", " + shape +
               ", \"max_rel_error\": " + num(error) + ", \"pass\": " + (error < 1.0 / 64 ? "true" : "false") + "}");
        });
      report("W8A8+quantize", [&] {
        cuda::quantize_e4m3_bf16(x.as<uint16_t>(), M * K, s_x, x_codes.as<uint8_t>(), nullptr);
        w8a8();
      });
      report("W8A16", [&] {
        cuda::gemm_w8a16(runner, x.as<uint16_t>(), w_codes.as<uint8_t>(), s_w, M, N, K, {}, scratch.as<uint16_t>(),
                         y.as<uint16_t>(), nullptr);
      });
      report("W8A16 cached", [&] {
        cuda::gemm_bf16(runner, x.as<uint16_t>(), w_decoded.as<uint16_t>(), M, N, K, {}, y.as<uint16_t>(), nullptr);
      });
      report("BF16", [&] {
        cuda::gemm_bf16(runner, x.as<uint16_t>(), w_bf16.as<uint16_t>(), M, N, K, {}, y.as<uint16_t>(), nullptr);
      });
    }
  }
}

// ---------------------------------------------------------------- attention
void attention(const Options& o) {
  const Sizes sizes = sizes_of(o);
  const int64_t und = sizes.und, vision = sizes.vision, Hq = sizes.Hq, Hkv = sizes.Hkv, D = sizes.D;
  const AttentionProblem gen{vision, und + vision, Hq, Hkv, D, false};
  DeviceBuffer q(vision * Hq * D * 2), k((und + vision) * Hkv * D * 2), v((und + vision) * Hkv * D * 2);
  DeviceBuffer out(vision * Hq * D * 2), check(8 * Hq * D * 2), flash_part(8 * Hq * D * 2);
  cuda::fill_uniform_bf16(q.as<uint16_t>(), vision * Hq * D, 21, -1.0f, 1.0f, nullptr);
  cuda::fill_uniform_bf16(k.as<uint16_t>(), (und + vision) * Hkv * D, 22, -1.0f, 1.0f, nullptr);
  cuda::fill_uniform_bf16(v.as<uint16_t>(), (und + vision) * Hkv * D, 23, -1.0f, 1.0f, nullptr);
  const double flop = 4.0 * double(gen.q_rows) * double(gen.kv_rows) * double(Hq) * double(D);
  const std::string heads = ", \"q_heads\": " + std::to_string(Hq) + ", \"kv_heads\": " + std::to_string(Hkv) +
                            ", \"head_dim\": " + std::to_string(D);
  const std::string shape =
      "\"q_rows\": " + std::to_string(gen.q_rows) + ", \"kv_rows\": " + std::to_string(gen.kv_rows) + heads;
  // One kernel at the generation problem, then a spot check: 8 rows at each
  // end against the reference kernel.
  auto measure = [&](const std::string& name, const std::function<void()>& call, bool optional) {
    // Values in [10, 20] where an output in [-1, 1] belongs: a kernel that
    // leaves rows unwritten fails the spot check below.
    cuda::fill_uniform_bf16(out.as<uint16_t>(), vision * Hq * D, 99, 10.0f, 20.0f, nullptr);
    const Timing t = time_calls(call, std::max(3, o.reps / 3));
    emit("{\"impl\": \"stepmix\", \"bench\": \"attention\", \"variant\": \"" + name + "\", " + shape +
         ", \"causal\": false, " + timing_fields(t, flop) + "}");
    double worst = 0;
    const int64_t part_elements = 8 * Hq * D;
    for (int64_t row0 : {int64_t(0), vision - 8}) {
      const AttentionProblem part{8, gen.kv_rows, Hq, Hkv, D, false};
      cuda::attention_reference_bf16(part, q.as<uint16_t>() + row0 * Hq * D, k.as<uint16_t>(), v.as<uint16_t>(),
                                     check.as<uint16_t>(), nullptr);
      cuda::copy_device(flash_part.data(), out.as<uint16_t>() + row0 * Hq * D, std::size_t(part_elements) * 2,
                        nullptr);
      cuda::synchronize(nullptr);
      const std::vector<uint16_t> want = check.to_host<uint16_t>(std::size_t(part_elements));
      const std::vector<uint16_t> got = flash_part.to_host<uint16_t>(std::size_t(part_elements));
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(double(bf16_to_float(got[i])) - double(bf16_to_float(want[i])));
        if (std::isnan(d) || d > worst) worst = d;  // a NaN stays
      }
    }
    // Values are in [-1, 1]: the tests' bound is 2^-7·max|v|.
    emit("{\"impl\": \"stepmix\", \"bench\": \"check\", \"what\": \"" + name +
         " rows 0-7 and last 8 vs reference kernel\", \"max_abs_error\": " + num(worst) +
         ", \"pass\": " + (worst <= 1.0 / 128 ? "true" : "false") + (optional ? ", \"optional\": true" : "") +
         "}");
  };
  auto fields_of = [&](const std::string& name) {
    return "\"bench\": \"attention\", \"variant\": \"" + name + "\", " + shape + ", \"causal\": false";
  };
  // cuDNN's fused attention at the same problem (--cudnn-attention), an
  // optional case: a machine may lack cuDNN, and its first plan may compile
  // kernels for seconds, so the device check runs it on its own.
  if (o.cudnn_attention) {
    run_case(
        fields_of("cudnn sdpa"),
        [&] {
          measure("cudnn sdpa", [&] {
            cuda::attention_cudnn_bf16(gen, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
                                       out.as<uint16_t>(), nullptr);
          }, true);
        },
        /*optional=*/true);
  }
  if (!o.attention) return;
  for (cuda::FlashVariant variant : cuda::kFlashVariants) {
    const std::string name = cuda::flash_variant_name(variant);
    run_case(fields_of(name), [&] {
      measure(name, [&] {
        cuda::attention_flash_bf16(gen, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(), out.as<uint16_t>(),
                                   nullptr, variant);
      }, false);
    });
  }
  // The understanding prefill: 300 causal tokens.
  const std::string prefill_fields = "\"bench\": \"attention\", \"variant\": \"flash auto\", \"q_rows\": " +
                                     std::to_string(und) + ", \"kv_rows\": " + std::to_string(und) + heads +
                                     ", \"causal\": true";
  run_case(prefill_fields, [&] {
    const AttentionProblem prefill{und, und, Hq, Hkv, D, true};
    const Timing t = time_calls(
        [&] {
          cuda::attention_bf16(prefill, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(), out.as<uint16_t>(),
                               nullptr);
        },
        o.reps);
    emit("{\"impl\": \"stepmix\", " + prefill_fields + ", " +
         timing_fields(t, 2.0 * double(und) * double(und + 1) * double(Hq) * double(D)) + "}");
  });
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--info") o.info = true;
    else if (a == "--ceilings") o.ceilings = true;
    else if (a == "--linear") o.linear = true;
    else if (a == "--attention") o.attention = true;
    else if (a == "--cudnn-attention") o.cudnn_attention = true;
    else if (a == "--quick") o.quick = true;
    else if (a == "--tiny") o.tiny = true;
    else if (a == "--reps" && i + 1 < argc) o.reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr,
                   "usage: bench_cuda [--info] [--ceilings] [--linear] [--attention] [--cudnn-attention] "
                   "[--quick | --tiny] [--reps N]\n");
      return 2;
    }
  }
  try {
    const bool any = o.ceilings || o.linear || o.attention || o.cudnn_attention;
    if (o.info || !any) info();
    if (!any) return 0;
    cuda::require_device(0);
    if (o.ceilings) ceilings(o);
    if (o.linear) linear(o);
    if (o.attention || o.cudnn_attention) attention(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return bench::failed_cases() ? 1 : 0;
}
