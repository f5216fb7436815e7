// Video and image-sequence output, through Debian's FFmpeg libraries
// (libavcodec, libavformat, libswscale): H.264 in MP4, yuv420p, constant
// frame rate. Frames are streamed in one at a time (a long clip is never held
// whole) and the file appears at its path only when finish() succeeds: it is
// written under a temporary name (registered with io/temporary_outputs.hpp)
// and renamed into place.
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
#include "io/temporary_outputs.hpp"

namespace stepmix {

class Mp4Writer {
 public:
  // width and height must be even (yuv420p halves the chroma planes); fps > 0
  // (fractional rates such as 23.976 are stored as the nearest rational).
  // Throws stepmix::Error("video", "<path>: ...") when the encoder or the file
  // cannot be set up (e.g. no H.264 encoder in this FFmpeg build).
  Mp4Writer(const std::string& path, int width, int height, double fps);
  ~Mp4Writer();  // without a successful finish() the temporary file is removed
  Mp4Writer(const Mp4Writer&) = delete;
  Mp4Writer& operator=(const Mp4Writer&) = delete;

  // An 8-bit RGB frame of the writer's size.
  void add_frame(const Image8& rgb);
  // Flushes the encoder, writes the index and renames the file into place.
  void finish();
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

// frame_00000.png, frame_00001.png, ... in `folder`, which must not exist
// yet: written into a temporary folder beside it, renamed by finish().
class PngSequenceWriter {
 public:
  explicit PngSequenceWriter(const std::string& folder);
  ~PngSequenceWriter();
  PngSequenceWriter(const PngSequenceWriter&) = delete;
  PngSequenceWriter& operator=(const PngSequenceWriter&) = delete;
  void add_frame(const Image8& image);
  void finish();
  int64_t frames() const { return frames_; }

 private:
  std::string folder_, temporary_;
  std::unique_ptr<TemporaryOutput> cleanup_;
  int64_t frames_ = 0;
  bool finished_ = false;
};

// Scales `image` (gray or RGB) to cover width × height with its aspect ratio
// kept, then crops the centre: the conditioning image of an image-to-video
// request. Bicubic (libswscale). Returns RGB.
Image8 resize_and_center_crop(const Image8& image, int width, int height);

// PSNR in dB of two 8-bit images of the same size (infinity when equal).
double psnr(const Image8& a, const Image8& b);

}  // namespace stepmix
