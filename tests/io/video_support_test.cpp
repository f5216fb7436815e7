// What a build says about video (CMake STEPMIX_VIDEO): with FFmpeg an .mp4
// output is taken; without it, it is refused where the path is checked,
// before any work, and every video operation names what is missing. The
// FFmpeg-free parts (PNG frames, PSNR, the conditioning picture's fit) exist
// either way. Built in both kinds of build (the MP4 tests themselves,
// video_test.cpp, only with video).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error_of.hpp"
#include "io/output_format.hpp"
#include "io/video.hpp"

namespace stepmix {
namespace {

TEST(VideoSupport, Mp4OutputsAreTakenExactlyWhenTheBuildHasVideo) {
  const auto format = [] { return output_format_for("clip.mp4", "--out", {OutputFormat::Png, OutputFormat::Mp4}); };
  if (video_supported()) {
    EXPECT_EQ(format(), OutputFormat::Mp4);
    return;
  }
  const std::string refused = test::error_of(format);
  EXPECT_NE(refused.find("--out clip.mp4: " + std::string(kBuiltWithoutVideo)), std::string::npos) << refused;
  EXPECT_NE(refused.find("; expected .png"), std::string::npos) << refused;
  EXPECT_EQ(refused.find(".png or"), std::string::npos) << refused;
  const std::string writer = test::error_of([] { Mp4Writer w("clip.mp4", 64, 64, 24.0); });
  EXPECT_NE(writer.find("[video] clip.mp4: " + std::string(kBuiltWithoutVideo)), std::string::npos) << writer;
}

TEST(VideoSupport, PsnrNeedsNoVideo) {
  Image8 a;
  a.width = 2;
  a.height = 1;
  a.channels = 1;
  a.pixels = {10, 20};
  Image8 b = a;
  EXPECT_TRUE(std::isinf(psnr(a, b)));
  b.pixels[1] = 21;
  EXPECT_NEAR(psnr(a, b), 10.0 * std::log10(255.0 * 255.0 / 0.5), 1e-9);
}

}  // namespace
}  // namespace stepmix
