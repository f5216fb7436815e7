// The up-front memory estimate of a generation and the refusal it drives.
#include "pipeline/memory_estimate.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "stepmix/error.hpp"
#include "synthetic_checkpoint.hpp"

namespace stepmix {
namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

Cosmos3Config nano(int64_t layers) {
  return parse_cosmos3_config(synthetic_config(benchmark_shape(4096, layers), true), "nano/config.json").config;
}

GenerationShape cfg_request(int64_t vision_tokens, bool batched) {
  GenerationShape s;
  s.vision_tokens = vision_tokens;
  s.cond_text_tokens = 300;
  s.uncond_text_tokens = 12;
  s.cfg_batched = batched;
  s.bf16_activations = true;
  return s;
}

TEST(MemoryEstimate, GrowsWithTokensAndBatchingAndCountsResidentWeightsOnce) {
  const Cosmos3Config c = nano(36);
  const int64_t weights = 14 * kGiB;
  const MemoryEstimate small = estimate_generation_memory(c, cfg_request(390, true), weights, 0, 0);
  const MemoryEstimate large = estimate_generation_memory(c, cfg_request(4096, true), weights, 0, 0);
  const MemoryEstimate separate = estimate_generation_memory(c, cfg_request(4096, false), weights, 0, 0);
  EXPECT_GT(large.activation_bytes, small.activation_bytes);
  EXPECT_GT(large.activation_bytes, separate.activation_bytes);  // two passes' rows at once
  EXPECT_GT(small.total_bytes(), weights);
  EXPECT_EQ(small.additional_bytes(), small.total_bytes());  // nothing resident yet
  // Weights already mapped and resident, and workspace already allocated, are not needed again.
  const MemoryEstimate warm =
      estimate_generation_memory(c, cfg_request(390, true), weights, weights, small.activation_bytes);
  EXPECT_EQ(warm.total_bytes(), small.total_bytes());
  EXPECT_EQ(warm.additional_bytes(), small.total_bytes() - weights - small.activation_bytes);
  // A 36-layer Nano-width FP8 step at 1024 tokens, CFG batched, fits the 20 GB target.
  const MemoryEstimate nano_step = estimate_generation_memory(c, cfg_request(1024, true), weights, 0, 0);
  EXPECT_LT(nano_step.total_bytes(), 20'000'000'000);
}

TEST(MemoryEstimate, RefusesWithNeededAgainstAvailable) {
  ::unsetenv("STEPMIX_MEMORY_CHECK");
  const MemoryEstimate e = estimate_generation_memory(nano(4), cfg_request(4096, true), 2 * kGiB, 0, 0);
  EXPECT_NO_THROW(check_generation_fits(e, e.additional_bytes(), "model"));
  try {
    check_generation_fits(e, e.additional_bytes() - 1, "nano/transformer");
    FAIL() << "not refused";
  } catch (const Error& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("nano/transformer: does not fit in memory: needs"), std::string::npos) << what;
    EXPECT_NE(what.find("weights 2.00 GiB mapped"), std::string::npos) << what;
    EXPECT_NE(what.find("is available (MemAvailable"), std::string::npos) << what;
  }
  ::setenv("STEPMIX_MEMORY_CHECK", "0", 1);
  EXPECT_NO_THROW(check_generation_fits(e, 0, "model"));
  ::unsetenv("STEPMIX_MEMORY_CHECK");
}

TEST(MemoryEstimate, ReadsMemAvailable) {
  const std::optional<int64_t> available = memory_available_bytes();
  ASSERT_TRUE(available.has_value());  // Linux
  EXPECT_GT(*available, 0);
}

TEST(MemoryEstimate, LimitFromTheEnvironmentCapsTheBudget) {
  ::setenv("STEPMIX_MEMORY_LIMIT_MIB", "3", 1);
  EXPECT_EQ(memory_budget_bytes(), std::optional<int64_t>(int64_t(3) << 20));
  ::setenv("STEPMIX_MEMORY_LIMIT_MIB", "1000000000", 1);  // above MemAvailable: MemAvailable stands
  const std::optional<int64_t> uncapped = memory_budget_bytes();
  ASSERT_TRUE(uncapped.has_value());
  EXPECT_LT(*uncapped, int64_t(1000000000) << 20);
  EXPECT_GT(*uncapped, int64_t(3) << 20);
  for (const char* bad : {"0", "-4", "2G", ""}) {
    ::setenv("STEPMIX_MEMORY_LIMIT_MIB", bad, 1);
    EXPECT_THROW(memory_budget_bytes(), Error) << "'" << bad << "'";
  }
  ::unsetenv("STEPMIX_MEMORY_LIMIT_MIB");
}

}  // namespace
}  // namespace stepmix
