// Config builders and error helpers shared by the policy tests.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <initializer_list>
#include <string>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"

namespace stepmix::test {

inline const std::string kConfigPath = "/ckpt/transformer/config.json";
inline const std::string kPolicyField = "quantization_config.runtime.diffusion_step_policy";

// The producer's canonical video-build policy (§2).
inline nlohmann::json canonical_policy() {
  return nlohmann::json::parse(R"({
    "schema_version": 1,
    "type": "first_last_n",
    "index_space": "denoising_loop_iteration",
    "scope": ["transformer"],
    "default_mode": "native",
    "first_steps": {"count": 3, "mode": "a16"},
    "last_steps":  {"count": 3, "mode": "a16"},
    "overlap": "a16",
    "reasoner": "a16"
  })");
}

inline nlohmann::json fp8_quantization_config() {
  return nlohmann::json::parse(R"({
    "quant_method": "modelopt",
    "quant_algo": "FP8",
    "weight_only": false,
    "ignore": ["proj_in", "proj_out", "time_embedder*"]
  })");
}

// A transformer config with FP8 quantization; `runtime` is set only when given.
inline nlohmann::json fp8_config_with_runtime(const nlohmann::json& runtime) {
  nlohmann::json config{{"_class_name", "Cosmos3OmniTransformer"}, {"quantization_config", fp8_quantization_config()}};
  config["quantization_config"]["runtime"] = runtime;
  return config;
}

inline nlohmann::json fp8_config_without_runtime() {
  return {{"_class_name", "Cosmos3OmniTransformer"}, {"quantization_config", fp8_quantization_config()}};
}

inline nlohmann::json fp8_config_with_policy(const nlohmann::json& policy) {
  return fp8_config_with_runtime({{"diffusion_step_policy", policy}});
}

inline nlohmann::json bf16_config() { return {{"_class_name", "Cosmos3OmniTransformer"}, {"hidden_size", 64}}; }

// The canonical policy with one field replaced.
inline nlohmann::json policy_with(const std::string& key, const nlohmann::json& value) {
  nlohmann::json policy = canonical_policy();
  policy[key] = value;
  return policy;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

// Runs `action`, requires a stepmix::Error whose message contains every
// fragment, and returns the message.
template <typename Action>
std::string error_message(Action&& action, std::initializer_list<std::string> fragments) {
  try {
    action();
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos) << "missing \"" << fragment << "\" in: " << message;
    }
    return message;
  }
  ADD_FAILURE() << "expected a stepmix::Error";
  return {};
}

// Parses a config whose policy is expected to be rejected; returns the message.
inline std::string policy_error(const nlohmann::json& config, std::initializer_list<std::string> fragments) {
  return error_message([&] { parse_step_policy(config, kConfigPath); }, fragments);
}

}  // namespace stepmix::test
