// 8-bit PNG output (grayscale or RGB), written atomically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stepmix {

struct Image8 {
  int width = 0;
  int height = 0;
  int channels = 1;             // 1 = gray, 3 = RGB
  std::vector<uint8_t> pixels;  // row-major, interleaved channels
};

// Writes `image` to `path` under a temporary name, then renames it.
void write_png(const std::string& path, const Image8& image);
// Reads an 8-bit gray or RGB PNG (used by tests and reports).
Image8 read_png(const std::string& path);
// Reads any PNG libpng understands (gray, palette, alpha, 16-bit) as 8-bit
// RGB; alpha is composited onto black. Throws naming the file when it is not
// a readable PNG.
Image8 read_png_rgb(const std::string& path);

// Maps [-1, 1] to [0, 255] as clamp(x/2 + 0.5, 0, 1) * 255, rounded.
uint8_t unit_range_to_u8(float x);

}  // namespace stepmix
