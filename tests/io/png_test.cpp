#include "io/png.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "stepmix/error.hpp"

namespace stepmix {
namespace {

TEST(Png, GrayAndRgbRoundTrip) {
  const auto dir = std::filesystem::temp_directory_path() / ("stepmix_png_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (int channels : {1, 3}) {
    Image8 img{5, 3, channels, {}};
    for (int i = 0; i < 5 * 3 * channels; ++i) img.pixels.push_back(uint8_t(i * 17));
    const std::string path = (dir / ("img" + std::to_string(channels) + ".png")).string();
    write_png(path, img);
    const Image8 back = read_png(path);
    EXPECT_EQ(back.width, 5);
    EXPECT_EQ(back.height, 3);
    EXPECT_EQ(back.channels, channels);
    EXPECT_EQ(back.pixels, img.pixels);
  }
  EXPECT_THROW(write_png((dir / "bad.png").string(), Image8{2, 2, 1, {1, 2, 3}}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.png"));
  std::filesystem::remove_all(dir);
}

TEST(Png, UnitRangeMapping) {
  EXPECT_EQ(unit_range_to_u8(-1.0f), 0);
  EXPECT_EQ(unit_range_to_u8(1.0f), 255);
  EXPECT_EQ(unit_range_to_u8(0.0f), 128);  // 127.5 rounds away from zero
  EXPECT_EQ(unit_range_to_u8(-5.0f), 0);
  EXPECT_EQ(unit_range_to_u8(7.0f), 255);
}

}  // namespace
}  // namespace stepmix
