// vae/config.json: the golden config parses to the tiny model's structure,
// other Wan2.2-style dims parse too, and every rule that refuses a config
// names its key (one test per rule).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/error_of.hpp"
#include "io/checkpoint.hpp"
#include "vae/config.hpp"
#include "vae_test_util.hpp"

namespace stepmix::test {
namespace {

using json = nlohmann::json;

json golden_config() { return read_json_file(vae_golden("vae/config.json"), "test"); }

std::string parse_error(const json& config) {
  return error_of([&] { vae::parse_vae_config(config, "vae/config.json"); });
}

TEST(VaeConfig, GoldenConfigDescribesTheTinyModel) {
  const vae::VaeConfig c = vae::parse_vae_config(golden_config(), "vae/config.json");
  EXPECT_EQ(c.encoder_widths(), (std::vector<int64_t>{8, 8, 16, 32, 32}));
  EXPECT_EQ(c.decoder_widths(), (std::vector<int64_t>{48, 48, 48, 24, 12}));
  EXPECT_EQ(c.decoder_temporal_upsample(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(c.spatial_factor(), 16);
  EXPECT_EQ(c.temporal_factor(), 4);
  EXPECT_EQ(c.pixel_frames(3), 9);
  EXPECT_EQ(c.num_res_blocks, 1);
  ASSERT_EQ(c.latents_mean.size(), 48u);
  EXPECT_EQ(c.latents_mean[0], -0.2289f);
  EXPECT_EQ(c.latents_std[47], 0.7744f);
}

TEST(VaeConfig, OtherDimsAndLevelsParse) {
  json c = golden_config();
  c["base_dim"] = 16;
  c["decoder_base_dim"] = nullptr;  // null: the decoder takes base_dim
  c["dim_mult"] = {1, 2, 2};
  c["temperal_downsample"] = {true, false};
  c["scale_factor_spatial"] = 8;
  c["scale_factor_temporal"] = 2;
  c["num_res_blocks"] = 3;
  c["clip_output"] = false;  // older conversion scripts write it; without effect
  const vae::VaeConfig v = vae::parse_vae_config(c, "vae/config.json");
  EXPECT_EQ(v.decoder_widths(), (std::vector<int64_t>{32, 32, 32, 16}));
  EXPECT_EQ(v.spatial_factor(), 8);
  EXPECT_EQ(v.pixel_frames(3), 5);
}

struct Rule {
  const char* name;
  void (*edit)(json&);
  const char* expected;  // fragment of the message: the key and what was wrong
};

const Rule kRules[] = {
    {"unknown_key", [](json& c) { c["use_tiling"] = true; }, "use_tiling: unknown key"},
    {"class_name", [](json& c) { c["_class_name"] = "AutoencoderKL"; }, "_class_name: expected \"AutoencoderKLWan\""},
    {"not_residual", [](json& c) { c["is_residual"] = false; }, "is_residual: expected true"},
    {"residual_missing", [](json& c) { c.erase("is_residual"); }, "is_residual: expected true"},
    {"z_dim", [](json& c) { c["z_dim"] = 16; }, "z_dim: expected 48"},
    {"patch_size", [](json& c) { c["patch_size"] = nullptr; }, "patch_size: expected 2"},
    {"in_channels", [](json& c) { c["in_channels"] = 3; }, "in_channels: expected 12"},
    {"out_channels", [](json& c) { c["out_channels"] = 3; }, "out_channels: expected 12"},
    {"scale_factor_spatial", [](json& c) { c["scale_factor_spatial"] = 8; }, "scale_factor_spatial: expected 16"},
    {"scale_factor_temporal", [](json& c) { c["scale_factor_temporal"] = 8; }, "scale_factor_temporal: expected 4"},
    {"temporal_flag_count",
     [](json& c) {
       c["temperal_downsample"] = {false, true};
     },
     "temperal_downsample: expected 3 flags"},
    {"temporal_flag_type",
     [](json& c) {
       c["temperal_downsample"] = {0, 1, 1};
     },
     "temperal_downsample: expected a list of booleans"},
    {"dim_mult_empty", [](json& c) { c["dim_mult"] = json::array(); }, "dim_mult: expected a list of 1 to 8"},
    {"dim_mult_shortcut",
     [](json& c) {
       c["dim_mult"] = {1, 3, 4, 4};
     },
     "dim_mult: encoder level 1 shortcut"},
    {"num_res_blocks", [](json& c) { c["num_res_blocks"] = 0; }, "num_res_blocks: expected an integer in [1, 64]"},
    {"base_dim", [](json& c) { c["base_dim"] = "8"; }, "base_dim: expected an integer"},
    {"latents_mean_count", [](json& c) { c["latents_mean"].erase(0); }, "latents_mean: expected a list of 48 numbers"},
    {"latents_mean_value", [](json& c) { c["latents_mean"][5] = "x"; }, "latents_mean[5]: expected a finite number"},
    {"latents_mean_huge", [](json& c) { c["latents_mean"][0] = 1e39; },
     "latents_mean[0]: expected a finite number in [-1e4, 1e4], got 1e+39"},
    {"latents_std_huge", [](json& c) { c["latents_std"][2] = 1e300; },
     "latents_std[2]: expected a finite number in [-1e4, 1e4]"},
    {"latents_std_positive", [](json& c) { c["latents_std"][3] = 0.0; }, "latents_std[3]: expected a positive number"},
    {"latents_std_missing", [](json& c) { c.erase("latents_std"); }, "latents_std: missing"},
    {"dropout", [](json& c) { c["dropout"] = "none"; }, "dropout: expected a probability in [0, 1]"},
    {"dropout_range", [](json& c) { c["dropout"] = 1.5; }, "dropout: expected a probability in [0, 1], got 1.5"},
    {"not_an_object", [](json& c) { c = json::array(); }, "expected a JSON object"},
};

class VaeConfigRule : public ::testing::TestWithParam<Rule> {};

TEST_P(VaeConfigRule, IsRefusedNamingTheKey) {
  json c = golden_config();
  GetParam().edit(c);
  const std::string message = parse_error(c);
  EXPECT_NE(message.find("vae/config.json: "), std::string::npos) << message;
  EXPECT_NE(message.find(GetParam().expected), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Rules, VaeConfigRule, ::testing::ValuesIn(kRules),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace stepmix::test
