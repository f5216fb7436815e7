// The request's prompt switches reach the Cosmos3 prompt: the system message
// forced on or off, and the resolution and duration sentences left out
// (Diffusers' add_resolution_template / add_duration_template), on a model
// folder with the Qwen3 tokenizer beside the tiny golden transformer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/golden.hpp"
#include "stepmix/model.hpp"
#include "text/prompt_model.hpp"
#include "text/qwen3_fixture.hpp"

namespace stepmix {
namespace {
namespace fs = std::filesystem;

TEST(PromptSwitches, TheRequestsSwitchesShapeThePromptAsThePromptToolDoes) {
  const fs::path root = fs::path(::testing::TempDir()) / "stepmix-prompt-switches";
  fs::remove_all(root);
  fs::create_directories(root);
  fs::create_directory_symlink(fs::absolute(test::golden_path("transformer")), root / "transformer");
  fs::create_directory_symlink(fs::absolute(test::Qwen3Folder::path()), root / "text_tokenizer");
  std::ofstream(root / "model_index.json") << R"({"default_use_system_prompt": false})";
  const Model model = Model::open(root.string());
  const text::PromptModel prompts = text::PromptModel::open(root.string());

  GenerateRequest r;
  r.height = 32;
  r.width = 48;
  r.frames = 9;
  r.fps = 8.0;
  text::Cosmos3PromptRequest want;
  want.prompt = "A robot";
  want.height = 32;
  want.width = 48;
  want.num_frames = 9;
  want.fps = 8.0;
  const auto ids = [&] { return model.encode_prompt("A robot", r); };
  const auto reference = [&] { return prompts.build(want).positive_ids; };

  const std::vector<int64_t> plain = ids();
  EXPECT_EQ(plain, reference());  // the model's default: no system message
  r.use_system_prompt = want.use_system_prompt = true;
  const std::vector<int64_t> with_system = ids();
  EXPECT_EQ(with_system, reference());
  EXPECT_GT(with_system.size(), plain.size() + 10);
  r.resolution_sentence = want.resolution_sentence = false;
  const std::vector<int64_t> no_resolution = ids();
  EXPECT_EQ(no_resolution, reference());
  EXPECT_LT(no_resolution.size(), with_system.size());
  r.duration_sentence = want.duration_sentence = false;
  const std::vector<int64_t> bare = ids();
  EXPECT_EQ(bare, reference());
  EXPECT_LT(bare.size(), no_resolution.size());
  fs::remove_all(root);
}

}  // namespace
}  // namespace stepmix
