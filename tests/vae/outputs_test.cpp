// decode_to_outputs: one decode feeds an MP4, a PNG frame folder, a PNG
// strip and a tensor, each complete and consistent; a failed decode leaves
// no file behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "io/png.hpp"
#include "io/video.hpp"
#include "vae/outputs.hpp"
#include "vae_test_util.hpp"

namespace stepmix::test {
namespace {

namespace fs = std::filesystem;

class DecodeOutputs : public TempDirTest {};

TEST_F(DecodeOutputs, EveryOutputFromOneDecode) {
  const auto file = SafetensorsFile::open(vae_golden("decode/video.safetensors"));
  const TensorView& latent = file->get("latent");
  vae::DecodeOutputs out;
  out.video = (dir_ / "clip.mp4").string();
  out.frames_dir = (dir_ / "frames").string();
  out.image = (dir_ / "strip.png").string();
  out.tensor = (dir_ / "pixels.safetensors").string();
  out.fps = 16;
  vae::decode_to_outputs(golden_vae(), latent.as<float>(), latent.shape, out);

  const VideoInfo info = probe_video(*out.video);
  EXPECT_EQ(info.frames, 9);
  EXPECT_EQ(info.width, 96);
  EXPECT_EQ(info.height, 64);
  EXPECT_DOUBLE_EQ(info.fps, 16.0);
  int pngs = 0;
  for (const auto& e : fs::directory_iterator(*out.frames_dir)) pngs += e.path().extension() == ".png";
  EXPECT_EQ(pngs, 9);
  const Image8 strip = read_png(*out.image);
  EXPECT_EQ(strip.width, 9 * 96);
  EXPECT_EQ(strip.height, 64);
  // Frame 4 of the folder is the fifth picture of the strip.
  const Image8 frame4 = read_png((fs::path(*out.frames_dir) / "frame_00004.png").string());
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 96 * 3; ++x)
      ASSERT_EQ(frame4.pixels[std::size_t(y * 96 * 3 + x)], strip.pixels[std::size_t(y * strip.width * 3 + 4 * 96 * 3 + x)]);
  // (The MP4's fidelity is measured on smooth frames in tests/io/video_test.cpp:
  // these random-weight frames vary colour pixel by pixel, which 4:2:0 chroma
  // cannot hold.)
  const auto pixels = SafetensorsFile::open(*out.tensor);
  EXPECT_LE(deviation(pixels->get("pixels").as<float>(), file->get("pixels")), kDecodeBound);
}

TEST_F(DecodeOutputs, FailedDecodeWritesNothing) {
  const auto file = SafetensorsFile::open(vae_golden("decode/video.safetensors"));
  const TensorView& latent = file->get("latent");
  std::vector<float> values(latent.as<float>(), latent.as<float>() + latent.numel());
  values.back() = std::numeric_limits<float>::quiet_NaN();
  vae::DecodeOutputs out;
  out.video = (dir_ / "clip.mp4").string();
  out.frames_dir = (dir_ / "frames").string();
  out.image = (dir_ / "strip.png").string();
  out.tensor = (dir_ / "pixels.safetensors").string();
  EXPECT_NE(error_of([&] { vae::decode_to_outputs(golden_vae(), values.data(), latent.shape, out); }).find("is NaN"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace stepmix::test
