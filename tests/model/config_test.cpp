// Config parsing and validation (the Cosmos3 transformer config.json),
// on the tiny golden config and a Nano-sized config without weights.
#include "model/config.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/golden.hpp"
#include "io/checkpoint.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

using json = nlohmann::json;

// What Diffusers writes for Nano (defaults), keys as in the tiny config.
json nano_config() {
  return json::parse(R"({
    "_class_name": "Cosmos3OmniTransformer", "_diffusers_version": "0.40.0.dev0",
    "action_dim": null, "action_gen": false, "attention_bias": false, "attention_dropout": 0.0,
    "base_fps": 24, "enable_fps_modulation": true, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 12288, "latent_channel": 48, "latent_patch_size": 2,
    "num_attention_heads": 32, "num_embodiment_domains": 32, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "patch_latent_dim": 192, "qk_norm_for_text": true, "rms_norm_eps": 1e-06,
    "rope_axes_dim": [24, 20, 20], "rope_scaling": null, "rope_theta": 5000000.0, "sound_dim": null,
    "sound_gen": false, "sound_latent_fps": 25.0, "timestep_scale": 0.001,
    "unified_3d_mrope_reset_spatial_ids": true, "unified_3d_mrope_temporal_modality_margin": 15000,
    "use_und_k_norm_for_gen": false, "vocab_size": 151936})");
}

// The Error message of parsing `config`, or "" when it parses.
std::string parse_error(const json& config) {
  try {
    parse_cosmos3_config(config, "nano/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, TinyGoldenConfigParses) {
  const ModelDirectory dir = ModelDirectory::open(golden_path("transformer"));
  const ParsedCosmos3Config parsed = parse_cosmos3_config(dir.config, dir.config_path);
  const Cosmos3Config& c = parsed.config;
  EXPECT_TRUE(parsed.warnings.empty());
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.query_groups(), 2);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.vocab_size, 96);
  EXPECT_EQ(c.patch_latent_dim, 16);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.hidden_act, HiddenAct::SiLU);
  EXPECT_TRUE(c.qk_norm_for_text);
  EXPECT_FALSE(c.has_und_k_norm_for_gen());
  // The interleaved mRoPE slot map: T H W T H W T T.
  using A = RopeAxis;
  EXPECT_EQ(c.rope_slot_axes(), (std::vector<A>{A::T, A::H, A::W, A::T, A::H, A::W, A::T, A::T}));
}

TEST(Config, FP8ConfigParsesLikeTheBF16One) {
  const ModelDirectory dir = ModelDirectory::open(golden_path("transformer-fp8"));
  const ParsedCosmos3Config parsed = parse_cosmos3_config(dir.config, dir.config_path);
  EXPECT_TRUE(parsed.warnings.empty());
  EXPECT_EQ(parsed.config.hidden_size, 64);
}

TEST(Config, NanoConfigParsesWithItsSlotMap) {
  const Cosmos3Config c = parse_cosmos3_config(nano_config(), "nano/config.json").config;
  EXPECT_EQ(c.q_width(), 4096);
  EXPECT_EQ(c.kv_width(), 1024);
  EXPECT_EQ(c.query_groups(), 4);
  const auto axes = c.rope_slot_axes();
  ASSERT_EQ(axes.size(), 64u);
  // THW repeated 20 times, then TTTT.
  for (std::size_t j = 0; j < 60; ++j) EXPECT_EQ(int(axes[j]), int(j % 3)) << j;
  for (std::size_t j = 60; j < 64; ++j) EXPECT_EQ(axes[j], RopeAxis::T) << j;
}

// Sizes define the architecture and are never defaulted (an empty config
// used to parse as Nano); the other keys keep Diffusers' defaults.
TEST(Config, SizesAreRequiredOtherKeysDefaultToNano) {
  EXPECT_NE(parse_error(json::object()).find("nano/config.json: hidden_size: missing; expected a positive integer"),
            std::string::npos)
      << parse_error(json::object());
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "vocab_size", "latent_channel", "latent_patch_size",
                          "patch_latent_dim"}) {
    json config = nano_config();
    config.erase(key);
    EXPECT_NE(parse_error(config).find(std::string(key) + ": missing"), std::string::npos) << parse_error(config);
    config[key] = nullptr;
    EXPECT_NE(parse_error(config).find(std::string(key) + ": expected a positive integer, got null"), std::string::npos)
        << parse_error(config);
  }
  json sizes_only;
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "vocab_size", "latent_channel", "latent_patch_size",
                          "patch_latent_dim"})
    sizes_only[key] = nano_config()[key];
  const Cosmos3Config c = parse_cosmos3_config(sizes_only, "sizes/config.json").config;
  EXPECT_EQ(c.rope_axes_dim, (std::array<int64_t, 3>{24, 20, 20}));
  EXPECT_EQ(c.rope_theta, 5000000.0);
  EXPECT_TRUE(c.qk_norm_for_text);
  EXPECT_EQ(c.hidden_act, HiddenAct::SiLU);
}

TEST(Config, NullIsNotTheDefault) {
  // Diffusers passes None through, which is not the default (qk_norm_for_text
  // None is falsy there, true here): refused rather than guessed.
  for (const char* key : {"qk_norm_for_text", "attention_bias", "rms_norm_eps", "rope_theta", "hidden_act",
                          "timestep_scale", "use_und_k_norm_for_gen"}) {
    json config = nano_config();
    config[key] = nullptr;
    EXPECT_NE(parse_error(config).find(std::string(key) + ": expected"), std::string::npos) << key;
  }
  json config = nano_config();  // documented as nullable
  config["rope_scaling"] = nullptr;
  config["sound_dim"] = nullptr;
  config["action_dim"] = nullptr;
  config["sound_gen"] = nullptr;
  EXPECT_EQ(parse_error(config), "");
}

TEST(Config, NumbersOutOfRangeAreQuotedAsWritten) {
  // 10^19 read as int64 wrapped to -8446744073709551616 in the message.
  json config = nano_config();
  config["num_hidden_layers"] = 10000000000000000000ull;
  EXPECT_NE(parse_error(config).find("num_hidden_layers: 10000000000000000000 exceeds the limit of 16777216"),
            std::string::npos)
      << parse_error(config);
  config["num_hidden_layers"] = 1e19;
  EXPECT_NE(parse_error(config).find("num_hidden_layers: expected a positive integer, got 1e+19"), std::string::npos)
      << parse_error(config);
  config = nano_config();
  config["rope_axes_dim"] = json::parse("[24, 20, 18446744073709551615]");
  EXPECT_NE(parse_error(config).find("got [24,20,18446744073709551615]"), std::string::npos) << parse_error(config);
}

TEST(Config, FeaturesThatWouldChangeTheModelAreRefused) {
  // Accepted and ignored before: the output was the base model's, bit for bit.
  json config = nano_config();
  config["sound_gen"] = true;
  EXPECT_NE(parse_error(config).find("sound_gen: true: sound generation is not implemented"), std::string::npos)
      << parse_error(config);
  config = nano_config();
  config["action_gen"] = true;
  EXPECT_NE(parse_error(config).find("action_gen: true: action generation is not implemented"), std::string::npos);
  config["action_gen"] = 1;
  EXPECT_NE(parse_error(config).find("action_gen: expected true or false, got 1"), std::string::npos);
  config = nano_config();
  config["_class_name"] = "FluxTransformer2DModel";
  EXPECT_NE(parse_error(config).find("_class_name: expected \"Cosmos3OmniTransformer\" (the Cosmos3 transformer), got "
                                     "\"FluxTransformer2DModel\""),
            std::string::npos)
      << parse_error(config);
  config = nano_config();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(parse_error(config).find("rope_scaling."), std::string::npos) << parse_error(config);
  config["rope_scaling"] = {{"factor", 4.0}};
  EXPECT_NE(parse_error(config).find("rope_scaling.factor: not implemented"), std::string::npos) << parse_error(config);
  config["rope_scaling"] = {{"rope_type", "linear"}};
  EXPECT_NE(parse_error(config).find("rope_scaling.rope_type: expected \"default\""), std::string::npos);
  config["rope_scaling"] = {{"mrope_interleaved", false}, {"mrope_section", {24, 20, 20}}};
  EXPECT_NE(parse_error(config).find("rope_scaling.mrope_interleaved: expected true"), std::string::npos);
  config["rope_scaling"] = {{"mrope_section", {32, 16, 16}}};
  EXPECT_NE(parse_error(config).find("rope_scaling.mrope_section: [32,16,16] disagrees with rope_axes_dim [24,20,20]"),
            std::string::npos)
      << parse_error(config);
  // The legacy holder of the same section is what the rotary code implements.
  config["rope_scaling"] = {{"mrope_interleaved", true}, {"mrope_section", {24, 20, 20}}, {"rope_type", "default"}};
  EXPECT_EQ(parse_error(config), "");
  // use_und_k_norm_for_gen is implemented (model/transformer_layers_*.cpp): accepted.
  config = nano_config();
  config["qk_norm_for_text"] = false;
  config["use_und_k_norm_for_gen"] = true;
  EXPECT_TRUE(parse_cosmos3_config(config, "c.json").config.has_und_k_norm_for_gen());
}

TEST(Config, RopeAxesFallBackToMropeSection) {
  json config = nano_config();
  config.erase("rope_axes_dim");
  config["rope_scaling"] = {{"mrope_interleaved", true}, {"mrope_section", {32, 16, 16}}, {"rope_type", "default"}};
  EXPECT_EQ(parse_cosmos3_config(config, "c.json").config.rope_axes_dim, (std::array<int64_t, 3>{32, 16, 16}));
}

TEST(Config, Relu2SelectsTheEdgeVariant) {
  json config = nano_config();
  config["hidden_act"] = "relu2";
  const Cosmos3Config c = parse_cosmos3_config(config, "c.json").config;
  EXPECT_EQ(c.hidden_act, HiddenAct::ReLU2);
  EXPECT_FALSE(c.has_gate_proj());
}

TEST(Config, UnknownKeysWarn) {
  json config = nano_config();
  config["mystery_knob"] = 3;
  const auto parsed = parse_cosmos3_config(config, "nano/config.json");
  ASSERT_EQ(parsed.warnings.size(), 1u);
  EXPECT_NE(parsed.warnings[0].find("mystery_knob"), std::string::npos);
}

TEST(Config, RejectsUnknownActivation) {
  json config = nano_config();
  config["hidden_act"] = "gelu";
  const std::string e = parse_error(config);
  EXPECT_NE(e.find("nano/config.json: hidden_act"), std::string::npos) << e;
  EXPECT_NE(e.find("\"gelu\""), std::string::npos) << e;
}

TEST(Config, RejectsHeadsThatDoNotGroup) {
  json config = nano_config();
  config["num_key_value_heads"] = 5;
  const std::string e = parse_error(config);
  EXPECT_NE(e.find("num_key_value_heads: 5 does not divide num_attention_heads 32"), std::string::npos) << e;
}

TEST(Config, RejectsPatchLatentDimMismatch) {
  json config = nano_config();
  config["patch_latent_dim"] = 96;
  const std::string e = parse_error(config);
  EXPECT_NE(e.find("patch_latent_dim"), std::string::npos) << e;
  EXPECT_NE(e.find("= 192, got 96"), std::string::npos) << e;
}

TEST(Config, RejectsRopeAxesThatOverflowTheHead) {
  json config = nano_config();
  config["rope_axes_dim"] = {10, 22, 20};  // 3·22 = 66 > 64 slots
  EXPECT_NE(parse_error(config).find("3·22 exceeds head_dim/2 = 64"), std::string::npos) << parse_error(config);
  config["rope_axes_dim"] = {24, 20, 22};
  EXPECT_NE(parse_error(config).find("3·22 exceeds"), std::string::npos);
}

TEST(Config, RejectsRopeAxesWithTheWrongTemporalCount) {
  json config = nano_config();
  config["rope_axes_dim"] = {20, 20, 20};  // 64 slots leave 24 temporal
  const std::string e = parse_error(config);
  EXPECT_NE(e.find("leaves 24 temporal slots, but rope_axes_dim[0] is 20"), std::string::npos) << e;
  config["rope_axes_dim"] = {24, 20};
  EXPECT_NE(parse_error(config).find("expected three integers"), std::string::npos);
}

TEST(Config, RejectsWrongTypesAndSizes) {
  json config = nano_config();
  config["hidden_size"] = "4096";
  EXPECT_NE(parse_error(config).find("hidden_size: expected a positive integer"), std::string::npos);
  config = nano_config();
  config["num_hidden_layers"] = 0;
  EXPECT_NE(parse_error(config).find("num_hidden_layers: expected a positive integer, got 0"), std::string::npos);
  config = nano_config();
  config["qk_norm_for_text"] = 1;
  EXPECT_NE(parse_error(config).find("qk_norm_for_text: expected true or false"), std::string::npos);
  config = nano_config();
  config["head_dim"] = 127;
  EXPECT_NE(parse_error(config).find("head_dim: expected an even number"), std::string::npos);
}

// Sizes are bounded before anything is sized or multiplied from them: layer
// vectors, rotary slot tables and widths such as heads·head_dim.
TEST(Config, SizesAboveTheLimitAreRejected) {
  json config = nano_config();
  config["num_hidden_layers"] = int64_t(1) << 62;
  EXPECT_NE(parse_error(config).find("num_hidden_layers: 4611686018427387904 exceeds the limit of 16777216"),
            std::string::npos)
      << parse_error(config);
  config = nano_config();
  config["head_dim"] = int64_t(1) << 62;
  config["rope_axes_dim"] = {0, 0, 0};
  EXPECT_NE(parse_error(config).find("head_dim: 4611686018427387904 exceeds the limit"), std::string::npos);
  config = nano_config();
  config["num_attention_heads"] = int64_t(1) << 40;
  config["num_key_value_heads"] = 1;
  EXPECT_NE(parse_error(config).find("num_attention_heads: 1099511627776 exceeds the limit"), std::string::npos);
  config = nano_config();
  config["latent_patch_size"] = int64_t(1) << 40;
  config["latent_channel"] = 1;
  config["patch_latent_dim"] = 1;
  EXPECT_NE(parse_error(config).find("latent_patch_size: 1099511627776 exceeds the limit"), std::string::npos);
  config = nano_config();
  config["hidden_size"] = uint64_t(1) << 63;  // quoted as written, not as int64's negative
  EXPECT_NE(parse_error(config).find("hidden_size: 9223372036854775808 exceeds the limit"), std::string::npos)
      << parse_error(config);
}

TEST(Config, DerivedSizesDoNotOverflow) {
  // p²·C is 2^72 here: compared without overflowing int64.
  json config = nano_config();
  config["latent_patch_size"] = int64_t(1) << 24;
  config["latent_channel"] = int64_t(1) << 24;
  config["patch_latent_dim"] = 1;
  const std::string e = parse_error(config);
  EXPECT_NE(e.find("patch_latent_dim: expected latent_patch_size² · latent_channel = 16777216²·16777216, got 1"),
            std::string::npos)
      << e;
  // 3·rope_axes_dim[1] would overflow int64.
  config = nano_config();
  config["rope_axes_dim"] = {24, int64_t(1) << 62, 20};
  EXPECT_NE(parse_error(config).find("exceeds head_dim/2 = 64 frequency slots"), std::string::npos);
  // At the limit everything still parses.
  config = nano_config();
  config["vocab_size"] = int64_t(1) << 24;
  config["intermediate_size"] = int64_t(1) << 24;
  EXPECT_EQ(parse_error(config), "");
}

}  // namespace
}  // namespace stepmix::test
