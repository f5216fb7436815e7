// cuDNN's attention without a GPU (src/kernels/cuda/attention_cudnn.cpp): the
// library opens by dlopen with every entry point, cuDNN accepts the SDPA
// operation's descriptors for the problems stepmix gives it (the project's
// [rows, heads, D] layouts as strides, GQA, the by-value scale), and the
// refusals come before any library call. Built where cuDNN's headers are;
// what needs a GPU (the plan, its numbers) is CudaAttention's
// CudnnAttentionMeetsTheFlashBoundsWhereCudnnRuns.
#include "kernels/cuda/attention_cudnn.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/error_of.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/cudnn_library.hpp"

namespace stepmix::test {
namespace {

using cuda::detail::cudnn;
using cuda::detail::CudnnLibrary;

TEST(CudnnLibrary, TheBuildsLibraryOpensWithEveryEntryPoint) {
  const CudnnLibrary& library = cudnn();
  EXPECT_NE(library.path.find("libcudnn.so." + std::to_string(CUDNN_MAJOR)), std::string::npos) << library.path;
#define STEPMIX_EXPECT_RESOLVED(name) EXPECT_NE(library.name, nullptr) << #name;
  STEPMIX_CUDNN_ENTRY_POINTS(STEPMIX_EXPECT_RESOLVED)
#undef STEPMIX_EXPECT_RESOLVED
  EXPECT_EQ(library.cudnnGetVersion() / 10000, std::size_t(CUDNN_MAJOR));
  EXPECT_STREQ(library.cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED), "CUDNN_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(&cudnn(), &library);
}

TEST(CudnnLibrary, AMissingLibraryIsOneErrorNamingEveryFileTried) {
  const std::string message =
      error_of([] { cuda::detail::open_cudnn({"libstepmix-no-such-library.so.9", "/nonexistent/libcudnn.so.9"}); });
  EXPECT_EQ(message.rfind("[cuda] cuDNN: no usable library (", 0), 0u) << message;
  EXPECT_NE(message.find("/nonexistent/libcudnn.so.9: cannot open shared object file"), std::string::npos) << message;
  EXPECT_NE(message.find("LD_LIBRARY_PATH"), std::string::npos) << message;
  const std::string lacking = error_of([] { cuda::detail::open_cudnn({"libz.so.1"}); });
  EXPECT_NE(lacking.find("libz.so.1: lacks cudnnGetVersion, cudnnGetErrorString,"), std::string::npos) << lacking;
}

TEST(CudnnAttention, CudnnAcceptsTheSdpaOperationOfEveryProblemShape) {
  if (cudnn().cudnnGetVersion() < 91301) GTEST_SKIP() << "cuDNN older than 9.13.1: no SDPA forward operation";
  // The Nano generation stream (44,160 vision rows over 300 + 44,160 keys,
  // 32 / 8 heads of 128), a 1024² image, head_dim 64, one KV head.
  for (const AttentionProblem& p : {AttentionProblem{44160, 44460, 32, 8, 128, false},
                                    AttentionProblem{1024, 1324, 32, 8, 128, false},
                                    AttentionProblem{70, 90, 4, 2, 64, false}, AttentionProblem{5, 7, 4, 1, 128, false}})
    EXPECT_NO_THROW(cuda::detail::validate_cudnn_attention(p)) << p.q_rows << " x " << p.kv_rows;
}

TEST(CudnnAttention, CausalProblemsAndOddHeadDimsAreRefusedBeforeCudnnIsCalled) {
  // Never dereferenced: the refusal comes first.
  auto* fake = reinterpret_cast<uint16_t*>(std::uintptr_t(4096));
  const std::string causal = error_of([&] {
    cuda::attention_cudnn_bf16(AttentionProblem{8, 8, 4, 2, 128, true}, fake, fake, fake, fake, nullptr);
  });
  EXPECT_NE(causal.find("attention_cudnn_bf16: causal problems are the flash kernel's"), std::string::npos) << causal;
  const std::string odd = error_of([&] {
    cuda::attention_cudnn_bf16(AttentionProblem{8, 8, 4, 2, 100, false}, fake, fake, fake, fake, nullptr);
  });
  EXPECT_NE(odd.find("head_dim must be a multiple of 8 up to 256, got 100"), std::string::npos) << odd;
}

// attention_cudnn_preferred where this machine cannot run cuDNN's attention
// (no GPU, as in CI): false, with the reason (no device, or a cuDNN older
// than 9.15.1), asked twice with the same answer
// (the first answer is remembered), and the default engine is the flash
// kernel's. Skipped where a GPU would make it true.
TEST(CudnnAttention, WithoutAGpuTheDefaultIsTheFlashKernelSayingWhy) {
  if (cuda::probe_device().usable) GTEST_SKIP() << "a GPU: CudaCudnnAttention checks the default there";
  const AttentionProblem nano{44160, 44460, 32, 8, 128, false};
  std::string first, second;
  EXPECT_FALSE(cuda::attention_cudnn_preferred(nano, &first));
  EXPECT_FALSE(cuda::attention_cudnn_preferred(nano, &second));
  // The reason is the device's (with cuDNN 9.15.1 or newer, as here) or the
  // library's (an older one): never empty.
  const std::string no_device = cuda::probe_device().reason;
  ASSERT_FALSE(first.empty() || no_device.empty());
  EXPECT_TRUE(first.find(no_device) != std::string::npos || first.find("older than 9.15.1") != std::string::npos)
      << first << " / " << no_device;
  EXPECT_EQ(first, second);
  EXPECT_EQ(cuda::attention_engine(nano), cuda::AttentionEngine::Flash);
}

}  // namespace
}  // namespace stepmix::test
