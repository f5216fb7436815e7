// §4 checks 3–12: fields of the policy object, one test per rule.
#include <functional>
#include <limits>

#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

using nlohmann::json;

std::string field(const std::string& key) { return kPolicyField + "." + key + ": "; }

TEST(ParseFields, CanonicalPolicyParses) {
  const ParsedPolicy parsed = parse_step_policy(fp8_config_with_policy(canonical_policy()), kConfigPath);
  EXPECT_TRUE(parsed.exists);
  EXPECT_FALSE(parsed.inert);
  EXPECT_TRUE(parsed.applies());
  EXPECT_EQ(parsed.policy.first_steps, 3);
  EXPECT_EQ(parsed.policy.last_steps, 3);
  EXPECT_EQ(parsed.policy.overlap, TowerMode::A16);
  EXPECT_EQ(parsed.policy.reasoner, TowerMode::A16);
  EXPECT_EQ(parsed.policy.scope, std::vector<std::string>{"transformer"});
  EXPECT_TRUE(parsed.warnings.empty());
}

TEST(ParseFields, UnknownFieldsAreListedSorted) {
  json policy = canonical_policy();
  policy["future_knob"] = 1;
  policy["alpha_knob"] = true;
  policy_error(fp8_config_with_policy(policy),
               {"[policy] " + kConfigPath + ": " + kPolicyField + ": unknown field(s) alpha_knob, future_knob",
                "accepted fields: default_mode, first_steps, index_space"});
}

TEST(ParseFields, MissingFieldsAreListedSorted) {
  json policy = canonical_policy();
  policy.erase("reasoner");
  policy.erase("overlap");
  policy.erase("index_space");
  policy_error(fp8_config_with_policy(policy), {kPolicyField + ": missing field(s) index_space, overlap, reasoner"});
}

TEST(ParseFields, SchemaVersionMustBeTheInteger1) {
  const std::string prefix = "[policy] " + kConfigPath + ": " + field("schema_version") + "expected the integer 1, got ";
  EXPECT_EQ(policy_error(fp8_config_with_policy(policy_with("schema_version", true)), {}), prefix + "true");
  EXPECT_EQ(policy_error(fp8_config_with_policy(policy_with("schema_version", 1.0)), {}), prefix + "1.0");
  EXPECT_EQ(policy_error(fp8_config_with_policy(policy_with("schema_version", "1")), {}), prefix + "\"1\"");
  EXPECT_EQ(policy_error(fp8_config_with_policy(policy_with("schema_version", 2)), {}), prefix + "2");
  EXPECT_EQ(policy_error(fp8_config_with_policy(policy_with("schema_version", -1)), {}), prefix + "-1");
}

TEST(ParseFields, TypeMustBeFirstLastN) {
  for (const char* other : {"sigma_ranges", "every_n", "sigmoid", "FIRST_LAST_N"}) {
    policy_error(fp8_config_with_policy(policy_with("type", other)),
                 {field("type") + "expected \"first_last_n\", got \"" + other + "\""});
  }
}

TEST(ParseFields, IndexSpaceMustBeDenoisingLoopIteration) {
  for (const char* other : {"scheduler_timestep", "sampler_step", "sigma"}) {
    policy_error(fp8_config_with_policy(policy_with("index_space", other)),
                 {field("index_space") + "expected \"denoising_loop_iteration\", got \"" + other + "\""});
  }
}

TEST(ParseFields, DefaultModeMustBeNative) {
  policy_error(fp8_config_with_policy(policy_with("default_mode", "a16")),
               {field("default_mode") + "expected \"native\", got \"a16\""});
}

TEST(ParseFields, CheckpointOverlapMustBeA16) {
  policy_error(fp8_config_with_policy(policy_with("overlap", "native")),
               {field("overlap") + "expected \"a16\", got \"native\""});
  policy_error(fp8_config_with_policy(policy_with("overlap", nullptr)), {field("overlap") + "expected \"a16\", got null"});
}

TEST(ParseFields, ScopeMustBeANonEmptyArray) {
  policy_error(fp8_config_with_policy(policy_with("scope", json::array())),
               {field("scope") + "expected a non-empty array of strings, got []"});
  policy_error(fp8_config_with_policy(policy_with("scope", "transformer")),
               {field("scope") + "expected a non-empty array of strings, got \"transformer\""});
}

TEST(ParseFields, ScopeItemsMustBeStrings) {
  policy_error(fp8_config_with_policy(policy_with("scope", json::array({json("transformer"), json(3)}))),
               {kPolicyField + ".scope[1]: expected a string, got 3"});
}

TEST(ParseFields, WindowMustBeAnObject) {
  policy_error(fp8_config_with_policy(policy_with("first_steps", 3)), {field("first_steps") + "expected an object", "got 3"});
  policy_error(fp8_config_with_policy(policy_with("last_steps", nullptr)), {field("last_steps") + "expected an object", "got null"});
}

TEST(ParseFields, WindowRejectsUnknownKeys) {
  policy_error(fp8_config_with_policy(policy_with("first_steps", {{"count", 3}, {"mode", "a16"}, {"sigma", 0.5}})),
               {field("first_steps") + "unknown field(s) sigma; accepted fields: count, mode"});
}

TEST(ParseFields, WindowRejectsMissingKeys) {
  policy_error(fp8_config_with_policy(policy_with("last_steps", {{"mode", "a16"}})),
               {field("last_steps") + "missing field(s) count"});
}

TEST(ParseFields, WindowModeMustBeA16) {
  policy_error(fp8_config_with_policy(policy_with("first_steps", {{"count", 0}, {"mode", "native"}})),
               {kPolicyField + ".first_steps.mode: expected \"a16\", got \"native\""});
}

TEST(ParseFields, WindowCountMustBeANonNegativeInteger) {
  const std::string expected = kPolicyField + ".last_steps.count: expected a JSON integer >= 0, got ";
  for (const auto& [count, shown] : std::vector<std::pair<json, std::string>>{{true, "true"},
                                                                              {3.0, "3.0"},
                                                                              {-1, "-1"},
                                                                              {"3", "\"3\""},
                                                                              {nullptr, "null"},
                                                                              {-4294967296LL, "-4294967296"}}) {
    EXPECT_EQ(policy_error(fp8_config_with_policy(policy_with("last_steps", {{"count", count}, {"mode", "a16"}})), {}),
              "[policy] " + kConfigPath + ": " + expected + shown);
  }
}

TEST(ParseFields, ZeroAndLargeCountsAreLegal) {
  json policy = canonical_policy();
  policy["first_steps"]["count"] = 0;
  policy["last_steps"]["count"] = 999;
  const ParsedPolicy parsed = parse_step_policy(fp8_config_with_policy(policy), kConfigPath);
  EXPECT_EQ(parsed.policy.first_steps, 0);
  EXPECT_EQ(parsed.policy.last_steps, 999);
  // Counts an int cannot hold act as every iteration too: taken as INT_MAX.
  for (const json& huge : {json(4294967296LL), json(std::numeric_limits<unsigned long long>::max())}) {
    policy["first_steps"]["count"] = huge;
    EXPECT_EQ(parse_step_policy(fp8_config_with_policy(policy), kConfigPath).policy.first_steps,
              std::numeric_limits<int>::max());
  }
}

TEST(ParseFields, ReasonerIsA16OrNative) {
  EXPECT_EQ(parse_step_policy(fp8_config_with_policy(policy_with("reasoner", "native")), kConfigPath).policy.reasoner,
            TowerMode::Native);
  for (const json& bad : {json("high_precision"), json("A16"), json(true), json("w8a16")}) {
    policy_error(fp8_config_with_policy(policy_with("reasoner", bad)),
                 {field("reasoner") + "expected one of \"a16\", \"native\", got " + bad.dump()});
  }
}

// Every field is wrong below; each step removes the earliest fault, so the
// reported field walks through §4 in order.
TEST(ParseFields, FirstFailureWinsInSpecOrder) {
  json policy = canonical_policy();
  policy["schema_version"] = 2;
  policy["type"] = "every_n";
  policy["index_space"] = "sigma";
  policy["default_mode"] = "a16";
  policy["overlap"] = "native";
  policy["scope"] = json::array();
  policy["first_steps"] = {{"count", -1}, {"mode", "a16"}};
  policy["last_steps"] = {{"count", 3.0}, {"mode", "a16"}};
  policy["reasoner"] = "bad";
  policy["future_knob"] = 1;

  const std::vector<std::pair<std::string, std::function<void(json&)>>> walk{
      {kPolicyField + ": unknown field(s) future_knob", [](json& p) { p.erase("future_knob"); p.erase("type"); }},
      {kPolicyField + ": missing field(s) type", [](json& p) { p["type"] = "every_n"; }},
      {field("schema_version"), [](json& p) { p["schema_version"] = 1; }},
      {field("type"), [](json& p) { p["type"] = "first_last_n"; }},
      {field("index_space"), [](json& p) { p["index_space"] = "denoising_loop_iteration"; }},
      {field("default_mode"), [](json& p) { p["default_mode"] = "native"; }},
      {field("overlap"), [](json& p) { p["overlap"] = "a16"; }},
      {field("scope"), [](json& p) { p["scope"] = json::array({"transformer"}); }},
      {kPolicyField + ".first_steps.count", [](json& p) { p["first_steps"]["count"] = 3; }},
      {kPolicyField + ".last_steps.count", [](json& p) { p["last_steps"]["count"] = 3; }},
      {field("reasoner"), [](json& p) { p["reasoner"] = "a16"; }},
  };
  for (const auto& [expected_field, repair] : walk) {
    policy_error(fp8_config_with_policy(policy), {expected_field});
    repair(policy);
  }
  EXPECT_TRUE(parse_step_policy(fp8_config_with_policy(policy), kConfigPath).applies());
}

TEST(ParseFields, WindowChecksRunObjectUnknownMissingModeCount) {
  // Unknown key reported before the missing one, mode before count.
  policy_error(fp8_config_with_policy(policy_with("first_steps", {{"sigma", 1}, {"mode", "a16"}})),
               {field("first_steps") + "unknown field(s) sigma"});
  policy_error(fp8_config_with_policy(policy_with("first_steps", {{"count", -1}, {"mode", "native"}})),
               {kPolicyField + ".first_steps.mode"});
  // first_steps is checked before last_steps.
  json policy = canonical_policy();
  policy["first_steps"]["mode"] = "x";
  policy["last_steps"] = 1;
  policy_error(fp8_config_with_policy(policy), {kPolicyField + ".first_steps.mode"});
}

}  // namespace
}  // namespace stepmix::test
