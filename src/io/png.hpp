// 8-bit PNG output (grayscale or RGB) with text chunks, written atomically,
// and reading back images and their text chunks.
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

// One text chunk: a keyword (1-79 Latin-1 printable characters) and its text.
// Text that is all ASCII is written as tEXt (what every reader shows); other
// text as an uncompressed UTF-8 iTXt chunk, as PIL (and so A1111) does.
struct PngText {
  std::string keyword;
  std::string text;
  std::string chunk;  // read back: "tEXt", "zTXt" or "iTXt"; ignored when writing
};

// The PNG file's bytes; `path` only names it in errors. Text chunks are
// written before the image data.
std::string encode_png(const std::string& path, const Image8& image, const std::vector<PngText>& text = {});
// Writes `image` to `path` under a temporary name, then renames it
// (io/output_set.hpp).
void write_png(const std::string& path, const Image8& image, const std::vector<PngText>& text = {});
// Reads an 8-bit gray or RGB PNG (used by tests and reports).
Image8 read_png(const std::string& path);
// Reads any PNG libpng understands (gray, palette, alpha, 16-bit) as 8-bit
// RGB: alpha is dropped with the colour under it kept, 16-bit samples are
// cut to their high byte, no gamma conversion (as PIL reads a picture).
// Throws naming the file when it is not a readable PNG, or is 16-bit gray
// without alpha (PIL clips those samples at 255 rather than scaling them).
Image8 read_png_rgb(const std::string& path);
// Every tEXt, zTXt and iTXt chunk of the PNG at `path`, in file order
// (before and after the image data). The file must be a regular file of at
// most 256 MiB; the image is decoded a row at a time and discarded, with
// libpng's limits on width, height and chunk sizes.
std::vector<PngText> read_png_text(const std::string& path);

// Maps [-1, 1] to [0, 255] as clamp(x/2 + 0.5, 0, 1) * 255, rounded half to
// even.
uint8_t unit_range_to_u8(float x);

}  // namespace stepmix
