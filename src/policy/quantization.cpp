// Classification of the transformer's quantization_config (docs/step-policy.md
// §3.1, §3.2).
// stepmix executes BF16 and serialised tensorwise ModelOpt FP8 only; every
// other declaration is Unsupported, with a reason naming field and value.
#include <fnmatch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <set>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "policy/diagnostics.hpp"

namespace stepmix {

namespace {

using nlohmann::json;
using policy_detail::describe;

constexpr const char* kQuantConfig = "quantization_config";

std::string field(const std::string& key) { return std::string(kQuantConfig) + "." + key; }

std::string expected_but_got(const std::string& field_path, const std::string& expected, const json& value) {
  return field_path + ": expected " + expected + ", got " + describe(value);
}

std::string text_of(const json& value) { return value.is_string() ? value.get<std::string>() : describe(value); }

// quant_type names the weight format, then the activation format ("FP8_FP8").
bool quant_type_is_fp8_only(const std::string& quant_type) {
  std::size_t start = 0;
  while (true) {
    const std::size_t end = quant_type.find('_', start);
    if (quant_type.substr(start, end - start) != "FP8") return false;
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

// {"num_bits": 8, "type": "float", "dynamic": false} for weights and inputs.
std::optional<std::string> static_fp8_group_problem(const std::string& group_path, const json& group) {
  if (!group.is_object()) return expected_but_got(group_path, "an object", group);
  for (const char* operand : {"weights", "input_activations"}) {
    const std::string operand_path = group_path + "." + operand;
    const auto it = group.find(operand);
    if (it == group.end() || !it->is_object()) {
      return expected_but_got(operand_path, "an object {num_bits: 8, type: \"float\", dynamic: false}",
                      it == group.end() ? json() : *it);
    }
    const json& spec = *it;
    const json num_bits = spec.value("num_bits", json());
    if (!policy_detail::is_integer_equal(num_bits, 8)) return expected_but_got(operand_path + ".num_bits", "8", num_bits);
    const json type = spec.value("type", json());
    if (type != "float") return expected_but_got(operand_path + ".type", "\"float\"", type);
    const json dynamic = spec.value("dynamic", json());
    if (dynamic != false) return expected_but_got(operand_path + ".dynamic", "false (static scales)", dynamic);
    // compressed-tensors style granularity: only one scale per tensor is
    // this format ("channel", "group", "block" and "token" are not).
    const json strategy = spec.value("strategy", json());
    if (!strategy.is_null() && strategy != "tensor")
      return expected_but_got(operand_path + ".strategy", "\"tensor\" or absent (one scale per tensor)", strategy);
    for (const char* key : {"group_size", "block_structure"})
      if (const json v = spec.value(key, json()); !v.is_null())
        return expected_but_got(operand_path + "." + key, "null (one scale per tensor)", v);
  }
  return std::nullopt;
}

std::optional<std::string> string_list(const json& quant_config, const char* key, std::vector<std::string>& out) {
  const auto it = quant_config.find(key);
  if (it == quant_config.end() || it->is_null()) return std::nullopt;
  const bool all_strings = it->is_array() && std::all_of(it->begin(), it->end(), [](const json& v) { return v.is_string(); });
  if (!all_strings) return expected_but_got(field(key), "an array of strings", *it);
  for (const auto& item : *it) out.push_back(item.get<std::string>());
  return std::nullopt;
}

// First reason the object is not serialised tensorwise ModelOpt FP8, if any.
std::optional<std::string> modelopt_fp8_problem(const json& quant_config, QuantizationInfo& info) {
  const json method = quant_config.value("quant_method", json());
  if (method != "modelopt") {
    return expected_but_got(field("quant_method"), "\"modelopt\" (serialised ModelOpt; other quantizers are not supported)",
                    method);
  }
  const json algo = quant_config.value("quant_algo", json());
  if (algo == "NVFP4") return field("quant_algo") + ": NVFP4 not supported; expected \"FP8\", got \"NVFP4\"";
  if (algo != "FP8") return expected_but_got(field("quant_algo"), "\"FP8\" (static per-tensor FP8 weights and activations)", algo);

  if (const auto it = quant_config.find("quant_type"); it != quant_config.end() && !it->is_null()) {
    if (!it->is_string() || !quant_type_is_fp8_only(it->get<std::string>())) {
      return expected_but_got(field("quant_type"), "FP8 for every operand, e.g. \"FP8_FP8\"", *it);
    }
  }
  // ModelOpt writes an FP8 KV cache as kv_cache_quant_algo in its own file
  // and as kv_cache_scheme in a Hugging Face config.json.
  for (const char* key : {"kv_cache_quant_algo", "kv_cache_scheme"})
    if (const auto it = quant_config.find(key); it != quant_config.end() && !it->is_null())
      return expected_but_got(field(key), "null (KV-cache quantization is not implemented)", *it);
  if (const auto it = quant_config.find("weight_only"); it != quant_config.end() && !it->is_null() && *it != false) {
    return expected_but_got(field("weight_only"), "false (activations are quantized)", *it);
  }
  static constexpr std::array kTensorwiseOnlyKeys{"block_quantize", "channel_quantize", "scale_block_quantize",
                                                  "scale_channel_quantize"};
  for (const char* key : kTensorwiseOnlyKeys) {
    if (const auto it = quant_config.find(key); it != quant_config.end() && !it->is_null()) {
      return expected_but_got(field(key), "null (block/channel scales are not tensorwise FP8)", *it);
    }
  }
  if (const auto it = quant_config.find("config_groups"); it != quant_config.end() && !it->is_null()) {
    if (!it->is_object()) return expected_but_got(field("config_groups"), "an object of groups", *it);
    for (const auto& [name, group] : it->items()) {
      if (auto problem = static_fp8_group_problem(field("config_groups." + name), group)) return problem;
    }
  }
  if (auto problem = string_list(quant_config, "ignore", info.ignore)) return problem;
  // ModelOpt's hf_quant_config.json name for the same glob list.
  if (auto problem = string_list(quant_config, "exclude_modules", info.ignore)) return problem;
  return string_list(quant_config, "modules_to_not_convert", info.modules_to_not_convert);
}

// The keys of a ModelOpt FP8 quantization_config (docs/step-policy.md §3.1);
// any other is reported, never silently taken as understood.
std::vector<std::string> unknown_key_warnings(const json& quant_config, const std::string& config_path) {
  static const std::set<std::string> known = {
      "quant_method",     "quant_algo",           "quant_type",        "weight_only",          "producer",
      "config_groups",    "ignore",               "exclude_modules",   "modules_to_not_convert", "calib_cfg",
      "block_quantize",   "channel_quantize",     "scale_block_quantize", "scale_channel_quantize",
      "disable_conv_quantization", "forward_loop", "modelopt_config",  "runtime",              "kv_cache_quant_algo",
      "kv_cache_scheme"};
  std::vector<std::string> warnings;
  for (const auto& [key, value] : quant_config.items())
    if (!known.count(key))
      warnings.push_back(policy_detail::warning(config_path, field(key), "unknown key, ignored"));
  return warnings;
}

}  // namespace

QuantizationInfo classify_quantization(const json& transformer_config, const std::string& config_path) {
  QuantizationInfo info;
  if (!transformer_config.is_object()) {
    info.kind = QuantizationKind::Unsupported;
    info.reason = expected_but_got(config_path, "a JSON object (transformer config)", transformer_config);
    return info;
  }
  const auto it = transformer_config.find(kQuantConfig);
  if (it == transformer_config.end() || it->is_null()) {
    info.reason = "no quantization_config: BF16 checkpoint";
    return info;
  }
  const json& quant_config = *it;
  if (!quant_config.is_object()) {
    info.kind = QuantizationKind::Unsupported;
    info.reason = expected_but_got(kQuantConfig, "an object or null", quant_config);
    return info;
  }
  if (const auto method = quant_config.find("quant_method"); method != quant_config.end()) {
    info.quant_method = text_of(*method);
  }
  if (const auto algo = quant_config.find("quant_algo"); algo != quant_config.end()) info.quant_algo = text_of(*algo);

  if (auto problem = modelopt_fp8_problem(quant_config, info)) {
    info.kind = QuantizationKind::Unsupported;
    info.reason = *problem;
  } else {
    info.kind = QuantizationKind::ModelOptFp8;
    info.reason = "serialised tensorwise ModelOpt FP8 (modelopt/FP8)";
    info.warnings = unknown_key_warnings(quant_config, config_path);
  }
  return info;
}

void require_supported_quantization(const QuantizationInfo& quant, const std::string& config_path) {
  if (quant.kind != QuantizationKind::Unsupported) return;
  throw Error(policy_detail::kComponent,
              config_path + ": checkpoint quantization not supported (stepmix runs BF16 and ModelOpt FP8 only): " +
                  quant.reason);
}

void require_weights_match_quantization(const QuantizationInfo& quant, const std::vector<std::string>& fp8_modules,
                                        const std::string& weights_folder, const std::string& config_path) {
  const auto fail = [&](const std::string& message) { throw Error(policy_detail::kComponent, message); };
  if (quant.kind == QuantizationKind::None && !fp8_modules.empty())
    fail(weights_folder + ": F8_E4M3 weights (" + fp8_modules.front() + ", ...) but " + config_path +
         " has no quantization_config (expected quant_method \"modelopt\", quant_algo \"FP8\")");
  if (quant.kind == QuantizationKind::ModelOptFp8 && fp8_modules.empty())
    fail(weights_folder + ": " + config_path +
         " quantization_config declares ModelOpt FP8 but no governed Linear has an F8_E4M3 weight");
  // ModelOpt matches its ignore list with fnmatch (a '*' also crosses dots).
  for (const std::string& module : fp8_modules) {
    for (const std::string& glob : quant.ignore)
      if (::fnmatch(glob.c_str(), module.c_str(), 0) == 0)
        fail(config_path + ": " + field("ignore") + ": '" + glob + "' keeps " + module + " in BF16, but " +
             weights_folder + " stores its weight as F8_E4M3; the declaration and the weights must agree");
    for (const std::string& part : quant.modules_to_not_convert)
      if (!part.empty() && module.find(part) != std::string::npos)
        fail(config_path + ": " + field("modules_to_not_convert") + ": '" + part + "' keeps " + module +
             " in BF16, but " + weights_folder + " stores its weight as F8_E4M3; the declaration and the weights "
             "must agree");
  }
}

std::vector<std::string> root_quant_config_warnings(const json& hf_quant_config, const std::string& path) {
  std::vector<std::string> warnings;
  if (!hf_quant_config.is_object()) return warnings;
  const auto warn_if_runtime = [&](const json& object, const std::string& field) {
    if (object.contains("runtime"))
      warnings.push_back(
          policy_detail::warning(path, field, "ignored: the step policy is read from transformer/config.json only"));
  };
  warn_if_runtime(hf_quant_config, "runtime");
  // ModelOpt's own layout nests the fields under "quantization" (the loader reads them there too).
  if (hf_quant_config.contains("quantization") && hf_quant_config["quantization"].is_object())
    warn_if_runtime(hf_quant_config["quantization"], "quantization.runtime");
  return warnings;
}

}  // namespace stepmix
