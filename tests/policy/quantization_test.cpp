// §3.1/§3.2 classification of quantization_config, and the loader's gate.
#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

using nlohmann::json;

json config_with(const json& quantization_config) { return {{"quantization_config", quantization_config}}; }

json quant_with(const std::string& key, const json& value) {
  json quant = fp8_quantization_config();
  quant[key] = value;
  return quant;
}

QuantizationInfo classify(const json& quantization_config) {
  return classify_quantization(config_with(quantization_config), kConfigPath);
}

json static_fp8_group() {
  return json::parse(R"({
    "weights": {"num_bits": 8, "type": "float", "dynamic": false},
    "input_activations": {"num_bits": 8, "type": "float", "dynamic": false},
    "targets": ["Linear"]
  })");
}

TEST(Quantization, NoQuantizationConfigIsBf16) {
  const QuantizationInfo info = classify_quantization(bf16_config(), kConfigPath);
  EXPECT_EQ(info.kind, QuantizationKind::None);
  EXPECT_TRUE(info.quant_method.empty());
  EXPECT_EQ(classify_quantization(config_with(nullptr), kConfigPath).kind, QuantizationKind::None);
}

TEST(Quantization, ModelOptFp8IsRecognisedWithItsIgnoreList) {
  const QuantizationInfo info = classify(fp8_quantization_config());
  EXPECT_EQ(info.kind, QuantizationKind::ModelOptFp8);
  EXPECT_EQ(info.quant_method, "modelopt");
  EXPECT_EQ(info.quant_algo, "FP8");
  EXPECT_EQ(info.ignore, (std::vector<std::string>{"proj_in", "proj_out", "time_embedder*"}));
}

TEST(Quantization, NewerExporterKeysAreAccepted) {
  json quant = fp8_quantization_config();
  quant["quant_type"] = "FP8_FP8";
  quant["producer"] = {{"name", "modelopt"}, {"version", "0.40.0"}};
  quant["config_groups"] = {{"group_0", static_fp8_group()}};
  quant["calib_cfg"] = {{"method", "max"}};
  quant["modules_to_not_convert"] = json::array({"time_embedder", "visual"});
  for (const char* key : {"block_quantize", "channel_quantize", "scale_block_quantize", "scale_channel_quantize"}) {
    quant[key] = nullptr;
  }
  const QuantizationInfo info = classify(quant);
  EXPECT_EQ(info.kind, QuantizationKind::ModelOptFp8) << info.reason;
  EXPECT_EQ(info.modules_to_not_convert, (std::vector<std::string>{"time_embedder", "visual"}));
  EXPECT_TRUE(info.warnings.empty()) << info.warnings.front();
}

TEST(Quantization, UnknownKeysAreReportedAndExcludeModulesIsAnIgnoreList) {
  json quant = fp8_quantization_config();
  quant["future_knob"] = 1;
  quant["exclude_modules"] = json::array({"lm_head"});
  const QuantizationInfo info = classify(quant);
  EXPECT_EQ(info.kind, QuantizationKind::ModelOptFp8) << info.reason;
  ASSERT_EQ(info.warnings.size(), 1u);
  EXPECT_EQ(info.warnings[0], std::string(kConfigPath) + ": quantization_config.future_knob: unknown key, ignored");
  EXPECT_EQ(info.ignore, (std::vector<std::string>{"proj_in", "proj_out", "time_embedder*", "lm_head"}));
}

TEST(Quantization, Nvfp4IsUnsupported) {
  const QuantizationInfo info = classify(quant_with("quant_algo", "NVFP4"));
  EXPECT_EQ(info.kind, QuantizationKind::Unsupported);
  EXPECT_EQ(info.quant_algo, "NVFP4");
  EXPECT_NE(info.reason.find("NVFP4 not supported"), std::string::npos);
}

TEST(Quantization, OtherAlgosAndMethodsAreUnsupported) {
  EXPECT_EQ(classify(quant_with("quant_algo", "MXFP8")).kind, QuantizationKind::Unsupported);
  EXPECT_EQ(classify(quant_with("quant_algo", "fp8")).kind, QuantizationKind::Unsupported);  // exact case
  EXPECT_EQ(classify(quant_with("quant_method", "compressed-tensors")).kind, QuantizationKind::Unsupported);
  json no_method = fp8_quantization_config();
  no_method.erase("quant_method");
  const QuantizationInfo info = classify(no_method);
  EXPECT_EQ(info.kind, QuantizationKind::Unsupported);
  EXPECT_EQ(info.reason, "quantization_config.quant_method: expected \"modelopt\" (serialised ModelOpt; other quantizers "
                         "are not supported), got null");
}

TEST(Quantization, QuantTypeMustNameOnlyFp8) {
  EXPECT_EQ(classify(quant_with("quant_type", "FP8")).kind, QuantizationKind::ModelOptFp8);
  EXPECT_EQ(classify(quant_with("quant_type", "FP8_NVFP4")).kind, QuantizationKind::Unsupported);
  EXPECT_EQ(classify(quant_with("quant_type", "INT8_FP8")).kind, QuantizationKind::Unsupported);
  EXPECT_EQ(classify(quant_with("quant_type", 8)).kind, QuantizationKind::Unsupported);
}

TEST(Quantization, WeightOnlyIsUnsupported) {
  const QuantizationInfo info = classify(quant_with("weight_only", true));
  EXPECT_EQ(info.kind, QuantizationKind::Unsupported);
  EXPECT_EQ(info.reason, "quantization_config.weight_only: expected false (activations are quantized), got true");
}

TEST(Quantization, KvCacheQuantizationIsUnsupported) {
  // Accepted and ignored before: the K/V stayed 16-bit whatever the file said.
  const QuantizationInfo info = classify(quant_with("kv_cache_quant_algo", "FP8"));
  EXPECT_EQ(info.kind, QuantizationKind::Unsupported);
  EXPECT_EQ(info.reason, "quantization_config.kv_cache_quant_algo: expected null (KV-cache quantization is not "
                         "implemented), got \"FP8\"");
  EXPECT_EQ(classify(quant_with("kv_cache_quant_algo", nullptr)).kind, QuantizationKind::ModelOptFp8);
  // The Hugging Face config.json form of the same request.
  const QuantizationInfo scheme = classify(quant_with("kv_cache_scheme", {{"num_bits", 8}, {"type", "float"}}));
  EXPECT_EQ(scheme.kind, QuantizationKind::Unsupported);
  EXPECT_NE(scheme.reason.find("quantization_config.kv_cache_scheme: expected null"), std::string::npos) << scheme.reason;
  const QuantizationInfo none = classify(quant_with("kv_cache_scheme", nullptr));
  EXPECT_EQ(none.kind, QuantizationKind::ModelOptFp8);
  EXPECT_TRUE(none.warnings.empty());
}

TEST(Quantization, BlockOrChannelScalesAreNotTensorwise) {
  for (const char* key : {"block_quantize", "channel_quantize", "scale_block_quantize", "scale_channel_quantize"}) {
    const QuantizationInfo info = classify(quant_with(key, 128));
    EXPECT_EQ(info.kind, QuantizationKind::Unsupported) << key;
    EXPECT_NE(info.reason.find(std::string("quantization_config.") + key + ": expected null"), std::string::npos);
  }
}

TEST(Quantization, ConfigGroupsMustBeStatic8BitFloat) {
  const auto group_with = [](const std::string& operand, const std::string& key, const json& value) {
    json group = static_fp8_group();
    group[operand][key] = value;
    return quant_with("config_groups", {{"group_0", group}});
  };
  EXPECT_EQ(classify(group_with("weights", "num_bits", 4)).kind, QuantizationKind::Unsupported);
  EXPECT_EQ(classify(group_with("weights", "type", "int")).kind, QuantizationKind::Unsupported);
  const QuantizationInfo dynamic = classify(group_with("input_activations", "dynamic", true));
  EXPECT_EQ(dynamic.kind, QuantizationKind::Unsupported);
  EXPECT_EQ(dynamic.reason, "quantization_config.config_groups.group_0.input_activations.dynamic: expected false "
                            "(static scales), got true");
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"strategy", "channel"}, {"strategy", "block"}, {"group_size", 128}, {"block_structure", "128x128"}}) {
    const QuantizationInfo coarse = classify(group_with("weights", key, value));
    EXPECT_EQ(coarse.kind, QuantizationKind::Unsupported) << key;
    EXPECT_NE(coarse.reason.find("config_groups.group_0.weights." + key + ": expected"), std::string::npos)
        << coarse.reason;
  }
  EXPECT_EQ(classify(group_with("weights", "strategy", "tensor")).kind, QuantizationKind::ModelOptFp8);
  json weight_only_group = static_fp8_group();
  weight_only_group.erase("input_activations");
  EXPECT_EQ(classify(quant_with("config_groups", {{"group_0", weight_only_group}})).kind, QuantizationKind::Unsupported);
}

TEST(Quantization, MalformedQuantizationConfigIsUnsupported) {
  EXPECT_EQ(classify("fp8").kind, QuantizationKind::Unsupported);
  EXPECT_EQ(classify(quant_with("ignore", "proj_in")).kind, QuantizationKind::Unsupported);
}

TEST(Quantization, LoaderGateRejectsOnlyUnsupported) {
  EXPECT_NO_THROW(require_supported_quantization(classify_quantization(bf16_config(), kConfigPath), kConfigPath));
  EXPECT_NO_THROW(require_supported_quantization(classify(fp8_quantization_config()), kConfigPath));
  error_message([&] { require_supported_quantization(classify(quant_with("quant_algo", "NVFP4")), kConfigPath); },
                {"[policy] " + kConfigPath + ": checkpoint quantization not supported", "NVFP4 not supported"});
}

TEST(Quantization, RootQuantConfigRuntimeIsIgnoredWithAWarning) {
  const std::string root = "/ckpt/hf_quant_config.json";
  EXPECT_TRUE(root_quant_config_warnings(fp8_quantization_config(), root).empty());
  json with_runtime = fp8_quantization_config();
  with_runtime["runtime"] = {{"diffusion_step_policy", canonical_policy()}};
  const auto warnings = root_quant_config_warnings(with_runtime, root);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(root + ": runtime: ignored"), std::string::npos);
  // ModelOpt's own layout, the fields under "quantization": warned there too.
  const json nested = {{"producer", {{"name", "modelopt"}}}, {"quantization", with_runtime}};
  const auto nested_warnings = root_quant_config_warnings(nested, root);
  ASSERT_EQ(nested_warnings.size(), 1u);
  EXPECT_NE(nested_warnings[0].find(root + ": quantization.runtime: ignored"), std::string::npos) << nested_warnings[0];
}

}  // namespace
}  // namespace stepmix::test
