// The start-up choice of kernels (kernel_set.hpp): per family, forced names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/kernel_set.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

using kernels::KernelSet;

bool yes() { return true; }
bool no() { return false; }

// A CPU with AVX-512F but without AVX512_BF16: the "avx512" variant's linear
// and convolution families cannot run, its attention and pointwise families can.
std::vector<KernelSet> avx512f_only_cpu() {
  KernelSet ref = kernels::reference_kernels();
  KernelSet avx512 = ref;
  avx512.name = "avx512";
  avx512.linear.supported = no;
  avx512.attention.supported = yes;
  avx512.pointwise.supported = yes;
  avx512.convolution.supported = no;
  KernelSet amx = avx512;
  amx.name = "amx";
  amx.attention.supported = no;
  amx.pointwise.supported = no;
  return {ref, avx512, amx};
}

TEST(KernelChoice, EachFamilyComesFromTheMostPreferredVariantThatRunsIt) {
  const auto table = avx512f_only_cpu();
  const kernels::ActiveKernels a = kernels::choose_kernels(table, nullptr);
  EXPECT_STREQ(a.linear_variant, "ref");
  EXPECT_STREQ(a.attention_variant, "avx512");
  EXPECT_STREQ(a.pointwise_variant, "avx512");
  EXPECT_STREQ(a.convolution_variant, "ref");
  EXPECT_EQ(a.describe(), "linear=ref attention=avx512 pointwise=avx512 convolution=ref");
  EXPECT_EQ(kernels::choose_kernels(table, "").describe(), a.describe());
}

TEST(KernelChoice, AForcedVariantTakesEveryFamilyOrIsRefused) {
  const auto table = avx512f_only_cpu();
  EXPECT_EQ(kernels::choose_kernels(table, "ref").describe(), "ref");
  EXPECT_THROW(kernels::choose_kernels(table, "avx512"), Error);  // its GEMM cannot run here
  try {
    kernels::choose_kernels(table, "sse9");
    FAIL() << "unknown name accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected ref|avx512|amx"), std::string::npos) << e.what();
  }
}

TEST(KernelChoice, TheRealRegistryStartsWithRefAndEveryActiveFamilyRuns) {
  ASSERT_FALSE(kernels::kernel_variants().empty());
  EXPECT_STREQ(kernels::kernel_variants()[0].name, "ref");
  const kernels::ActiveKernels& a = kernels::active_kernels();
  EXPECT_TRUE(a.linear.supported());
  EXPECT_TRUE(a.attention.supported());
  EXPECT_TRUE(a.pointwise.supported());
  EXPECT_TRUE(a.convolution.supported());
}

}  // namespace
}  // namespace stepmix::test
