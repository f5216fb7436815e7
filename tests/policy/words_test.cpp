// Spelling of precisions and modes, and the user-input parsers (§6, README).
#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

TEST(Words, PrecisionJsonNames) {
  EXPECT_EQ(precision_json_name(Precision::BF16), "bf16");
  EXPECT_EQ(precision_json_name(Precision::W8A16), "w8a16");
  EXPECT_EQ(precision_json_name(Precision::W8A8), "w8a8");
}

TEST(Words, PrecisionTraceTokens) {
  EXPECT_EQ(precision_trace_token(Precision::BF16), "BF16");
  EXPECT_EQ(precision_trace_token(Precision::W8A16), "W8A16");
  EXPECT_EQ(precision_trace_token(Precision::W8A8), "W8A8");
}

TEST(Words, ModeNames) {
  EXPECT_EQ(tower_mode_name(TowerMode::A16), "a16");
  EXPECT_EQ(tower_mode_name(TowerMode::Native), "native");
  EXPECT_EQ(mixed_precision_mode_name(MixedPrecisionMode::Auto), "auto");
  EXPECT_EQ(mixed_precision_mode_name(MixedPrecisionMode::None), "none");
  EXPECT_EQ(mixed_precision_mode_name(MixedPrecisionMode::Fp8), "fp8");
  EXPECT_EQ(tower_name(Tower::Generation), "generation");
  EXPECT_EQ(tower_name(Tower::Reasoner), "reasoner");
}

TEST(Words, MixedPrecisionModeIsCaseInsensitive) {
  EXPECT_EQ(parse_mixed_precision_mode("auto"), MixedPrecisionMode::Auto);
  EXPECT_EQ(parse_mixed_precision_mode("None"), MixedPrecisionMode::None);
  EXPECT_EQ(parse_mixed_precision_mode("FP8"), MixedPrecisionMode::Fp8);
}

TEST(Words, MixedPrecisionModeRejectsOtherValues) {
  const std::string message = error_message([] { parse_mixed_precision_mode("nvfp4"); }, {});
  EXPECT_EQ(message, "[policy] mixed_precision: expected one of auto, none, fp8 (any case), got \"nvfp4\"");
  error_message([] { parse_mixed_precision_mode(""); }, {"got \"\""});
}

TEST(Words, ReasonerAcceptsAliases) {
  EXPECT_EQ(parse_reasoner_mode("a16"), TowerMode::A16);
  EXPECT_EQ(parse_reasoner_mode("NATIVE"), TowerMode::Native);
  EXPECT_EQ(parse_reasoner_mode("high_precision"), TowerMode::A16);
  EXPECT_EQ(parse_reasoner_mode("Base_Precision"), TowerMode::Native);
}

TEST(Words, ReasonerRejectsOtherValues) {
  error_message([] { parse_reasoner_mode("w8a16"); },
                {"[policy] reasoner: expected one of a16, native, high_precision, base_precision", "got \"w8a16\""});
}

TEST(Words, OverlapAcceptsA16AndNativeOnly) {
  EXPECT_EQ(parse_overlap_mode("A16"), TowerMode::A16);
  EXPECT_EQ(parse_overlap_mode("native"), TowerMode::Native);
  error_message([] { parse_overlap_mode("high_precision"); }, {"[policy] overlap: expected one of a16, native"});
}

}  // namespace
}  // namespace stepmix::test
