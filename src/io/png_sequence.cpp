// The parts of io/video.hpp that need no FFmpeg: numbered PNG frames and
// PSNR (built with or without video, STEPMIX_VIDEO).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "io/video.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace fs = std::filesystem;

// ---------------------------------------------------------------- PNG frames
PngSequenceWriter::PngSequenceWriter(std::string folder) : folder_(std::move(folder)) {
  if (!fs::is_directory(folder_)) throw Error("video", folder_ + ": expected an existing folder for the frames");
}

void PngSequenceWriter::add_frame(const Image8& image) {
  char name[32];
  std::snprintf(name, sizeof name, "frame_%05lld.png", static_cast<long long>(frames_));
  write_png((fs::path(folder_) / name).string(), image);
  ++frames_;
}

double psnr(const Image8& a, const Image8& b) {
  if (a.width != b.width || a.height != b.height || a.channels != b.channels || a.pixels.size() != b.pixels.size())
    throw Error("video", "psnr: images of different sizes");
  double sum = 0;
  for (std::size_t i = 0; i < a.pixels.size(); ++i) {
    const double d = double(a.pixels[i]) - double(b.pixels[i]);
    sum += d * d;
  }
  if (sum == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(255.0 * 255.0 / (sum / double(a.pixels.size())));
}

}  // namespace stepmix
