#include "io/png.hpp"

#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

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
  // Halves round to even, as the reference's NumPy round(): 127.5 -> 128,
  // 238.5 -> 238 (x = 0.8705881834030151 gives v * 255 = 238.5 exactly).
  EXPECT_EQ(unit_range_to_u8(0.0f), 128);
  EXPECT_EQ((0.8705881834030151f * 0.5f + 0.5f) * 255.0f, 238.5f);
  EXPECT_EQ(unit_range_to_u8(0.8705881834030151f), 238);
  EXPECT_EQ(unit_range_to_u8(-5.0f), 0);
  EXPECT_EQ(unit_range_to_u8(7.0f), 255);
}

// Writes `samples` (one row of `width` pixels in libpng's simplified-API
// `format`: 8-bit, or 16-bit for the LINEAR formats) with libpng itself, so
// the reader is tested on files it did not write.
template <typename Sample>
::testing::AssertionResult write_row_with_libpng(const std::string& path, png_uint_32 format, png_uint_32 width,
                                                 const std::vector<Sample>& samples) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = width;
  img.height = 1;
  img.format = format;
  if (png_image_write_to_file(&img, path.c_str(), 0, samples.data(), 0, nullptr)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << img.message;
}

// An alpha channel is dropped and the colour under it kept (PIL's
// convert("RGB"), what the reference pipeline loads a picture with), not
// blended towards black.
TEST(Png, AlphaIsDroppedNotComposited) {
  const auto dir = std::filesystem::temp_directory_path() / ("stepmix_png_alpha_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rgba.png").string();
  const std::vector<uint8_t> rgba = {200, 100, 50, 128, 10, 20, 30, 0, 255, 255, 255, 255};
  ASSERT_TRUE(write_row_with_libpng(path, PNG_FORMAT_RGBA, 3, rgba));
  EXPECT_EQ(read_png_rgb(path).pixels, (std::vector<uint8_t>{200, 100, 50, 10, 20, 30, 255, 255, 255}));
  const std::vector<uint8_t> ga = {90, 64, 7, 0};
  ASSERT_TRUE(write_row_with_libpng(path, PNG_FORMAT_GA, 2, ga));
  EXPECT_EQ(read_png_rgb(path).pixels, (std::vector<uint8_t>{90, 90, 90, 7, 7, 7}));
  const Image8 gray = read_png(path);
  EXPECT_EQ(gray.channels, 1);
  EXPECT_EQ(gray.pixels, (std::vector<uint8_t>{90, 7}));
  std::filesystem::remove_all(dir);
}

// 16-bit samples are cut to their high byte, as PIL reads them (0x8000 ->
// 128, 0x0101 -> 1), whatever gamma the file declares: libpng's simplified
// reader converted them from linear light (0x8000 -> 186).
TEST(Png, SixteenBitSamplesAreScaledNotGammaConverted) {
  const auto dir = std::filesystem::temp_directory_path() / ("stepmix_png_16_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rgb16.png").string();
  const std::vector<uint16_t> rgb = {0x8000, 0x4000, 0x2000, 0xffff, 0x0000, 0x0101};
  // 16-bit samples, written as given with gAMA 1.0.
  ASSERT_TRUE(write_row_with_libpng(path, PNG_FORMAT_LINEAR_RGB, 2, rgb));
  EXPECT_EQ(read_png_rgb(path).pixels, (std::vector<uint8_t>{128, 64, 32, 255, 0, 1}));
  std::filesystem::remove_all(dir);
}

// PIL reads 16-bit gray as integers and clips them at 255 in convert("RGB");
// such a picture is refused with the reason, not read another way.
TEST(Png, SixteenBitGrayIsRefusedWithTheReason) {
  const auto dir = std::filesystem::temp_directory_path() / ("stepmix_png_gray16_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "gray16.png").string();
  const std::vector<uint16_t> gray = {0x8000, 0x00ff};
  ASSERT_TRUE(write_row_with_libpng(path, PNG_FORMAT_LINEAR_Y, 2, gray));  // 16-bit gray, no alpha
  for (const bool rgb : {true, false}) {
    try {
      rgb ? read_png_rgb(path) : read_png(path);
      ADD_FAILURE() << "read a 16-bit gray PNG";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("gray16.png: 16-bit grayscale; expected 8-bit samples"), std::string::npos) << what;
      EXPECT_NE(what.find("save it as 8-bit"), std::string::npos) << what;
    }
  }
  // 16-bit gray with alpha is read as PIL reads it ("LA;16B": the high byte).
  const std::vector<uint16_t> gray_alpha = {0x8000, 0xffff, 0x4000, 0xffff};
  ASSERT_TRUE(write_row_with_libpng(path, PNG_FORMAT_LINEAR_Y_ALPHA, 2, gray_alpha));
  EXPECT_EQ(read_png_rgb(path).pixels, (std::vector<uint8_t>{128, 128, 128, 64, 64, 64}));
  std::filesystem::remove_all(dir);
}

// A one-row palette PNG written chunk by chunk, so that it may be malformed
// in ways libpng's writer refuses: `row` is the packed row of indices.
std::string palette_png(int width, int bit_depth, const std::vector<uint8_t>& palette_rgb,
                        const std::vector<uint8_t>& row) {
  std::string file = "\x89PNG\r\n\x1a\n";
  const auto be32 = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  const auto chunk = [&](const char* type, const std::string& data) {
    const std::string body = type + data;
    file += be32(uint32_t(data.size())) + body +
            be32(uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
  };
  // Width, height 1, bit depth, colour type 3 (palette), no interlace.
  const std::string ihdr = be32(uint32_t(width)) + be32(1) + std::string{char(bit_depth), 3, 0, 0, 0};
  chunk("IHDR", ihdr);
  chunk("PLTE", std::string(palette_rgb.begin(), palette_rgb.end()));
  std::string raw(1, '\0');  // filter type None
  raw.append(row.begin(), row.end());
  std::vector<Bytef> packed(compressBound(uLong(raw.size())));
  uLongf packed_size = uLongf(packed.size());
  compress(packed.data(), &packed_size, reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()));
  chunk("IDAT", std::string(packed.begin(), packed.begin() + long(packed_size)));
  chunk("IEND", "");
  return file;
}

// Indices past the end of a short palette (a malformed file decoders accept)
// read as PIL reads them, entry i gray (i, i, i), where libpng gives black.
TEST(Png, AShortPaletteIsCompletedInGrayAsPilCompletesIt) {
  const auto dir = std::filesystem::temp_directory_path() / ("stepmix_png_palette_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "short.png").string();
  const std::vector<uint8_t> two_colours = {10, 20, 30, 40, 50, 60};
  std::ofstream(path, std::ios::binary) << palette_png(4, 2, two_colours, {0x1B});  // indices 0 1 2 3
  EXPECT_EQ(read_png_rgb(path).pixels, (std::vector<uint8_t>{10, 20, 30, 40, 50, 60, 2, 2, 2, 3, 3, 3}));
  std::ofstream(path, std::ios::binary) << palette_png(3, 8, two_colours, {1, 200, 0});
  EXPECT_EQ(read_png_rgb(path).pixels, (std::vector<uint8_t>{40, 50, 60, 200, 200, 200, 10, 20, 30}));
  std::filesystem::remove_all(dir);
}

TEST(Png, TextChunksRoundTripInBothForms) {
  const auto dir = std::filesystem::temp_directory_path() / ("stepmix_png_text_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "meta.png").string();
  const std::vector<PngText> text{{"parameters", "a boot\nSteps: 8", ""}, {"Comment", "Größe: groß", ""}};
  write_png(path, Image8{2, 1, 1, {0, 255}}, text);
  const std::vector<PngText> back = read_png_text(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].keyword, "parameters");
  EXPECT_EQ(back[0].text, "a boot\nSteps: 8");
  EXPECT_EQ(back[0].chunk, "tEXt");  // ASCII
  EXPECT_EQ(back[1].keyword, "Comment");
  EXPECT_EQ(back[1].text, "Größe: groß");
  EXPECT_EQ(back[1].chunk, "iTXt");  // UTF-8, as PIL writes it
  EXPECT_EQ(read_png(path).pixels, (std::vector<uint8_t>{0, 255}));  // the image is unchanged
  write_png((dir / "plain.png").string(), Image8{1, 1, 1, {7}});
  EXPECT_TRUE(read_png_text((dir / "plain.png").string()).empty());
  // Bad keywords are refused before anything is written; non-PNG files are named.
  EXPECT_THROW(write_png((dir / "bad.png").string(), Image8{1, 1, 1, {0}}, {{" lead", "x", ""}}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.png"));
  std::ofstream(dir / "fake.png") << "GIF89a, not a png";
  try {
    read_png_text((dir / "fake.png").string());
    ADD_FAILURE() << "read a non-PNG";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fake.png: not a PNG file"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stepmix
