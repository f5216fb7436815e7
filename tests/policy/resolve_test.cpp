// §6 resolution: every branch and source, override errors, and the API overlay.
#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

using nlohmann::json;

ResolvedPolicy resolve(const json& config, const PolicyOverrides& overrides = {}) {
  return resolve_policy(config, kConfigPath, overrides);
}

PolicyOverrides with_mode(MixedPrecisionMode mode) {
  PolicyOverrides overrides;
  overrides.mode = mode;
  return overrides;
}

void expect_off(const ResolvedPolicy& resolved, const std::string& source) {
  EXPECT_FALSE(resolved.enabled);
  EXPECT_EQ(resolved.source, source);
  EXPECT_EQ(resolved.first_steps, 0);
  EXPECT_EQ(resolved.last_steps, 0);
  EXPECT_EQ(resolved.reasoner, TowerMode::Native);
}

TEST(Resolve, AutoFollowsTheCheckpointPolicy) {
  json policy = canonical_policy();
  policy["first_steps"]["count"] = 2;
  policy["reasoner"] = "native";
  const ResolvedPolicy resolved = resolve(fp8_config_with_policy(policy));
  EXPECT_TRUE(resolved.enabled);
  EXPECT_EQ(resolved.source, "checkpoint");
  EXPECT_EQ(resolved.first_steps, 2);
  EXPECT_EQ(resolved.last_steps, 3);
  EXPECT_EQ(resolved.overlap, TowerMode::A16);
  EXPECT_EQ(resolved.reasoner, TowerMode::Native);
  EXPECT_EQ(resolved.quant.kind, QuantizationKind::ModelOptFp8);
}

TEST(Resolve, AutoWithOverridesIsCheckpointPlusOverride) {
  PolicyOverrides overrides;
  overrides.first_steps = 5;
  overrides.overlap = TowerMode::Native;
  const ResolvedPolicy resolved = resolve(fp8_config_with_policy(canonical_policy()), overrides);
  EXPECT_TRUE(resolved.enabled);
  EXPECT_EQ(resolved.source, "checkpoint+override");
  EXPECT_EQ(resolved.first_steps, 5);
  EXPECT_EQ(resolved.last_steps, 3);
  EXPECT_EQ(resolved.overlap, TowerMode::Native);
  EXPECT_EQ(resolved.reasoner, TowerMode::A16);
}

TEST(Resolve, AutoWithoutPolicyIsOff) {
  expect_off(resolve(fp8_config_without_runtime()), "no-policy");
  expect_off(resolve(fp8_config_with_runtime(nullptr)), "no-policy");
}

TEST(Resolve, AutoWithoutPolicyRejectsOverrides) {
  PolicyOverrides overrides;
  overrides.reasoner = TowerMode::Native;
  error_message([&] { resolve(fp8_config_with_runtime(nullptr), overrides); },
                {"[policy] " + kConfigPath + ": checkpoint has no policy", "use mixed_precision=fp8 to force"});
}

// Spec §5/§6: an inert policy is validated, then ignored (source
// no-policy, as without one); a note says so, at info level.
TEST(Resolve, AutoWithInertScopeIsOff) {
  const ResolvedPolicy resolved = resolve(fp8_config_with_policy(policy_with("scope", json::array({"vae"}))));
  expect_off(resolved, "no-policy");
  ASSERT_EQ(resolved.notes.size(), 1u);
  EXPECT_NE(resolved.notes[0].find("scope leaves out \"transformer\": validated and not applied"), std::string::npos)
      << resolved.notes[0];
  EXPECT_TRUE(resolve(fp8_config_without_runtime()).notes.empty());
}

TEST(Resolve, AutoWithInertScopeRejectsOverrides) {
  PolicyOverrides overrides;
  overrides.last_steps = 1;
  error_message([&] { resolve(fp8_config_with_policy(policy_with("scope", json::array({"vae"}))), overrides); },
                {"checkpoint has no policy for the transformer (inert scope)"});
}

TEST(Resolve, NoneDisablesTheSchedule) {
  expect_off(resolve(fp8_config_with_policy(canonical_policy()), with_mode(MixedPrecisionMode::None)), "disabled");
  expect_off(resolve(bf16_config(), with_mode(MixedPrecisionMode::None)), "disabled");
}

TEST(Resolve, NoneRejectsOverrides) {
  PolicyOverrides overrides = with_mode(MixedPrecisionMode::None);
  overrides.first_steps = 3;
  error_message([&] { resolve(fp8_config_with_policy(canonical_policy()), overrides); },
                {"[policy] overrides conflict with mixed_precision=none"});
}

TEST(Resolve, NoneStillValidatesThePolicy) {
  error_message([] { resolve(fp8_config_with_policy(policy_with("type", "sigmoid")), with_mode(MixedPrecisionMode::None)); },
                {kPolicyField + ".type"});
}

TEST(Resolve, Fp8WithoutPolicyForcesTheDefault) {
  const ResolvedPolicy resolved = resolve(fp8_config_with_runtime(nullptr), with_mode(MixedPrecisionMode::Fp8));
  EXPECT_TRUE(resolved.enabled);
  EXPECT_EQ(resolved.source, "forced");
  EXPECT_EQ(resolved.first_steps, 3);
  EXPECT_EQ(resolved.last_steps, 3);
  EXPECT_EQ(resolved.overlap, TowerMode::A16);
  EXPECT_EQ(resolved.reasoner, TowerMode::A16);
}

TEST(Resolve, Fp8WithOverridesIsForcedPlusOverride) {
  PolicyOverrides overrides = with_mode(MixedPrecisionMode::Fp8);
  overrides.first_steps = 0;
  overrides.last_steps = 999;
  overrides.reasoner = TowerMode::Native;
  const ResolvedPolicy resolved = resolve(fp8_config_without_runtime(), overrides);
  EXPECT_EQ(resolved.source, "forced+override");
  EXPECT_EQ(resolved.first_steps, 0);
  EXPECT_EQ(resolved.last_steps, 999);
  EXPECT_EQ(resolved.reasoner, TowerMode::Native);
}

TEST(Resolve, Fp8WithACheckpointPolicyUsesIt) {
  json policy = canonical_policy();
  policy["last_steps"]["count"] = 1;
  const ResolvedPolicy resolved = resolve(fp8_config_with_policy(policy), with_mode(MixedPrecisionMode::Fp8));
  EXPECT_EQ(resolved.source, "checkpoint");
  EXPECT_EQ(resolved.last_steps, 1);
}

TEST(Resolve, Fp8IgnoresAnInertPolicyAndForcesTheDefault) {
  json policy = policy_with("scope", json::array({"vae"}));
  policy["first_steps"]["count"] = 7;
  const ResolvedPolicy resolved = resolve(fp8_config_with_policy(policy), with_mode(MixedPrecisionMode::Fp8));
  EXPECT_EQ(resolved.source, "forced");
  EXPECT_EQ(resolved.first_steps, 3);
}

TEST(Resolve, Bf16CheckpointIsUnquantizedUnderAuto) {
  const ResolvedPolicy resolved = resolve(bf16_config());
  expect_off(resolved, "no-policy");
  EXPECT_EQ(resolved.quant.kind, QuantizationKind::None);
}

TEST(Resolve, ForcingOnABf16CheckpointIsAnError) {
  error_message([] { resolve(bf16_config(), with_mode(MixedPrecisionMode::Fp8)); },
                {"mixed_precision=fp8 needs a serialised ModelOpt FP8 checkpoint", "no quantization_config"});
  PolicyOverrides overrides;
  overrides.first_steps = 2;
  error_message([&] { resolve(bf16_config(), overrides); }, {"mixed_precision=auto with overrides needs"});
}

TEST(Resolve, UnsupportedQuantizationIsRejectedInEveryMode) {
  json nvfp4 = fp8_config_without_runtime();
  nvfp4["quantization_config"]["quant_algo"] = "NVFP4";
  for (const auto mode : {MixedPrecisionMode::Auto, MixedPrecisionMode::None, MixedPrecisionMode::Fp8}) {
    error_message([&] { resolve(nvfp4, with_mode(mode)); },
                  {"checkpoint quantization not supported", "NVFP4 not supported"});
  }
}

TEST(Resolve, NegativeOverrideCountsAreRejected) {
  PolicyOverrides overrides = with_mode(MixedPrecisionMode::Fp8);
  overrides.first_steps = -1;
  error_message([&] { resolve(fp8_config_without_runtime(), overrides); },
                {"[policy] override first_steps: expected an integer >= 0, got -1"});
  overrides.first_steps.reset();
  overrides.last_steps = -3;
  error_message([&] { resolve(fp8_config_without_runtime(), overrides); }, {"override last_steps"});
}

TEST(Resolve, RuntimeWarningsAreCarriedThrough) {
  json runtime{{"diffusion_step_policy", canonical_policy()}, {"future", 1}};
  const ResolvedPolicy resolved = resolve(fp8_config_with_runtime(runtime));
  ASSERT_EQ(resolved.warnings.size(), 1u);
  EXPECT_NE(resolved.warnings[0].find("ignoring unknown key(s) future"), std::string::npos);
}

// ---- API overlay (Diffusers precedence: on-disk policy beats a live runtime: null)

TEST(Overlay, ApiConfigWithoutRuntimeGetsTheDiskPolicy) {
  const json disk = fp8_config_with_policy(canonical_policy());
  const json merged = overlay_runtime_from_disk(fp8_config_without_runtime(), disk);
  EXPECT_EQ(merged["quantization_config"]["runtime"], disk["quantization_config"]["runtime"]);
  EXPECT_EQ(resolve(merged).source, "checkpoint");
}

TEST(Overlay, LiveNullRuntimeLosesToTheDiskPolicy) {
  const json merged = overlay_runtime_from_disk(fp8_config_with_runtime(nullptr), fp8_config_with_policy(canonical_policy()));
  EXPECT_TRUE(resolve(merged).enabled);
}

TEST(Overlay, LiveRuntimeWithoutPolicyGetsTheDiskPolicy) {
  const json merged =
      overlay_runtime_from_disk(fp8_config_with_runtime(json::object()), fp8_config_with_policy(canonical_policy()));
  EXPECT_TRUE(merged["quantization_config"]["runtime"].contains("diffusion_step_policy"));
}

TEST(Overlay, LivePolicyIsKept) {
  json live_policy = canonical_policy();
  live_policy["first_steps"]["count"] = 1;
  const json live = fp8_config_with_policy(live_policy);
  EXPECT_EQ(overlay_runtime_from_disk(live, fp8_config_with_policy(canonical_policy())), live);
}

TEST(Overlay, MalformedLiveRuntimeIsKeptForTheParserToReject) {
  const json live = fp8_config_with_runtime("3/3");
  const json merged = overlay_runtime_from_disk(live, fp8_config_with_policy(canonical_policy()));
  EXPECT_EQ(merged, live);
  error_message([&] { resolve(merged); }, {"runtime must be an object or null"});
}

TEST(Overlay, DiskWithoutPolicyChangesNothing) {
  const json live = fp8_config_without_runtime();
  EXPECT_EQ(overlay_runtime_from_disk(live, fp8_config_with_runtime(nullptr)), live);
  EXPECT_EQ(overlay_runtime_from_disk(live, fp8_config_without_runtime()), live);
  EXPECT_EQ(overlay_runtime_from_disk(live, bf16_config()), live);
}

TEST(Overlay, ApiConfigWithoutQuantizationIsNotGivenAPolicy) {
  EXPECT_EQ(overlay_runtime_from_disk(bf16_config(), fp8_config_with_policy(canonical_policy())), bf16_config());
}

}  // namespace
}  // namespace stepmix::test
