// Strict parser of quantization_config.runtime.diffusion_step_policy
// (docs/step-policy.md §1, §2, §4, §5). Checks run in the order of §4 and
// the first failure throws: a policy that is present but not understood must
// never be silently ignored.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "policy/diagnostics.hpp"

namespace stepmix {

namespace {

using nlohmann::json;
using policy_detail::fail;
using policy_detail::fail_expected;

const std::string kRuntimeField = "quantization_config.runtime";
const std::string kPolicyKey = "diffusion_step_policy";
const std::string kPolicyField = kRuntimeField + "." + kPolicyKey;

// Sorted, so that "accepted fields" and "missing fields" read in a stable order.
const std::vector<std::string> kPolicyFields{"default_mode", "first_steps", "index_space", "last_steps", "overlap",
                                             "reasoner",     "schema_version", "scope",   "type"};
const std::vector<std::string> kWindowFields{"count", "mode"};
const std::string kTransformerScope = "transformer";

std::string policy_field(const std::string& key) { return kPolicyField + "." + key; }

// §4 checks 3/4 (and their window counterparts in 11).
void require_exact_fields(const std::string& path, const std::string& field, const json& object,
                          const std::vector<std::string>& accepted) {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : object.items()) {
    if (std::find(accepted.begin(), accepted.end(), key) == accepted.end()) unknown.push_back(key);
  }
  std::sort(unknown.begin(), unknown.end());
  if (!unknown.empty()) {
    fail(path, field, "unknown field(s) " + policy_detail::join(unknown) + "; accepted fields: " + policy_detail::join(accepted));
  }
  std::vector<std::string> missing;
  for (const auto& key : accepted) {
    if (!object.contains(key)) missing.push_back(key);
  }
  if (!missing.empty()) {
    fail(path, field, "missing field(s) " + policy_detail::join(missing) + "; all of " + policy_detail::join(accepted) +
                          " are required");
  }
}

// Checkpoint strings compare exactly and case-sensitively (§2).
void require_word(const std::string& path, const json& policy, const std::string& key, const std::string& expected) {
  const json& value = policy.at(key);
  if (value != expected) fail_expected(path, policy_field(key), "\"" + expected + "\"", value);
}

std::vector<std::string> parse_scope(const std::string& path, const json& scope) {
  if (!scope.is_array() || scope.empty()) fail_expected(path, policy_field("scope"), "a non-empty array of strings", scope);
  std::vector<std::string> components;
  for (std::size_t index = 0; index < scope.size(); ++index) {
    if (!scope[index].is_string()) {
      fail_expected(path, policy_field("scope") + "[" + std::to_string(index) + "]", "a string", scope[index]);
    }
    components.push_back(scope[index].get<std::string>());
  }
  return components;
}

int parse_window(const std::string& path, const json& policy, const std::string& key) {
  const std::string field = policy_field(key);
  const json& window = policy.at(key);
  if (!window.is_object()) fail_expected(path, field, "an object {\"count\": <integer >= 0>, \"mode\": \"a16\"}", window);
  require_exact_fields(path, field, window, kWindowFields);
  if (window.at("mode") != "a16") fail_expected(path, field + ".mode", "\"a16\"", window.at("mode"));
  // JSON integers only: true, 3.0 and "3" are not counts. Large counts are
  // legal (every iteration A16); any count >= the number of iterations acts
  // alike, so one beyond INT_MAX is taken as INT_MAX.
  const json& count = window.at("count");
  if (count.is_number_unsigned()) return int(std::min<unsigned long long>(count.get<unsigned long long>(), INT_MAX));
  if (count.is_number_integer() && count.get<long long>() >= 0)
    return int(std::min<long long>(count.get<long long>(), INT_MAX));
  fail_expected(path, field + ".count", "a JSON integer >= 0", count);
}

TowerMode parse_checkpoint_reasoner(const std::string& path, const json& value) {
  if (value == "a16") return TowerMode::A16;
  if (value == "native") return TowerMode::Native;
  fail_expected(path, policy_field("reasoner"), "one of \"a16\", \"native\"", value);
}

// §4 checks 2–12 on the policy object itself.
StepPolicy parse_policy_object(const std::string& path, const json& policy) {
  if (!policy.is_object()) fail(path, kPolicyField, "must be an object, got " + policy_detail::describe(policy));
  require_exact_fields(path, kPolicyField, policy, kPolicyFields);
  if (!policy_detail::is_integer_equal(policy.at("schema_version"), 1)) {
    fail_expected(path, policy_field("schema_version"), "the integer 1", policy.at("schema_version"));
  }
  require_word(path, policy, "type", "first_last_n");
  require_word(path, policy, "index_space", "denoising_loop_iteration");
  require_word(path, policy, "default_mode", "native");
  require_word(path, policy, "overlap", "a16");

  StepPolicy parsed;
  parsed.scope = parse_scope(path, policy.at("scope"));
  parsed.first_steps = parse_window(path, policy, "first_steps");
  parsed.last_steps = parse_window(path, policy, "last_steps");
  parsed.overlap = TowerMode::A16;
  parsed.reasoner = parse_checkpoint_reasoner(path, policy.at("reasoner"));
  return parsed;
}

// §5: without "transformer" the policy addresses other components only
// (inert); with "transformer" it must address nothing else, because stepmix
// could not honour the other entries.
bool scope_is_inert(const std::string& path, const std::vector<std::string>& scope) {
  const bool names_transformer = std::find(scope.begin(), scope.end(), kTransformerScope) != scope.end();
  if (!names_transformer) return true;
  if (scope.size() != 1) {
    fail_expected(path, policy_field("scope"),
                  "[\"transformer\"] (stepmix cannot honour other components; a scope without \"transformer\" is inert)",
                  json(scope));
  }
  return false;
}

// §4 check 14.
void require_fp8_for_policy(const std::string& path, const json& transformer_config) {
  const QuantizationInfo quant = classify_quantization(transformer_config, path);
  if (quant.kind == QuantizationKind::ModelOptFp8) return;
  fail(path, kPolicyField,
       "the policy needs a serialised ModelOpt FP8 checkpoint (quant_method \"modelopt\", quant_algo \"FP8\"), got "
       "quant_method \"" + quant.quant_method + "\", quant_algo \"" + quant.quant_algo + "\": " + quant.reason);
}

}  // namespace

ParsedPolicy parse_step_policy(const json& transformer_config, const std::string& config_path) {
  ParsedPolicy parsed;
  if (!transformer_config.is_object()) fail_expected(config_path, "(root)", "a JSON object", transformer_config);
  const auto quant_it = transformer_config.find("quantization_config");
  if (quant_it == transformer_config.end() || quant_it->is_null()) return parsed;
  if (!quant_it->is_object()) fail_expected(config_path, "quantization_config", "an object or null", *quant_it);

  // Check 1: absent or null runtime declares no policy (e.g. distilled builds).
  const auto runtime_it = quant_it->find("runtime");
  if (runtime_it == quant_it->end() || runtime_it->is_null()) return parsed;
  const json& runtime = *runtime_it;
  if (!runtime.is_object()) {
    fail(config_path, kRuntimeField, "runtime must be an object or null, got " + policy_detail::describe(runtime));
  }
  std::vector<std::string> unknown_runtime_keys;
  for (const auto& [key, value] : runtime.items()) {
    if (key != kPolicyKey) unknown_runtime_keys.push_back(key);
  }
  std::sort(unknown_runtime_keys.begin(), unknown_runtime_keys.end());
  if (!unknown_runtime_keys.empty()) {
    parsed.warnings.push_back(policy_detail::warning(
        config_path, kRuntimeField, "ignoring unknown key(s) " + policy_detail::join(unknown_runtime_keys)));
  }
  const auto policy_it = runtime.find(kPolicyKey);
  if (policy_it == runtime.end()) {
    parsed.warnings.push_back(policy_detail::warning(
        config_path, kRuntimeField, "no " + kPolicyKey + ": the checkpoint declares no step policy"));
    return parsed;
  }

  parsed.policy = parse_policy_object(config_path, *policy_it);  // checks 2–12
  parsed.exists = true;
  parsed.inert = scope_is_inert(config_path, parsed.policy.scope);  // check 13
  if (parsed.applies()) require_fp8_for_policy(config_path, transformer_config);  // check 14
  return parsed;
}

}  // namespace stepmix
