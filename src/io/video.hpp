// Video and image-sequence output, through Debian's FFmpeg libraries
// (libavcodec, libavformat, libswscale; opened at the first video,
// io/ffmpeg_library.hpp): H.264 in MP4, yuv420p, constant
// frame rate. Frames are streamed in one at a time (a long clip's pixels are
// never held whole, only its compressed bytes) and finish() returns the MP4
// file, for the caller to stage in its OutputSet (io/output_set.hpp).
//
// Also: a reader the tests use to check what was written (frame count, size,
// frame rate, one decoded frame), a folder of numbered PNG frames written the
// same atomic way, and the resize/crop that fits a conditioning image to a
// request size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/png.hpp"

namespace stepmix {

class Mp4Writer {
 public:
  // width and height even and >= 2 (yuv420p halves the chroma planes); fps in
  // [kMinFps, kMaxFps]
  // (fractional rates such as 23.976 are stored as the nearest rational).
  // `path` names the output in errors: stepmix::Error("video", "<path>: ...")
  // when the encoder cannot be set up (e.g. no H.264 encoder in this FFmpeg).
  Mp4Writer(const std::string& path, int width, int height, double fps);
  ~Mp4Writer();
  Mp4Writer(const Mp4Writer&) = delete;
  Mp4Writer& operator=(const Mp4Writer&) = delete;

  // An 8-bit RGB frame of the writer's size.
  void add_frame(const Image8& rgb);
  // Flushes the encoder, writes the index and returns the MP4 file's bytes.
  std::string finish();
  int64_t frames() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct VideoInfo {
  int64_t frames = 0;      // decoded frames
  int width = 0, height = 0;
  double fps = 0;          // the stream's average frame rate
  std::string codec;       // e.g. "h264"
  std::string pixel_format;  // e.g. "yuv420p"
};

// Opens and decodes the whole video stream of `path`.
VideoInfo probe_video(const std::string& path);
// Frame `index` (0-based) of the video stream, converted to 8-bit RGB.
Image8 read_video_frame(const std::string& path, int64_t index);

// frame_00000.png, frame_00001.png, ... in `folder`, an existing folder: the
// caller's staged folder (OutputSet::stage_folder), which it commits.
class PngSequenceWriter {
 public:
  explicit PngSequenceWriter(std::string folder);
  void add_frame(const Image8& image);
  int64_t frames() const { return frames_; }

 private:
  std::string folder_;
  int64_t frames_ = 0;
};

// Scales `image` (gray or RGB) to cover width × height with its aspect ratio
// kept, then crops the centre: the conditioning picture of an image-to-video
// request, fitted exactly as the reference pipeline fits it (PyTorch's
// antialiased bilinear resampling, io/picture_fit.cpp). Returns RGB. Plain
// arithmetic, in every build. (MP4 writing and reading need FFmpeg;
// PngSequenceWriter and psnr do not.)
Image8 resize_and_center_crop(const Image8& image, int width, int height);

// PSNR in dB of two 8-bit images of the same size (infinity when equal).
double psnr(const Image8& a, const Image8& b);

// "" when video works here; otherwise why not: kBuiltWithoutVideo in a build
// without FFmpeg's headers (CMake STEPMIX_VIDEO=OFF, or AUTO without them;
// io/video_stub.cpp), or, since the libraries are opened at the first video
// rather than linked (io/ffmpeg_library.hpp), which of them could not be
// opened, each file tried and what to install. The first call opens them.
// MP4 outputs are refused up front with this reason, and every video
// operation throws it.
std::string video_unavailable();
inline bool video_supported() { return video_unavailable().empty(); }
// Whether this build has video at all (FFmpeg's headers), without opening
// the libraries: what error messages listing the accepted outputs go by.
bool video_built();
inline constexpr const char* kBuiltWithoutVideo =
    "this stepmix was built without video (FFmpeg's libavcodec, libavformat and libswscale); configure with "
    "-DSTEPMIX_VIDEO=ON and them installed";

}  // namespace stepmix
