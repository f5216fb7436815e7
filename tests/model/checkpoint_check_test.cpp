// check_cosmos3_checkpoint: the load-time checks without a run (for inspect),
// and the one list of warnings every command prints.
#include "model/checkpoint_check.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error_of.hpp"
#include "common/golden.hpp"
#include "common/temp_dir.hpp"

namespace stepmix::test {
namespace {

namespace fs = std::filesystem;

class CheckpointCheckTest : public TempDirTest {};

TEST_F(CheckpointCheckTest, TheGoldenPassesWithItsGovernedCounts) {
  const ModelDirectory dir = ModelDirectory::open(golden_path("transformer-fp8"));
  const CheckedCheckpoint c = check_cosmos3_checkpoint(dir, TensorStore::open_folder(dir.transformer_dir));
  EXPECT_EQ(c.config.num_hidden_layers, 2);
  EXPECT_EQ(c.governed.generation_fp8 + c.governed.reasoner_fp8, 28);
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(CheckpointCheckTest, WarningsOfTheConfigAndOfHfQuantConfigAreReturned) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  fs::copy(golden_path("transformer-fp8"), model / "transformer", fs::copy_options::recursive);
  nlohmann::json config = read_json_file((model / "transformer" / "config.json").string(), "test");
  config["mystery_knob"] = 1;
  std::ofstream(model / "transformer" / "config.json") << config.dump();
  std::ofstream(model / "hf_quant_config.json") << R"({"quant_method": "modelopt", "quant_algo": "FP8", "runtime": {}})";
  const ModelDirectory dir = ModelDirectory::open(model.string());
  const CheckedCheckpoint c = check_cosmos3_checkpoint(dir, TensorStore::open_folder(dir.transformer_dir));
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find("mystery_knob: unknown key, ignored"), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[1].find("runtime"), std::string::npos) << c.warnings[1];
  EXPECT_EQ(model_directory_warnings(dir), c.warnings);
}

TEST_F(CheckpointCheckTest, RefusesWhatLoadingRefuses) {
  fs::copy(golden_path("transformer-fp8"), dir_ / "t", fs::copy_options::recursive);
  nlohmann::json config = read_json_file((dir_ / "t" / "config.json").string(), "test");
  config["sound_gen"] = true;
  std::ofstream(dir_ / "t" / "config.json") << config.dump();
  const ModelDirectory dir = ModelDirectory::open((dir_ / "t").string());
  EXPECT_NE(error_of([&] { check_cosmos3_checkpoint(dir, TensorStore::open_folder(dir.transformer_dir)); })
                .find("sound_gen: true: sound generation is not implemented"),
            std::string::npos);
}

}  // namespace
}  // namespace stepmix::test
