// Every golden forward (tests/data/golden/cosmos3-tiny/forward: dense, W8A16,
// W8A8 free running and with the stored activation codes) on the CUDA
// backend with bf16 activations, against the float32 goldens and against the
// CPU backend's bf16 forward of the same inputs.
//
// Bounds: against the goldens, those of the CPU's bf16 path
// (tests/model/forward_bf16_test.cpp, about 10x the bf16 noise it measures
// on the velocity: 5.8e-3 dense, 6.6e-3 W8A16, 3.4e-3 W8A8 with the stored
// codes; 2e-1 for W8A8 free running, measured 5.9e-2). Against the CPU's bf16 forward the same bounds apply, because
// the two make the same roundings at the same places and differ only where
// a float32 sum taken in another order (cuBLASLt's GEMMs, the norms'
// reductions, the softmax) falls on the other side of a bf16 rounding: each
// such flip is one more 2^-9-relative perturbation of the kind whose total
// the bf16 noise measures; W8A8 free running can also flip an activation
// code, as input noise does (README §9). Each test prints what it measured,
// so the first GPU run tells how much tighter the bounds could be.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/error_of.hpp"
#include "cuda_test_util.hpp"
#include "model/model_test_util.hpp"

namespace stepmix::test {
namespace {

class CudaForward : public CudaTest {};

struct Worst {
  double value = 0;
  std::string where;
  void add(double d, const std::string& name) {
    if (d > value) value = d, where = name;
  }
};

ForwardOptions bf16_options(Precision mode, ForwardDebug* debug = nullptr) {
  return {mode, mode, ActivationDType::BF16, debug};
}

// gpu and cpu: the same checkpoint on the two backends.
void compare_with_goldens_and_cpu(const std::string& folder, Precision mode, const char* golden_tensor, double bound,
                                  const char* label) {
  Cosmos3Transformer gpu = load_tiny(folder, WeightCache::None, cuda_backend());
  Cosmos3Transformer cpu = load_tiny(folder);
  Worst vs_golden, vs_cpu, hidden_vs_cpu;
  for (const std::string& name : forward_cases()) {
    auto golden = open_forward_case(name);
    const ForwardInputs in = read_forward_inputs(*golden);
    ForwardDebug gpu_debug, cpu_debug;
    const HostTensor g = gpu.forward(in, bf16_options(mode, &gpu_debug));
    const HostTensor c = cpu.forward(in, bf16_options(mode, &cpu_debug));
    ASSERT_EQ(g.shape, c.shape) << name;
    const double d_golden = max_normalised_deviation(g.data, golden_floats(*golden, golden_tensor));
    const double d_cpu = max_normalised_deviation(g.data, c.data);
    EXPECT_LE(d_golden, bound) << label << " " << name << " vs golden";
    EXPECT_LE(d_cpu, bound) << label << " " << name << " vs cpu bf16";
    vs_golden.add(d_golden, name);
    vs_cpu.add(d_cpu, name);
    ASSERT_EQ(gpu_debug.tensors.size(), cpu_debug.tensors.size()) << "the same intermediates are recorded";
    for (const auto& [tensor, value] : cpu_debug.tensors) {
      const double d = max_normalised_deviation(gpu_debug.tensors.at(tensor).data, value.data);
      EXPECT_LE(d, bound) << label << " " << name << " " << tensor;
      hidden_vs_cpu.add(d, name + ":" + tensor);
    }
  }
  std::printf("[ measured ] cuda bf16 %-18s velocity vs golden %.2e at %s, vs cpu bf16 %.2e at %s, intermediates vs "
              "cpu %.2e at %s (bound %.0e)\n",
              label, vs_golden.value, vs_golden.where.c_str(), vs_cpu.value, vs_cpu.where.c_str(), hidden_vs_cpu.value,
              hidden_vs_cpu.where.c_str(), bound);
}

TEST_F(CudaForward, DenseWithinTheBf16BoundOfTheGoldensAndTheCpu) {
  compare_with_goldens_and_cpu("transformer", Precision::BF16, "velocity", kBf16DenseBound, "dense");
}

TEST_F(CudaForward, W8A16WithinTheBf16BoundOfTheGoldensAndTheCpu) {
  compare_with_goldens_and_cpu("transformer-fp8", Precision::W8A16, "velocity_w8a16", kBf16W8A16Bound, "w8a16");
}

TEST_F(CudaForward, W8A8FreeRunningWithinTheBf16BoundOfTheGoldensAndTheCpu) {
  compare_with_goldens_and_cpu("transformer-fp8", Precision::W8A8, "velocity_w8a8", kBf16W8A8FreeRunningBound,
                               "w8a8 free running");
}

// The stored codes substituted on both backends: every W8A8 GEMM reads the
// same operands, what is left is the dense bf16 noise.
TEST_F(CudaForward, W8A8WithStoredCodesWithinTheDenseBf16Bound) {
  Worst vs_golden, vs_cpu;
  for (const std::string& name : forward_cases()) {
    auto golden = open_forward_case(name);
    const ForwardInputs in = read_forward_inputs(*golden);
    std::vector<float> velocity[2];
    int index = 0;
    for (Backend* backend : {&cuda_backend(), &cpu_backend()}) {
      Cosmos3Transformer model = load_tiny("transformer-fp8", WeightCache::None, *backend);
      int calls = 0;
      force_stored_codes(model, golden, calls);
      velocity[index++] = model.forward(in, bf16_options(Precision::W8A8)).data;
      EXPECT_EQ(calls, 28) << name << " on " << backend->describe() << ": every governed linear quantizes once";
    }
    const double d_golden = max_normalised_deviation(velocity[0], golden_floats(*golden, "velocity_w8a8"));
    const double d_cpu = max_normalised_deviation(velocity[0], velocity[1]);
    EXPECT_LE(d_golden, kBf16W8A8ForcedBound) << name;
    EXPECT_LE(d_cpu, kBf16W8A8ForcedBound) << name;
    vs_golden.add(d_golden, name);
    vs_cpu.add(d_cpu, name);
  }
  std::printf("[ measured ] cuda bf16 w8a8 stored codes velocity vs golden %.2e at %s, vs cpu bf16 %.2e at %s (bound "
              "%.0e)\n",
              vs_golden.value, vs_golden.where.c_str(), vs_cpu.value, vs_cpu.where.c_str(), kBf16W8A8ForcedBound);
}

TEST_F(CudaForward, WeightCacheAllGivesTheSameBitsAsTheTransientDecode) {
  Cosmos3Transformer plain = load_tiny("transformer-fp8", WeightCache::None, cuda_backend());
  Cosmos3Transformer cached = load_tiny("transformer-fp8", WeightCache::All, cuda_backend());
  int64_t fp8_parameters = 0;
  cached.for_each_governed_linear([&](Linear& l) {
    if (l.is_fp8()) fp8_parameters += l.out_features() * l.in_features();
  });
  for (const std::string& name : forward_cases()) {
    const ForwardInputs in = read_forward_inputs(*open_forward_case(name));
    const std::vector<float> transient = plain.forward(in, bf16_options(Precision::W8A16)).data;
    const std::size_t before = cuda::allocated_bytes();
    EXPECT_EQ(transient, cached.forward(in, bf16_options(Precision::W8A16)).data) << name;
    // The first cached forward really made the bf16 copies (2 bytes a weight).
    if (name == forward_cases().front())
      EXPECT_GE(cuda::allocated_bytes(), before + std::size_t(2 * fp8_parameters)) << "no bf16 weight copies made";
  }
}

TEST_F(CudaForward, RepeatedCallsReuseTheCacheAndTheScratchAndGiveTheSameBits) {
  Cosmos3Transformer model = load_tiny("transformer-fp8", WeightCache::None, cuda_backend());
  const ForwardInputs in = read_forward_inputs(*open_forward_case("video"));
  const HostTensor first = model.forward(in, bf16_options(Precision::W8A8));
  const std::size_t scratch = model.workspace_bytes();
  const HostTensor second = model.forward(in, bf16_options(Precision::W8A8));
  EXPECT_EQ(first.data, second.data);
  EXPECT_EQ(model.understanding_cache().hits(), 1u);
  EXPECT_EQ(model.workspace_bytes(), scratch);
}

// The device loop's batched CFG step: both passes over the one device latent
// in one forward_resident call, against two single calls. On the GPU the
// stacked rows may get another GEMM plan than a single pass's, so the bound
// is the bf16 one (bits are printed, not required); repeating the call gives
// the same bits with the rotary tables of both passes built once.
TEST_F(CudaForward, ResidentBatchWithinTheBf16BoundOfSinglePasses) {
  Cosmos3Transformer model = load_tiny("transformer-fp8", WeightCache::None, cuda_backend());
  const ForwardInputs cond = read_forward_inputs(*open_forward_case("video")), uncond = shorter_prompt(cond);
  const std::size_t n = cond.latent.data.size();
  const cuda::DeviceBuffer latent = to_device(cond.latent.data);
  cuda::DeviceBuffer batched[2] = {poisoned<float>(n), poisoned<float>(n)};
  cuda::DeviceBuffer alone[2] = {poisoned<float>(n), poisoned<float>(n)};
  // Those copies ran on the legacy default stream, which the backend's
  // non-blocking stream does not wait for.
  cuda::synchronize(nullptr);
  const ForwardInputs* both[2] = {&cond, &uncond};
  float* const velocities[2] = {batched[0].as<float>(), batched[1].as<float>()};
  const auto host = [&](const cuda::DeviceBuffer& buffer) {  // on the backend's stream
    std::vector<float> out(n);
    model.backend().download(out.data(), buffer.data(), n * sizeof(float));
    return out;
  };
  for (Precision mode : {Precision::W8A16, Precision::W8A8}) {
    model.forward_resident(both, latent.as<float>(), velocities, bf16_options(mode));
    const std::vector<float> first[2] = {host(batched[0]), host(batched[1])};
    model.forward_resident(both, latent.as<float>(), velocities, bf16_options(mode));
    model.forward_resident(cond, latent.as<float>(), alone[0].as<float>(), bf16_options(mode));
    model.forward_resident(uncond, latent.as<float>(), alone[1].as<float>(), bf16_options(mode));
    const double bound = mode == Precision::W8A16 ? kBf16W8A16Bound : kBf16W8A8FreeRunningBound;
    for (int i = 0; i < 2; ++i) {
      const std::vector<float> b = host(batched[i]), a = host(alone[i]);
      EXPECT_EQ(b, first[i]) << "sample " << i << ": the same call twice";
      const double d = max_normalised_deviation(b, a);
      EXPECT_LE(d, bound) << precision_json_name(mode) << " sample " << i;
      std::printf("[ measured ] cuda resident batch %s sample %d vs single pass %.2e (%s)\n",
                  std::string(precision_json_name(mode)).c_str(), i, d, same_bits(b, a) ? "same bits" : "bits differ");
    }
  }
  EXPECT_EQ(model.rope_cache().builds(), 2u) << "the rotary tables of both passes, built once";
}

TEST_F(CudaForward, FloatActivationsAreRefusedWithOneLine) {
  Cosmos3Transformer model = load_tiny("transformer", WeightCache::None, cuda_backend());
  const ForwardInputs in = read_forward_inputs(*open_forward_case("image"));
  EXPECT_EQ(error_of([&] { model.forward(in, {Precision::BF16, Precision::BF16, ActivationDType::F32}); }),
            std::string("[cuda] ") + kF32ActivationsAreCpuOnly);
}

}  // namespace
}  // namespace stepmix::test
