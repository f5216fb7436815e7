// The flash attention kernel's own source run on the CPU by the SIMT emulator
// (attention_flash_on_cpu.hpp), where there is no GPU: the three shapes on the
// ragged problems of the GPU tests, held to the same bounds against the CPU
// reference kernel and float64 (attention_cases.hpp), with the number of
// tensor-core products the launch must issue and no shared-memory bank
// conflicts. A lane-layout, masking, tiling, shared-memory or cp.async
// ordering mistake fails here; the GPU test
// CudaAttention.FlashOnTheGpuMatchesItsCpuEmulation checks that the hardware
// agrees with the emulation.
#include "attention_flash_on_cpu.hpp"

#include <gtest/gtest.h>

#include "attention_cases.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_test_util.hpp"

namespace stepmix::test {
namespace {

class FlashAttentionOnCpu : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(FlashAttentionOnCpu, EveryVariantMeetsTheGpuBoundsAgainstTheReferenceAndFloat64) {
  const AttentionProblem p = GetParam().problem();
  const AttentionOperands o = make_attention_operands(p);
  std::vector<uint16_t> reference(o.q.size());
  kernels::ref::attention_bf16_reference(p, o.q.data(), o.k.data(), o.v.data(), reference.data());
  const std::vector<double> exact = attention_float64(p, widened(o.q), widened(o.k), widened(o.v));
  for (cuda::FlashVariant variant : cuda::kFlashVariants) {
    const std::string what = cuda::flash_variant_name(variant);
    const std::vector<uint16_t> flash = flash_attention_on_cpu(p, o.q, o.k, o.v, variant);
    EXPECT_EQ(simt::last_launch_counters().mma, flash_expected_mma_count(p, variant)) << what;
    // The XOR swizzle makes every ldmatrix read and cp.async write of the
    // tiles conflict-free.
    EXPECT_EQ(simt::last_launch_counters().shared_bank_conflicts, 0u) << what;
    expect_flash_bounds(flash, reference, exact, o.max_v, what);
  }
}

// The flash kernel's head sizes among the ragged problems.
std::vector<AttentionCase> flash_cases() {
  std::vector<AttentionCase> cases;
  for (const AttentionCase& c : ragged_attention_cases())
    if (c.head_dim == 64 || c.head_dim == 128) cases.push_back(c);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(RaggedShapes, FlashAttentionOnCpu, ::testing::ValuesIn(flash_cases()), attention_case_name);

TEST(FlashAttentionOnCpuLaunch, FullyMaskedPaddingRowsAndKeysLeaveNoTrace) {
  // One query row and one key in a block of 128 rows and a tile of 64 keys:
  // 127 padding rows must not be written, 63 zero-filled keys must get no
  // weight, and the one output is the one value row, exactly.
  const AttentionProblem p{1, 1, 1, 1, 128, false};
  const AttentionOperands o = make_attention_operands(p);
  for (cuda::FlashVariant variant : cuda::kFlashVariants)
    EXPECT_EQ(flash_attention_on_cpu(p, o.q, o.k, o.v, variant), o.v);
}

}  // namespace
}  // namespace stepmix::test
