#include "pipeline/sequence.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/error_of.hpp"
#include "model/model_test_util.hpp"
#include "pipeline/noise.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

// Position ids built from (und_len, grid, fps) equal the ones the reference
// pipeline packed for every golden forward case, bit for bit (T = 1, T = 3 at
// 24 and 16 fps, odd H/W).
TEST(Sequence, PositionIdsMatchEveryGoldenForwardCase) {
  const ModelDirectory dir = ModelDirectory::open(test::golden_path("transformer"));
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  for (const std::string& name : test::forward_cases()) {
    SCOPED_TRACE(name);
    const auto f = test::open_forward_case(name);
    const int64_t und_len = f->get("und_len").as<int64_t>()[0];
    const int64_t* grid = f->get("vision_token_shapes").as<int64_t>();
    const double fps = f->get("fps").as<float>()[0];
    const auto want = test::golden_floats(*f, "position_ids");
    EXPECT_EQ(build_position_ids(und_len, grid[0], grid[1], grid[2], fps, settings), want);
  }
}

TEST(Sequence, TrajectoryPositionIdsForBothPasses) {
  const ModelDirectory dir = ModelDirectory::open(test::golden_path("transformer"));
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  const auto inputs = SafetensorsFile::open(test::golden_path("trajectory/inputs.safetensors"));
  for (const char* pass : {"cond", "uncond"}) {
    const int64_t L = inputs->get(std::string(pass) + ".und_len").as<int64_t>()[0];
    // Latent [1, 4, 1, 6, 8], patch 2 -> 3 x 4 grid.
    EXPECT_EQ(build_position_ids(L, 1, 3, 4, 24.0, settings),
              test::golden_floats(*inputs, std::string(pass) + ".position_ids"))
        << pass;
  }
}

TEST(Sequence, FpsModulationAndSpatialReset) {
  SequenceSettings s;
  s.temporal_modality_margin = 100;
  // L = 2, T = 3, one patch per frame: columns 2, 3, 4; O = 102. fps 30: t = O + 0.8 f.
  auto pos = build_position_ids(2, 3, 1, 1, 30.0, s);
  ASSERT_EQ(pos.size(), 15u);
  EXPECT_EQ(pos[0], 0.0f);
  EXPECT_EQ(pos[1], 1.0f);
  EXPECT_EQ(pos[2], 102.0f);
  EXPECT_EQ(pos[3], (1.0f / 7.5f) * 6.0f + 102.0f);
  EXPECT_EQ(pos[4], (2.0f / 7.5f) * 6.0f + 102.0f);
  s.enable_fps_modulation = false;
  pos = build_position_ids(2, 3, 1, 1, 30.0, s);
  EXPECT_EQ(pos[4], 104.0f);
  // Without the spatial reset, h/w rows start at O too. L = 1, 2x2 grid: S = 5, O = 101.
  s.reset_spatial_ids = false;
  pos = build_position_ids(1, 1, 2, 2, 24.0, s);
  EXPECT_EQ(pos[5 + 4], 102.0f);      // H row, patch (1, 1)
  EXPECT_EQ(pos[2 * 5 + 3], 101.0f);  // W row, patch (1, 0)
  EXPECT_EQ(pos[2 * 5 + 4], 102.0f);  // W row, patch (1, 1)
}

TEST(Sequence, TemporalPositionsStayWithinFloat32Integers) {
  SequenceSettings s;  // base_fps 24, modulation on
  // fps 0.01: frame 2 at O + 2 * 2400, fine; 1e-39 would put it at infinity.
  EXPECT_EQ(build_position_ids(1, 3, 1, 1, 0.01, s)[1 + 2],
            (2.0f / (float(0.01) / 4.0f)) * (24.0f / 4.0f) + float(1 + s.temporal_modality_margin));
  std::string e = test::error_of([&] { build_position_ids(1, 3, 1, 1, 1e-39, s); });
  EXPECT_NE(e.find("fps 1e-39 with base_fps 24 puts latent frame 2 at temporal position inf"), std::string::npos) << e;
  s.base_fps = 1e30;
  e = test::error_of([&] { build_position_ids(1, 3, 1, 1, 24.0, s); });
  EXPECT_NE(e.find("positions must stay within 2^24"), std::string::npos) << e;
  // The check alone, as Model::plan makes it before any work.
  EXPECT_NE(test::error_of([&] { check_temporal_positions(1, 3, 24.0, s); }).find("within 2^24"), std::string::npos);
  EXPECT_EQ(test::error_of([&] { check_temporal_positions(1, 1, 24.0, s); }), "");
  // An image has one temporal position whatever the rate.
  EXPECT_EQ(build_position_ids(1, 1, 1, 1, 1e-39, s).size(), 6u);
}

TEST(Sequence, SettingsAreValidated) {
  nlohmann::json config = {{"base_fps", "24"}};
  EXPECT_THROW(read_sequence_settings(config, "c.json"), Error);
  config = {{"enable_fps_modulation", 1}};
  EXPECT_THROW(read_sequence_settings(config, "c.json"), Error);
  config = {{"unified_3d_mrope_temporal_modality_margin", -1}};
  EXPECT_THROW(read_sequence_settings(config, "c.json"), Error);
}

TEST(Sequence, MarginAndPatchSizeAreBounded) {
  // Near INT64_MAX, und_len + margin and H + patch_size - 1 would overflow.
  auto error_of = [](const nlohmann::json& config) -> std::string {
    try {
      read_sequence_settings(config, "c.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  nlohmann::json config = {{"unified_3d_mrope_temporal_modality_margin", INT64_MAX}};
  EXPECT_NE(error_of(config).find("c.json: unified_3d_mrope_temporal_modality_margin: expected an integer in [0, 16777216]"),
            std::string::npos)
      << error_of(config);
  // Quoted as written, not wrapped to -1.
  config = {{"unified_3d_mrope_temporal_modality_margin", UINT64_MAX}};
  EXPECT_NE(error_of(config).find("expected an integer below 2^63, got 18446744073709551615"), std::string::npos)
      << error_of(config);
  // null is not the default (Diffusers passes None through).
  for (const char* key : {"base_fps", "enable_fps_modulation", "unified_3d_mrope_temporal_modality_margin",
                          "unified_3d_mrope_reset_spatial_ids", "latent_patch_size"}) {
    config = {{key, nullptr}};
    EXPECT_NE(error_of(config).find(std::string("c.json: ") + key + ": expected"), std::string::npos) << key;
    EXPECT_NE(error_of(config).find("got null"), std::string::npos) << key;
  }
  config = {{"latent_patch_size", INT64_MAX}};
  EXPECT_NE(error_of(config).find("c.json: latent_patch_size: expected an integer in [1, 16777216]"), std::string::npos);
  config = {{"unified_3d_mrope_temporal_modality_margin", 1 << 24}, {"latent_patch_size", 1 << 24}};
  const SequenceSettings s = read_sequence_settings(config, "c.json");
  const ForwardInputs in = make_pass_inputs({1, 2}, {4, 1, 3, 3}, 24.0, s);
  EXPECT_EQ(in.position_ids.size(), 3u * (2 + 1));  // one patch covers the whole frame
}

TEST(Noise, SeededStandardNormal) {
  NormalGenerator a(42), b(42), c(43);
  const auto x = a.normals(20000);
  EXPECT_EQ(x, b.normals(20000));
  EXPECT_NE(x, c.normals(20000));
  double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= double(x.size());
  for (float v : x) var += (v - mean) * (v - mean);
  var /= double(x.size());
  EXPECT_NEAR(mean, 0.0, 0.03);  // 4.2 standard errors of the mean
  EXPECT_NEAR(var, 1.0, 0.04);
}

}  // namespace
}  // namespace stepmix
