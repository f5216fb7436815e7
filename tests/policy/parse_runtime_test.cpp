// §1 states of quantization_config.runtime, §5 scope, §4 check 14.
#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

using nlohmann::json;

const std::string kRuntimeField = "quantization_config.runtime";

TEST(ParseRuntime, AbsentRuntimeMeansNoPolicy) {
  const ParsedPolicy parsed = parse_step_policy(fp8_config_without_runtime(), kConfigPath);
  EXPECT_FALSE(parsed.exists);
  EXPECT_FALSE(parsed.applies());
  EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ParseRuntime, NullRuntimeMeansNoPolicy) {
  const ParsedPolicy parsed = parse_step_policy(fp8_config_with_runtime(nullptr), kConfigPath);
  EXPECT_FALSE(parsed.exists);
  EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ParseRuntime, NoQuantizationConfigMeansNoPolicy) {
  EXPECT_FALSE(parse_step_policy(bf16_config(), kConfigPath).exists);
  json config = bf16_config();
  config["quantization_config"] = nullptr;
  EXPECT_FALSE(parse_step_policy(config, kConfigPath).exists);
}

TEST(ParseRuntime, NonObjectRuntimeIsAnError) {
  for (const json& runtime : {json("3/3"), json::array({1}), json(3), json(true)}) {
    const std::string message = policy_error(fp8_config_with_runtime(runtime), {});
    EXPECT_EQ(message, "[policy] " + kConfigPath + ": " + kRuntimeField +
                           ": runtime must be an object or null, got " + runtime.dump());
  }
}

TEST(ParseRuntime, NullPolicyIsAnError) {
  policy_error(fp8_config_with_runtime({{"diffusion_step_policy", nullptr}}),
               {kPolicyField + ": must be an object, got null"});
}

TEST(ParseRuntime, NonObjectPolicyIsAnError) {
  policy_error(fp8_config_with_runtime({{"diffusion_step_policy", "first_last_n"}}),
               {kPolicyField + ": must be an object, got \"first_last_n\""});
}

TEST(ParseRuntime, RuntimeWithoutPolicyIsNoPolicyWithAWarning) {
  const ParsedPolicy parsed = parse_step_policy(fp8_config_with_runtime({{"other_knob", 1}}), kConfigPath);
  EXPECT_FALSE(parsed.exists);
  ASSERT_EQ(parsed.warnings.size(), 2u);
  EXPECT_EQ(parsed.warnings[0], kConfigPath + ": " + kRuntimeField + ": ignoring unknown key(s) other_knob");
  EXPECT_NE(parsed.warnings[1].find("no diffusion_step_policy"), std::string::npos);
}

TEST(ParseRuntime, EmptyRuntimeObjectWarnsThatNoPolicyIsDeclared) {
  const ParsedPolicy parsed = parse_step_policy(fp8_config_with_runtime(json::object()), kConfigPath);
  EXPECT_FALSE(parsed.exists);
  ASSERT_EQ(parsed.warnings.size(), 1u);
  EXPECT_NE(parsed.warnings[0].find("declares no step policy"), std::string::npos);
}

TEST(ParseRuntime, UnknownRuntimeKeysBesideAPolicyAreWarnedSortedAndIgnored) {
  json runtime{{"diffusion_step_policy", canonical_policy()}, {"zeta", 1}, {"beta", nullptr}};
  const ParsedPolicy parsed = parse_step_policy(fp8_config_with_runtime(runtime), kConfigPath);
  EXPECT_TRUE(parsed.applies());
  ASSERT_EQ(parsed.warnings.size(), 1u);
  EXPECT_NE(parsed.warnings[0].find("ignoring unknown key(s) beta, zeta"), std::string::npos);
}

TEST(ParseRuntime, RuntimeCheckPrecedesPolicyChecks) {
  // A broken policy inside a runtime that is itself malformed can't be reached.
  policy_error(fp8_config_with_runtime(json::array({{{"diffusion_step_policy", 1}}})),
               {"runtime must be an object or null"});
}

TEST(ParseRuntime, NonObjectQuantizationConfigIsAnError) {
  json config = bf16_config();
  config["quantization_config"] = "fp8";
  policy_error(config, {"quantization_config: expected an object or null, got \"fp8\""});
}

TEST(ParseScope, ScopeWithoutTransformerIsInert) {
  const ParsedPolicy parsed = parse_step_policy(fp8_config_with_policy(policy_with("scope", json::array({"vae"}))), kConfigPath);
  EXPECT_TRUE(parsed.exists);
  EXPECT_TRUE(parsed.inert);
  EXPECT_FALSE(parsed.applies());
}

TEST(ParseScope, InertPolicyIsStillFullyValidated) {
  json policy = policy_with("scope", json::array({"vae"}));
  policy["reasoner"] = "bad";
  policy_error(fp8_config_with_policy(policy), {kPolicyField + ".reasoner"});
}

TEST(ParseScope, TransformerPlusOtherComponentsIsAnError) {
  policy_error(fp8_config_with_policy(policy_with("scope", json::array({"transformer", "vae"}))),
               {kPolicyField + ".scope: expected [\"transformer\"]", "got [\"transformer\",\"vae\"]"});
}

TEST(ParseScope, ScopeDecisionComesAfterFieldChecks) {
  json policy = policy_with("scope", json::array({"transformer", "vae"}));
  policy["reasoner"] = "bad";
  policy_error(fp8_config_with_policy(policy), {kPolicyField + ".reasoner"});
}

json config_with_quantization(json quantization_config, const json& policy) {
  quantization_config["runtime"] = {{"diffusion_step_policy", policy}};
  return {{"quantization_config", std::move(quantization_config)}};
}

TEST(ParseQuantization, Nvfp4WithPolicyIsRejected) {
  const json config = config_with_quantization({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}, canonical_policy());
  policy_error(config, {kPolicyField + ": the policy needs a serialised ModelOpt FP8 checkpoint",
                        "quant_method \"modelopt\", quant_algo \"NVFP4\"", "NVFP4 not supported"});
}

TEST(ParseQuantization, OtherModelOptRecipesWithPolicyAreRejected) {
  for (const char* algo : {"FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "MXFP8", "W4A8_AWQ", "NVFP4_AWQ", "MIXED_PRECISION"}) {
    const json config = config_with_quantization({{"quant_method", "modelopt"}, {"quant_algo", algo}}, canonical_policy());
    policy_error(config, {"quant_algo \"" + std::string(algo) + "\"", "quantization_config.quant_algo: expected \"FP8\""});
  }
}

TEST(ParseQuantization, OtherQuantMethodsWithPolicyAreRejected) {
  for (const char* method : {"compressed-tensors", "torchao", "fp8"}) {
    const json config = config_with_quantization({{"quant_method", method}, {"quant_algo", "FP8"}}, canonical_policy());
    policy_error(config, {"quant_method \"" + std::string(method) + "\"", "quantization_config.quant_method: expected \"modelopt\""});
  }
}

TEST(ParseQuantization, WeightOnlyFp8WithPolicyIsRejected) {
  json quant = fp8_quantization_config();
  quant["weight_only"] = true;
  policy_error(config_with_quantization(quant, canonical_policy()), {"quantization_config.weight_only: expected false"});
}

TEST(ParseQuantization, InertPolicyDoesNotRequireFp8) {
  const json config =
      config_with_quantization({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}, policy_with("scope", json::array({"vae"})));
  EXPECT_TRUE(parse_step_policy(config, kConfigPath).inert);
}

TEST(ParseQuantization, FieldErrorsPrecedeTheQuantizationCheck) {
  const json config = config_with_quantization({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}},
                                               policy_with("schema_version", 2));
  policy_error(config, {kPolicyField + ".schema_version"});
}

}  // namespace
}  // namespace stepmix::test
