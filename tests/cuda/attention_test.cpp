// CUDA attention: the plain reference kernel against the CPU reference
// (attention_bf16_reference), and both flash variants against the reference
// kernel and float64, on ragged sizes, GQA, causal (understanding stream) and
// non-causal over [understanding; generation] keys (generation stream);
// cuDNN's fused attention, where it runs, against the same bounds.
//
// Bounds. The reference kernel performs the CPU reference's operations in
// its order; only exp can differ (float64 rounded to float32 against glibc's
// expf, which agree but for rare last-bit cases), so at least 99% of outputs
// are identical and none is more than one bf16 step away. The flash kernel's
// bounds are in attention_cases.hpp; its CPU emulation
// (attention_flash_on_cpu_test.cpp) is held to the GPU's results here too.
#include "kernels/attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "attention_cases.hpp"
#include "attention_flash_on_cpu.hpp"
#include "common/error_of.hpp"
#include "cuda_test_util.hpp"
#include "kernels/attention_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace stepmix::test {
namespace {

// Runs `kernel` on the device and returns its output.
template <class Kernel>
std::vector<uint16_t> run_on_device(const AttentionProblem& p, const AttentionOperands& o, Kernel kernel) {
  cuda::DeviceBuffer q = to_device(o.q), k = to_device(o.k), v = to_device(o.v);
  cuda::DeviceBuffer out = poisoned<uint16_t>(o.q.size());
  kernel(p, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(), out.as<uint16_t>());
  return to_host<uint16_t>(out, o.q.size());
}

class CudaAttention : public CudaTest, public ::testing::WithParamInterface<AttentionCase> {
 protected:
  AttentionProblem problem() const { return GetParam().problem(); }
};

std::vector<uint16_t> reference_kernel(const AttentionProblem& p, const AttentionOperands& o) {
  return run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
    cuda::attention_reference_bf16(p, q, k, v, out, nullptr);
  });
}

TEST_P(CudaAttention, ReferenceKernelIsTheCpuReference) {
  const AttentionProblem p = problem();
  const AttentionOperands o = make_attention_operands(p);
  std::vector<uint16_t> cpu(o.q.size());
  kernels::ref::attention_bf16_reference(p, o.q.data(), o.k.data(), o.v.data(), cpu.data());
  const Bf16Agreement a = compare_bf16(reference_kernel(p, o), cpu);
  EXPECT_LE(a.worst_ulps, 1);
  EXPECT_GE(a.exact_fraction(), 0.99);
}

TEST_P(CudaAttention, FlashVariantsAgreeWithTheReferenceAndFloat64) {
  const AttentionProblem p = problem();
  if (!cuda::attention_flash_supported(p)) GTEST_SKIP() << "flash kernel: head_dim 64 or 128 only";
  const AttentionOperands o = make_attention_operands(p);
  const std::vector<uint16_t> reference = reference_kernel(p, o);
  const std::vector<double> exact = attention_float64(p, widened(o.q), widened(o.k), widened(o.v));
  for (cuda::FlashVariant variant : cuda::kFlashVariants) {
    const std::vector<uint16_t> flash =
        run_on_device(p, o, [variant](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
          cuda::attention_flash_bf16(p, q, k, v, out, nullptr, variant);
        });
    expect_flash_bounds(flash, reference, exact, o.max_v, cuda::flash_variant_name(variant));
  }
}

// The CPU tests run the flash kernel's source through the SIMT emulator
// (attention_flash_on_cpu_test.cpp); here the hardware is held to that
// emulation, which is what makes those tests evidence. The two differ only
// in the float32 rounding of the tensor-core sums and in exp2f (the GPU's is
// within 2 ulps), which can move a softmax weight across a bf16 rounding
// boundary: 2^-8·max|v| allows a few such steps, while a layout the
// emulation got wrong would be off by about max|v|. The share of identical
// outputs is printed.
TEST_P(CudaAttention, FlashOnTheGpuMatchesItsCpuEmulation) {
  const AttentionProblem p = problem();
  if (!cuda::attention_flash_supported(p)) GTEST_SKIP() << "flash kernel: head_dim 64 or 128 only";
  const AttentionOperands o = make_attention_operands(p);
  for (cuda::FlashVariant variant : cuda::kFlashVariants) {
    const std::vector<uint16_t> gpu =
        run_on_device(p, o, [variant](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
          cuda::attention_flash_bf16(p, q, k, v, out, nullptr, variant);
        });
    const std::vector<uint16_t> emulated = flash_attention_on_cpu(p, o.q, o.k, o.v, variant);
    double worst = 0;
    for (size_t i = 0; i < gpu.size(); ++i)
      worst = std::max(worst, std::fabs(double(bf16_to_float(gpu[i])) - bf16_to_float(emulated[i])));
    EXPECT_LE(worst, std::ldexp(o.max_v, -8)) << cuda::flash_variant_name(variant);
    std::printf("%s, GPU vs CPU emulation: %.4f identical, worst %.3g (max|v| %.3g)\n",
                cuda::flash_variant_name(variant), compare_bf16(gpu, emulated).exact_fraction(), worst, o.max_v);
  }
}

// attention_bf16 gives exactly the output of the engine attention_engine
// names (under this run's STEPMIX_CUDA_ATTENTION, the default unless the
// device check turned cuDNN off): the reference kernel where the flash
// kernel has no head dim, cuDNN's where it is preferred for a problem the
// flash kernel would take (a GPU with cuDNN 9.15.1 or newer;
// CudaCudnnAttention holds it to the flash bounds), the flash kernel
// otherwise.
TEST_P(CudaAttention, DispatchUsesFlashWhereSupportedAndTheReferenceElsewhere) {
  const AttentionProblem p = problem();
  const AttentionOperands o = make_attention_operands(p);
  const std::vector<uint16_t> chosen =
      run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
        cuda::attention_bf16(p, q, k, v, out, nullptr);
      });
  const cuda::AttentionEngine engine = cuda::attention_engine(p);
  if (engine == cuda::AttentionEngine::Cudnn) {
    if (cuda::attention_choice() == cuda::AttentionChoice::Auto) EXPECT_TRUE(cuda::attention_flash_supported(p));
    EXPECT_EQ(chosen, run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
                cuda::attention_cudnn_bf16(p, q, k, v, out, nullptr);
              }));
    return;
  }
  if (!cuda::attention_flash_supported(p)) {
    EXPECT_EQ(engine, cuda::AttentionEngine::Reference);
    EXPECT_EQ(chosen, reference_kernel(p, o));
    return;
  }
  const std::vector<uint16_t> flash =
      run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
        cuda::attention_flash_bf16(p, q, k, v, out, nullptr, cuda::FlashVariant::Auto);
      });
  EXPECT_EQ(chosen, flash);
}

INSTANTIATE_TEST_SUITE_P(RaggedShapes, CudaAttention, ::testing::ValuesIn(ragged_attention_cases()),
                         attention_case_name);

// cuDNN's fused attention, where this machine runs it (a GPU and cuDNN
// 9.13.1 or newer; the CPU build skips): held to the flash kernel's bounds on
// every non-causal ragged shape (the only problems it takes; where the flash
// kernel has no head dim, a shape cuDNN has no engine for is noted), and given them
// by attention_bf16 under STEPMIX_CUDA_ATTENTION=cudnn. Two tests, not one
// per shape: each test process pays cuDNN's start-up and its plans.
class CudaCudnnAttention : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    std::string why;
    if (!cuda::attention_cudnn_available(&why)) GTEST_SKIP() << why;
  }
};

TEST_F(CudaCudnnAttention, EveryNonCausalShapeMeetsTheFlashBounds) {
  for (const AttentionCase& c : ragged_attention_cases()) {
    const AttentionProblem p = c.problem();
    if (p.causal) continue;
    const AttentionOperands o = make_attention_operands(p);
    std::vector<uint16_t> cudnn;
    try {
      cudnn = run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
        cuda::attention_cudnn_bf16(p, q, k, v, out, nullptr);
      });
    } catch (const std::exception& e) {
      // The tiny test models' head dims, which the flash kernel lacks, reach
      // cuDNN only under STEPMIX_CUDA_ATTENTION=cudnn, where this error is
      // what the user gets: cuDNN's engines need not cover them. Any other
      // head dim is one attention_bf16 gives cuDNN by default.
      if (cuda::attention_flash_supported(p)) throw;
      std::cout << "note: cuDNN does not run head_dim " << p.head_dim << " here: " << e.what() << "\n";
      continue;
    }
    expect_flash_bounds(cudnn, reference_kernel(p, o),
                        attention_float64(p, widened(o.q), widened(o.k), widened(o.v)), o.max_v,
                        "cudnn sdpa " + attention_case_name(::testing::TestParamInfo<AttentionCase>(c, 0)));
  }
}

// attention_bf16's output is exactly one engine's: `run` under each value of
// STEPMIX_CUDA_ATTENTION against the engines called directly.
std::vector<uint16_t> under_attention_variable(const char* value, const AttentionProblem& p,
                                               const AttentionOperands& o) {
  ::setenv("STEPMIX_CUDA_ATTENTION", value, 1);
  const std::vector<uint16_t> out = run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
    cuda::attention_bf16(p, q, k, v, out, nullptr);
  });
  ::unsetenv("STEPMIX_CUDA_ATTENTION");
  return out;
}

TEST_F(CudaCudnnAttention, TheSwitchGivesNonCausalProblemsToCudnn) {
  const AttentionProblem p{33, 200, 16, 4, 128, false};
  const AttentionOperands o = make_attention_operands(p);
  const std::vector<uint16_t> cudnn = run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v,
                                                             auto out) {
    cuda::attention_cudnn_bf16(p, q, k, v, out, nullptr);
  });
  const std::vector<uint16_t> flash = run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v,
                                                             auto out) {
    cuda::attention_flash_bf16(p, q, k, v, out, nullptr, cuda::FlashVariant::Auto);
  });
  if (cudnn == flash) std::cout << "note: cuDNN and the flash kernel agree bit for bit here; outputs cannot tell them apart\n";
  EXPECT_EQ(under_attention_variable("cudnn", p, o), cudnn);
  EXPECT_EQ(under_attention_variable("flash", p, o), flash);
  // The default: cuDNN's where it is preferred (9.15.1 or newer), and then
  // exactly what attention_engine says.
  std::string why;
  const bool preferred = cuda::attention_cudnn_preferred(p, &why);
  EXPECT_EQ(under_attention_variable("auto", p, o), preferred ? cudnn : flash) << why;
  EXPECT_EQ(cuda::attention_engine(p), preferred ? cuda::AttentionEngine::Cudnn : cuda::AttentionEngine::Flash);
  std::cout << "cuDNN's attention by default: " << (preferred ? "yes" : "no (" + why + ")") << "\n";
}

class CudaAttentionArguments : public CudaTest {};

TEST_F(CudaAttentionArguments, FlashRefusesHeadDimsItHasNoKernelFor) {
  const AttentionProblem p{4, 4, 2, 1, 32, false};
  cuda::DeviceBuffer buffer(4096);
  const std::string error = error_of([&] {
    cuda::attention_flash_bf16(p, buffer.as<uint16_t>(), buffer.as<uint16_t>(), buffer.as<uint16_t>(),
                               buffer.as<uint16_t>(), nullptr);
  });
  EXPECT_TRUE(contains(error, "[cuda] attention_flash_bf16: head_dim must be 64 or 128, got 32"));
}

// STEPMIX_CUDA_ATTENTION: unset, empty or "auto" is the default (cuDNN's
// attention where attention_cudnn_preferred, else the flash kernel), "flash"
// never asks cuDNN, "cudnn" gives it every non-causal problem; causal
// problems stay with the flash kernel under every value; anything else is
// refused naming the variable. On the CPU build (no cuDNN) the default is the
// flash kernel, saying why.
TEST_F(CudaAttentionArguments, TheAttentionVariableTakesAutoFlashOrCudnnAndNothingElse) {
  using cuda::AttentionChoice;
  using cuda::AttentionEngine;
  ::unsetenv("STEPMIX_CUDA_ATTENTION");
  EXPECT_EQ(cuda::attention_choice(), AttentionChoice::Auto);
  for (const auto& [value, choice] : {std::pair{"", AttentionChoice::Auto}, std::pair{"auto", AttentionChoice::Auto},
                                      std::pair{"flash", AttentionChoice::Flash},
                                      std::pair{"cudnn", AttentionChoice::Cudnn}}) {
    ::setenv("STEPMIX_CUDA_ATTENTION", value, 1);
    EXPECT_EQ(cuda::attention_choice(), choice) << value;
  }
  const AttentionProblem causal{5, 5, 4, 2, 64, true}, generation{5, 9, 4, 2, 64, false},
      odd_head{5, 9, 4, 2, 32, false};
  EXPECT_EQ(cuda::attention_engine(causal), AttentionEngine::Flash);  // under "cudnn"
  EXPECT_EQ(cuda::attention_engine(generation), AttentionEngine::Cudnn);
  ::setenv("STEPMIX_CUDA_ATTENTION", "flash", 1);
  EXPECT_EQ(cuda::attention_engine(generation), AttentionEngine::Flash);
  EXPECT_EQ(cuda::attention_engine(odd_head), AttentionEngine::Reference);  // no flash kernel for head_dim 32
  ::unsetenv("STEPMIX_CUDA_ATTENTION");
  std::string why;
  EXPECT_FALSE(cuda::attention_cudnn_preferred(causal, &why));
  EXPECT_TRUE(contains(why, "attention_cudnn_bf16: causal problems are the flash kernel's (attention_flash_bf16)"))
      << why;
  EXPECT_FALSE(cuda::attention_cudnn_preferred(AttentionProblem{5, 9, 4, 2, 36, false}, &why));
  EXPECT_TRUE(contains(why, "head_dim must be a multiple of 8 up to 256, got 36")) << why;
  const bool preferred = cuda::attention_cudnn_preferred(generation, &why);
  EXPECT_EQ(cuda::attention_engine(generation), preferred ? AttentionEngine::Cudnn : AttentionEngine::Flash);
  std::string available_why;
  if (!cuda::attention_cudnn_available(&available_why)) {
    EXPECT_FALSE(preferred);
    EXPECT_EQ(why, available_why);  // the reason it has no cuDNN, as attention_cudnn_available says
  }
  // The causal problem runs on the flash kernel under "cudnn" too.
  const AttentionOperands o = make_attention_operands(causal);
  ::setenv("STEPMIX_CUDA_ATTENTION", "cudnn", 1);
  const std::vector<uint16_t> chosen =
      run_on_device(causal, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
        cuda::attention_bf16(p, q, k, v, out, nullptr);
      });
  ::unsetenv("STEPMIX_CUDA_ATTENTION");
  EXPECT_EQ(chosen, run_on_device(causal, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
              cuda::attention_flash_bf16(p, q, k, v, out, nullptr, cuda::FlashVariant::Auto);
            }));
  ::setenv("STEPMIX_CUDA_ATTENTION", "cuDNN", 1);
  const std::string error = error_of([] { cuda::attention_choice(); });
  ::unsetenv("STEPMIX_CUDA_ATTENTION");
  EXPECT_TRUE(contains(error, "[cuda] STEPMIX_CUDA_ATTENTION=cuDNN: expected auto (the default), flash or cudnn"))
      << error;
}

}  // namespace
}  // namespace stepmix::test
