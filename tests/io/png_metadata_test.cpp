// The "parameters" text A1111 and stable-diffusion.cpp readers parse, and
// stepmix's own JSON chunk, written into a PNG and read back.
#include "io/png_metadata.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/temp_dir.hpp"

namespace stepmix {
namespace {

GenerationParameters boot() {
  GenerationParameters p;
  p.prompt = "a boot";
  p.negative_prompt = "blurry";
  p.steps = 8;
  p.sampler = "UniPC";
  p.cfg_scale = 3;
  p.seed = 42;
  p.width = 28;
  p.height = 28;
  p.model = "fashion-cosmos3-fp8";
  return p;
}

TEST(PngMetadata, ParametersTextHasTheA1111Layout) {
  EXPECT_EQ(a1111_parameters_text(boot()),
            "a boot\nNegative prompt: blurry\nSteps: 8, Sampler: UniPC, CFG scale: 3.0, Seed: 42, Size: 28x28, "
            "Model: fashion-cosmos3-fp8, Version: stepmix " STEPMIX_VERSION);
  GenerationParameters p = boot();
  p.negative_prompt.clear();  // no line at all, as A1111 writes it
  p.cfg_scale = 7.5;
  p.seed = 18446744073709551615ull;
  p.model = "odd, name: 2";  // quoted so the "Key: value, ..." line still splits
  p.extra = {{"Schedule", "first-last:3,3"}};
  EXPECT_EQ(a1111_parameters_text(p),
            "a boot\nSteps: 8, Sampler: UniPC, CFG scale: 7.5, Seed: 18446744073709551615, Size: 28x28, "
            "Model: \"odd, name: 2\", Schedule: \"first-last:3,3\", Version: stepmix " STEPMIX_VERSION);
  EXPECT_EQ(python_float_text(1.0), "1.0");
  EXPECT_EQ(python_float_text(0.1), "0.1");
  EXPECT_EQ(python_float_text(1e-7), "1e-07");
}

class PngMetadataFile : public test::TempDirTest {};

TEST_F(PngMetadataFile, BothChunksAreReadBack) {
  StepmixImageInfo info{"W8A16x3 / W8A8x2 / W8A16x3", "checkpoint", "f32", {{"prompt_ids", {1, 2, 3}}}};
  const std::string path = (dir_ / "out.png").string();
  write_png(path, Image8{1, 1, 3, {1, 2, 3}}, generation_png_text(boot(), info));
  const auto chunks = read_png_text(path);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].keyword, "parameters");
  EXPECT_EQ(chunks[0].chunk, "tEXt");
  EXPECT_EQ(chunks[0].text, a1111_parameters_text(boot()));
  EXPECT_EQ(chunks[1].keyword, "stepmix");
  EXPECT_EQ(chunks[1].chunk, "tEXt");
  const auto j = nlohmann::json::parse(chunks[1].text);
  EXPECT_EQ(j["trace"], "W8A16x3 / W8A8x2 / W8A16x3");
  EXPECT_EQ(j["policy_source"], "checkpoint");
  EXPECT_EQ(j["activations"], "f32");
  EXPECT_EQ(j["version"], STEPMIX_VERSION);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json({1, 2, 3}));
}

}  // namespace
}  // namespace stepmix
