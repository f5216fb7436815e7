// The CUDA backend behind the Backend seam (src/backend/cuda_backend.cpp):
// how it refuses without a usable GPU (checked on every machine), and on a GPU
// its Linears against the CPU backend's (dense, W8A16 transient and cached,
// W8A8 with sibling sharing and code hooks), resident constants, copies and
// the memory check, and the float32 timestep MLP.
//
// Linear bounds, per output element with CPU value c and S = Σ|x·w| (scaled
// as the output): both sides round one float32 sum to bf16 (2^-9·|e| each)
// and sum in different orders; the FP8 tensor cores keep ~14-bit partial
// sums (gemm_test.cpp allows 2^-11·S against the exact value, the CPU's
// float32 sums are far inside that). Allowed: 2^-7·|c| + 2^-10·S.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.hpp"
#include "common/error_of.hpp"
#include "cuda_test_util.hpp"
#include "quant/linear.hpp"

namespace stepmix::test {
namespace {

TEST(CudaBackendProbe, WithoutAUsableGpuTheBackendNamesWhatIsMissing) {
  std::string why_not;
  if (cuda::cuda_available(&why_not)) GTEST_SKIP() << "a usable GPU is present";
  const std::string message = error_of([] { cuda_backend(); });
  EXPECT_TRUE(contains(message, "[cuda] --device cuda: ")) << message;
  EXPECT_TRUE(contains(message, cuda::built_with_cuda() ? why_not : "built without CUDA"));
  EXPECT_EQ(error_of([] { backend_for(Device::Cuda); }), message);
  // The missing GPU is what is said first, before the activation dtype.
  EXPECT_EQ(error_of([] { backend_for(Device::Cuda, ActivationDType::F32); }), message);
  EXPECT_EQ(&backend_for(Device::Cpu, ActivationDType::F32), &cpu_backend());
}

class CudaBackend : public CudaTest {
 protected:
  Backend& gpu() { return cuda_backend(); }

  // A device copy of host values.
  template <class T>
  std::unique_ptr<BackendBuffer> on_gpu(const std::vector<T>& host) {
    auto buffer = gpu().allocate(host.size() * sizeof(T));
    gpu().upload(buffer->data(), host.data(), host.size() * sizeof(T));
    return buffer;
  }
  template <class T>
  std::vector<T> from_gpu(const BackendBuffer& buffer, std::size_t count) {
    std::vector<T> host(count);
    gpu().download(host.data(), buffer.data(), count * sizeof(T));
    return host;
  }
};

// Host tensors a Linear's views point into.
struct LinearData {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> bf16_weight, bias_bf16;
  std::vector<float> bias_f32;
  std::vector<float> exact;  // the weight as the product multiplies it (decoded·s_w or bf16)
};

enum class BiasKind { None, Bf16, F32 };

TensorView view(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, std::size_t bytes) {
  return TensorView{name, dtype, std::move(shape), static_cast<const std::byte*>(data), bytes, "test"};
}

Linear make_linear(LinearData& d, const std::string& name, int64_t N, int64_t K, bool fp8, float input_scale,
                   BiasKind bias, uint32_t seed, WeightCache cache = WeightCache::None,
                   W8A16Rounding rounding = W8A16Rounding::Single, bool bf16_scale = false) {
  const std::vector<float> w = normal_floats(std::size_t(N * K), seed, 1.0f / std::sqrt(float(K)));
  LinearWeights lw;
  lw.name = name;
  if (fp8) {
    float amax = 0;
    for (float x : w) amax = std::max(amax, std::fabs(x));
    const float s_w = amax / 448.0f;
    d.codes.resize(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) d.codes[i] = quantize_e4m3_saturating(w[i] / s_w);
    // bf16_scale: the same codes stored with bf16(s_w) as their scale.
    const float stored = bf16_scale ? bf16_to_float(float_to_bf16_rne(s_w)) : s_w;
    for (uint8_t c : d.codes) d.exact.push_back(e4m3_to_float(c) * stored);
    lw.weight = view(name + ".weight", DType::F8_E4M3, {N, K}, d.codes.data(), d.codes.size());
    lw.weight_scale = stored;
    lw.input_scale = input_scale;
  } else {
    for (float x : w) d.bf16_weight.push_back(float_to_bf16_rne(x));
    for (uint16_t b : d.bf16_weight) d.exact.push_back(bf16_to_float(b));
    lw.weight = view(name + ".weight", DType::BF16, {N, K}, d.bf16_weight.data(), d.bf16_weight.size() * 2);
  }
  if (bias == BiasKind::Bf16) {
    d.bias_bf16 = normal_bf16(std::size_t(N), seed + 1, 0.1f);
    lw.bias = view(name + ".bias", DType::BF16, {N}, d.bias_bf16.data(), d.bias_bf16.size() * 2);
  } else if (bias == BiasKind::F32) {
    d.bias_f32 = normal_floats(std::size_t(N), seed + 1, 0.1f);
    lw.bias = view(name + ".bias", DType::F32, {N}, d.bias_f32.data(), d.bias_f32.size() * 4);
  }
  return Linear(std::move(lw), cache, rounding);
}

// Every element of `gpu` within the bound of the file comment of `cpu`, for
// the product of x [M, K] (bf16, or its E4M3 codes times s_x) with `exact`.
void expect_close_to_cpu(const std::vector<uint16_t>& gpu, const std::vector<uint16_t>& cpu,
                         const std::vector<float>& x, const std::vector<float>& exact, int64_t M, int64_t N,
                         int64_t K, const std::string& what) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(double(x[std::size_t(m * K + k)]) * exact[std::size_t(n * K + k)]);
      const double c = bf16_to_float(cpu[std::size_t(m * N + n)]), g = bf16_to_float(gpu[std::size_t(m * N + n)]);
      ASSERT_LE(std::fabs(g - c), std::ldexp(std::fabs(c), -7) + std::ldexp(s, -10) + 1e-30)
          << what << " row " << m << " column " << n;
    }
}

TEST_F(CudaBackend, LinearsAgreeWithTheCpuInEveryModeAndShareCodesLikeIt) {
  const int64_t M = 77, K = 256;
  const float s_x = 4.0f / 448.0f;
  LinearData dq, dk, dv;
  // q and k share s_x bitwise, v does not: two quantizations in W8A8, as on the CPU.
  const Linear q = make_linear(dq, "q", 256, K, true, s_x, BiasKind::Bf16, 1);
  const Linear k = make_linear(dk, "k", 128, K, true, s_x, BiasKind::None, 2);
  const Linear v = make_linear(dv, "v", 128, K, true, std::nextafter(s_x, 1.0f), BiasKind::F32, 3);
  const std::vector<const Linear*> group{&q, &k, &v};
  const std::vector<uint16_t> x = normal_bf16(std::size_t(M * K), 4, 1.0f);
  std::vector<float> x_exact, x_codes;
  for (uint16_t b : x) x_exact.push_back(bf16_to_float(b));
  for (float f : x_exact) x_codes.push_back(e4m3_to_float(quantize_e4m3_saturating(f / s_x)) * s_x);
  const auto dx = on_gpu(x);

  for (Precision precision : {Precision::W8A16, Precision::W8A8}) {
    SCOPED_TRACE(std::string(precision_json_name(precision)));
    std::vector<std::vector<uint16_t>> cpu_y;
    std::vector<uint16_t*> cpu_ptrs;
    std::vector<std::unique_ptr<BackendBuffer>> gpu_y;
    std::vector<uint16_t*> gpu_ptrs;
    for (const Linear* l : group) {
      cpu_y.emplace_back(std::size_t(M * l->out_features()));
      gpu_y.push_back(gpu().allocate(std::size_t(M * l->out_features()) * 2));
    }
    for (std::size_t i = 0; i < group.size(); ++i) cpu_ptrs.push_back(cpu_y[i].data()), gpu_ptrs.push_back(gpu_y[i]->as<uint16_t>());
    const int cpu_quantizations = cpu_backend().linear(group, x.data(), M, cpu_ptrs, precision);
    const int gpu_quantizations = gpu().linear(group, dx->as<uint16_t>(), M, gpu_ptrs, precision);
    EXPECT_EQ(gpu_quantizations, cpu_quantizations);
    EXPECT_EQ(gpu_quantizations, precision == Precision::W8A8 ? 2 : 0);
    const LinearData* data[3] = {&dq, &dk, &dv};
    for (std::size_t i = 0; i < group.size(); ++i) {
      const int64_t N = group[i]->out_features();
      expect_close_to_cpu(from_gpu<uint16_t>(*gpu_y[i], std::size_t(M * N)), cpu_y[i],
                          precision == Precision::W8A8 ? x_codes : x_exact, data[i]->exact, M, N, K,
                          group[i]->name());
    }
  }
}

TEST_F(CudaBackend, W8A16WithTheWeightCacheIsBitIdenticalToTheTransientDecode) {
  const int64_t M = 300, N = 384, K = 512;
  LinearData a, b;
  const Linear plain = make_linear(a, "plain", N, K, true, 0.01f, BiasKind::Bf16, 11);
  const Linear cached = make_linear(b, "cached", N, K, true, 0.01f, BiasKind::Bf16, 11, WeightCache::All);
  const auto dx = on_gpu(normal_bf16(std::size_t(M * K), 12, 1.0f));
  auto y1 = gpu().allocate(std::size_t(M * N) * 2), y2 = gpu().allocate(std::size_t(M * N) * 2);
  gpu().linear(std::vector<const Linear*>{&plain}, dx->as<uint16_t>(), M, std::vector<uint16_t*>{y1->as<uint16_t>()},
               Precision::W8A16);
  const std::size_t before = cuda::allocated_bytes();
  gpu().linear(std::vector<const Linear*>{&cached}, dx->as<uint16_t>(), M, std::vector<uint16_t*>{y2->as<uint16_t>()},
               Precision::W8A16);
  EXPECT_EQ(from_gpu<uint16_t>(*y1, std::size_t(M * N)), from_gpu<uint16_t>(*y2, std::size_t(M * N)));
  // The cache was really used: the layer's bf16 copy (2 bytes a weight) was made.
  EXPECT_GE(cuda::allocated_bytes(), before + std::size_t(N * K * 2));
}

// W8A16Rounding::Diffusers on the GPU: the transient decode and the cache
// give the bits of a layer whose stored scale is bf16(s_w), as on the CPU
// (LinearBf16.DiffusersRoundingMultipliesByTheBf16Scale); W8A8 keeps s_w.
TEST_F(CudaBackend, DiffusersW8A16RoundingDecodesWithTheBf16Scale) {
  const int64_t M = 64, N = 192, K = 256;
  LinearData a, b, c, e;
  const Linear diffusers =
      make_linear(a, "diffusers", N, K, true, 0.01f, BiasKind::Bf16, 31, WeightCache::None, W8A16Rounding::Diffusers);
  const Linear cached =
      make_linear(b, "cached", N, K, true, 0.01f, BiasKind::Bf16, 31, WeightCache::All, W8A16Rounding::Diffusers);
  const Linear rounded_scale =
      make_linear(c, "rounded", N, K, true, 0.01f, BiasKind::Bf16, 31, WeightCache::None, W8A16Rounding::Single, true);
  const Linear single = make_linear(e, "single", N, K, true, 0.01f, BiasKind::Bf16, 31);
  ASSERT_NE(single.weight_scale(), rounded_scale.weight_scale());
  const auto dx = on_gpu(normal_bf16(std::size_t(M * K), 32, 1.0f));
  const auto run = [&](const Linear& l, Precision precision) {
    auto y = gpu().allocate(std::size_t(M * N) * 2);
    gpu().linear(std::vector<const Linear*>{&l}, dx->as<uint16_t>(), M, std::vector<uint16_t*>{y->as<uint16_t>()},
                 precision);
    return from_gpu<uint16_t>(*y, std::size_t(M * N));
  };
  const std::vector<uint16_t> expected = run(rounded_scale, Precision::W8A16);
  EXPECT_EQ(run(diffusers, Precision::W8A16), expected);
  EXPECT_EQ(run(cached, Precision::W8A16), expected);
  EXPECT_NE(run(single, Precision::W8A16), expected);
  EXPECT_EQ(run(diffusers, Precision::W8A8), run(single, Precision::W8A8));
}

TEST_F(CudaBackend, DenseLinearsAgreeWithTheCpuAndRefuseFloat32Weights) {
  const int64_t M = 64, N = 192, K = 96;
  LinearData d;
  const Linear dense = make_linear(d, "dense", N, K, false, 0, BiasKind::Bf16, 21);
  const std::vector<uint16_t> x = normal_bf16(std::size_t(M * K), 22, 1.0f);
  std::vector<float> x_exact;
  for (uint16_t v : x) x_exact.push_back(bf16_to_float(v));
  std::vector<uint16_t> cpu_y(std::size_t(M * N));
  dense.forward(x.data(), M, cpu_y.data(), Precision::W8A8);  // a dense layer ignores the precision
  const auto dx = on_gpu(x);
  auto y = gpu().allocate(cpu_y.size() * 2);
  EXPECT_EQ(gpu().linear(std::vector<const Linear*>{&dense}, dx->as<uint16_t>(), M,
                         std::vector<uint16_t*>{y->as<uint16_t>()}, Precision::W8A8),
            0);
  expect_close_to_cpu(from_gpu<uint16_t>(*y, cpu_y.size()), cpu_y, x_exact, d.exact, M, N, K, "dense");

  std::vector<float> w32(std::size_t(N * K), 0.5f);
  const Linear f32(LinearWeights{"f32", view("f32.weight", DType::F32, {N, K}, w32.data(), w32.size() * 4)});
  const std::string message = error_of([&] {
    gpu().linear(std::vector<const Linear*>{&f32}, dx->as<uint16_t>(), M, std::vector<uint16_t*>{y->as<uint16_t>()},
                 Precision::BF16);
  });
  EXPECT_TRUE(contains(message, "'f32'")) << message;
  EXPECT_TRUE(contains(message, "F32")) << message;
}

// A dense float32-weight Linear (the timestep MLP may store its weights so).
struct F32Linear {
  std::vector<float> weight, bias;
  Linear linear;
  F32Linear(const std::string& name, int64_t N, int64_t K, uint32_t seed)
      : weight(normal_floats(std::size_t(N * K), seed, 1.0f / std::sqrt(float(K)))),
        bias(normal_floats(std::size_t(N), seed + 1, 0.1f)),
        linear([&] {
          LinearWeights lw;
          lw.name = name;
          lw.weight = view(name + ".weight", DType::F32, {N, K}, weight.data(), weight.size() * 4);
          lw.bias = view(name + ".bias", DType::F32, {N}, bias.data(), bias.size() * 4);
          return Linear(std::move(lw));
        }()) {}
};

// The timestep MLP in float32 (Backend::timestep_mlp) against the CPU's.
// Both sides sum K float32 products in different orders, each within
// K·2^-24·S of the exact sum (S = Σ|x·w| + |b|), so they differ by at most
// twice that; SiLU is 1.1-Lipschitz and rounds once more (2^-24 relative);
// the second layer carries the hidden layer's differences through Σ|w|.
TEST_F(CudaBackend, TimestepMlpAgreesWithTheCpuForBf16AndFloat32Weights) {
  const int64_t U = 3, K = 256;
  for (const int64_t E : {int64_t(96), int64_t(100)}) {
    LinearData d1;
    const Linear first = make_linear(d1, "time_linear_1", E, K, false, 0, E == 96 ? BiasKind::Bf16 : BiasKind::None,
                                     61);
    const F32Linear second("time_linear_2", E, E, 62);
    const std::vector<float> sinusoid = normal_floats(std::size_t(U * K), 63, 0.7f);
    std::vector<float> cpu_hidden(std::size_t(U * E)), cpu_embedding(std::size_t(U * E));
    cpu_backend().timestep_mlp(first, second.linear, sinusoid.data(), U, cpu_hidden.data(), cpu_embedding.data());

    const auto dx = on_gpu(sinusoid);
    auto hidden = gpu().allocate(cpu_hidden.size() * 4), embedding = gpu().allocate(cpu_embedding.size() * 4);
    gpu().timestep_mlp(first, second.linear, dx->as<float>(), U, hidden->as<float>(), embedding->as<float>());
    const std::vector<float> h = from_gpu<float>(*hidden, cpu_hidden.size());
    const std::vector<float> e = from_gpu<float>(*embedding, cpu_embedding.size());

    std::vector<double> h_bound(std::size_t(U * E));
    for (int64_t u = 0; u < U; ++u)
      for (int64_t n = 0; n < E; ++n) {
        double s = d1.bias_bf16.empty() ? 0.0 : std::fabs(double(bf16_to_float(d1.bias_bf16[std::size_t(n)])));
        for (int64_t k = 0; k < K; ++k)
          s += std::fabs(double(sinusoid[std::size_t(u * K + k)]) * d1.exact[std::size_t(n * K + k)]);
        const std::size_t i = std::size_t(u * E + n);
        h_bound[i] = 1.1 * std::ldexp(2.0 * double(K + 1) * s, -24) + std::ldexp(std::fabs(cpu_hidden[i]), -23);
        ASSERT_LE(std::fabs(double(h[i]) - cpu_hidden[i]), h_bound[i]) << "hidden, E " << E << " row " << u << " " << n;
      }
    for (int64_t u = 0; u < U; ++u)
      for (int64_t n = 0; n < E; ++n) {
        double s = std::fabs(double(second.bias[std::size_t(n)])), carried = 0;
        for (int64_t k = 0; k < E; ++k) {
          const double w = second.weight[std::size_t(n * E + k)];
          s += std::fabs(double(cpu_hidden[std::size_t(u * E + k)]) * w);
          carried += std::fabs(w) * h_bound[std::size_t(u * E + k)];
        }
        const std::size_t i = std::size_t(u * E + n);
        ASSERT_LE(std::fabs(double(e[i]) - cpu_embedding[i]), std::ldexp(2.0 * double(E + 1) * s, -24) + carried)
            << "embedding, E " << E << " row " << u << " " << n;
      }
  }

  // The float32 weight serves the MLP only: a bf16 Linear call on the same
  // layer is still refused, and an FP8 layer is refused by the MLP.
  const F32Linear f32("f32_after_mlp", 64, 256, 64), square("square", 64, 64, 65);
  auto x = gpu().allocate(256 * 4), mid = gpu().allocate(64 * 4), y = gpu().allocate(64 * 4);
  auto y16 = gpu().allocate(64 * 2);
  gpu().upload(x->data(), std::vector<float>(256, 0.25f).data(), 256 * 4);
  gpu().timestep_mlp(f32.linear, square.linear, x->as<float>(), 1, mid->as<float>(), y->as<float>());
  const std::string refused = error_of([&] {
    gpu().linear(std::vector<const Linear*>{&f32.linear}, x->as<uint16_t>(), 1,
                 std::vector<uint16_t*>{y16->as<uint16_t>()}, Precision::BF16);
  });
  EXPECT_TRUE(contains(refused, "'f32_after_mlp'")) << refused;
  EXPECT_TRUE(contains(refused, "not F32")) << refused;
  LinearData d8;
  const Linear fp8 = make_linear(d8, "fp8_time", 64, 256, true, 1.0f, BiasKind::None, 66);
  const std::string fp8_refused = error_of([&] {
    gpu().timestep_mlp(fp8, square.linear, x->as<float>(), 1, mid->as<float>(), y->as<float>());
  });
  EXPECT_TRUE(contains(fp8_refused, "fp8_time")) << fp8_refused;
}

TEST_F(CudaBackend, CodeHooksSeeTheCodesAndTheirChangesReachTheGemm) {
  const int64_t M = 32, N = 64, K = 128;
  LinearData d;
  Linear l = make_linear(d, "hooked", N, K, true, 2.0f / 448.0f, BiasKind::None, 31);
  const std::vector<uint16_t> x = normal_bf16(std::size_t(M * K), 32, 1.0f);
  std::vector<uint8_t> seen_cpu, seen_gpu;
  const auto hook = [](std::vector<uint8_t>& seen) {
    return [&seen](const std::string&, uint8_t* codes, int64_t rows, int64_t cols) {
      seen.assign(codes, codes + rows * cols);
      for (int64_t i = 0; i < rows * cols; ++i) codes[i] = uint8_t(codes[i] ^ 0x80);  // every sign flipped
    };
  };
  std::vector<uint16_t> cpu_y(std::size_t(M * N));
  l.set_code_hook(hook(seen_cpu));
  l.forward(x.data(), M, cpu_y.data(), Precision::W8A8);
  l.set_code_hook(hook(seen_gpu));
  const auto dx = on_gpu(x);
  auto y = gpu().allocate(cpu_y.size() * 2);
  gpu().linear(std::vector<const Linear*>{&l}, dx->as<uint16_t>(), M, std::vector<uint16_t*>{y->as<uint16_t>()},
               Precision::W8A8);
  EXPECT_EQ(seen_gpu, seen_cpu) << "the CUDA quantizer is bit-exact with the CPU's";
  std::vector<float> flipped;
  for (uint8_t c : seen_cpu) flipped.push_back(e4m3_to_float(uint8_t(c ^ 0x80)) * (2.0f / 448.0f));
  expect_close_to_cpu(from_gpu<uint16_t>(*y, cpu_y.size()), cpu_y, flipped, d.exact, M, N, K, "hooked");
}

TEST_F(CudaBackend, ResidentConstantsFollowTheHostValues) {
  std::vector<float> norm = normal_floats(300, 41, 1.0f);
  const float* first = gpu().resident(norm);
  std::vector<float> back(norm.size());
  gpu().download(back.data(), first, back.size() * 4);
  EXPECT_EQ(back, norm);
  EXPECT_EQ(gpu().resident(norm), first) << "uploaded once";
  norm[7] = 42.0f;  // a vector at the same address with other values (another model's)
  gpu().download(back.data(), gpu().resident(norm), back.size() * 4);
  EXPECT_EQ(back, norm);
}

TEST_F(CudaBackend, FloatActivationsAreRefusedWithOneLine) {
  auto x = gpu().allocate(64 * 4);
  const std::vector<float> w(64, 1.0f);
  const std::string message = error_of([&] {
    gpu().rms_norm(x->as<float>(), 1, 64, gpu().resident(w), 1e-6f, NormKind::Standard, x->as<float>());
  });
  EXPECT_EQ(message, std::string("[cuda] ") + kF32ActivationsAreCpuOnly);
  EXPECT_EQ(error_of([] { backend_for(Device::Cuda, ActivationDType::F32); }), message);
}

TEST_F(CudaBackend, ALinearTheFp8GemmCannotRunIsRefusedBeforeARun) {
  // K = 72 is no multiple of 16: cuBLASLt's FP8 GEMM cannot take it, while
  // W8A16 (a bf16 GEMM) and the CPU can.
  LinearData d, e;
  const Linear odd = make_linear(d, "layers.0.mlp_moe_gen.down_proj", 32, 72, true, 8.0f / 448, BiasKind::None, 61);
  const Linear even = make_linear(e, "layers.0.mlp_moe_gen.up_proj", 72, 32, true, 8.0f / 448, BiasKind::None, 62);
  EXPECT_EQ(error_of([&] { gpu().require_runnable(odd, Precision::W8A8); }),
            "[cuda] linear 'layers.0.mlp_moe_gen.down_proj': W8A8 on FP8 tensor cores needs in_features % 16 == 0 and "
            "out_features % 8 == 0, got [32, 72]");
  EXPECT_EQ(error_of([&] { gpu().require_runnable(odd, Precision::W8A16); }), "");
  EXPECT_EQ(error_of([&] { gpu().require_runnable(even, Precision::W8A8); }), "");
  EXPECT_EQ(error_of([&] { backend_for(Device::Cpu, ActivationDType::BF16).require_runnable(odd, Precision::W8A8); }),
            "");
}

TEST_F(CudaBackend, CopiesAddRowAndTheMemoryCheck) {
  const std::vector<float> x = normal_floats(5 * 40, 51, 1.0f), row = normal_floats(40, 52, 1.0f);
  auto dx = on_gpu(x), drow = on_gpu(row), copy = gpu().allocate(x.size() * 4);
  gpu().add_row(dx->as<float>() + 40, 3, 40, drow->as<float>());  // rows 1..3 only
  gpu().copy(copy->data(), dx->data(), x.size() * 4);
  const std::vector<float> got = from_gpu<float>(*copy, x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool added = i >= 40 && i < 160;
    ASSERT_EQ(float_bits(got[i]), float_bits(added ? x[i] + row[i % 40] : x[i])) << i;
  }
  EXPECT_GT(gpu().memory_held(), 0u);
  EXPECT_GE(gpu().memory_peak(), gpu().memory_held());
  DeviceMemoryEstimate huge;
  huge.weights = std::size_t(1) << 50;
  const std::string message = error_of([&] { gpu().require_memory(huge, "a test request"); });
  EXPECT_TRUE(contains(message, "a test request (weights 1048576.00 GiB")) << message;
  EXPECT_TRUE(contains(message, "of GPU memory,")) << message;
  EXPECT_TRUE(contains(message, " free of ")) << message;
  gpu().require_memory(DeviceMemoryEstimate{}, "nothing");  // fits
}

}  // namespace
}  // namespace stepmix::test
