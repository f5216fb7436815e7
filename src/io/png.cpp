#include "io/png.hpp"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "io/file_access.hpp"
#include "io/output_set.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

void append_to_string(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::string*>(png_get_io_ptr(png));
  out->append(reinterpret_cast<const char*>(data), n);
}

[[noreturn]] void png_error_to_exception(png_structp, png_const_charp message) { throw Error("png", message); }
void png_warning_ignored(png_structp, png_const_charp) {}

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// PNG keywords: 1-79 printable Latin-1 characters, no leading, trailing or
// double spaces (PNG spec 11.3.4.2).
bool valid_keyword(const std::string& k) {
  if (k.empty() || k.size() > 79 || k.front() == ' ' || k.back() == ' ' || k.find("  ") != std::string::npos)
    return false;
  return std::all_of(k.begin(), k.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c >= 32 && c <= 126) || c >= 161;
  });
}

// Bytes read from memory by libpng.
struct MemoryReader {
  const std::string* bytes;
  std::size_t offset = 0;
};

void read_from_memory(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (n > r->bytes->size() - r->offset) png_error(png, "file ends inside a chunk");
  std::memcpy(out, r->bytes->data() + r->offset, n);
  r->offset += n;
}

// libpng reading a whole PNG file held in memory. The file is read first,
// so a folder, an empty or a non-PNG file is named as such (libpng alone
// says "Read Error" for all of them); libpng's errors arrive as
// stepmix::Error (png_error_to_exception), and the structs are freed however
// the reading ends.
class PngFileReader {
 public:
  explicit PngFileReader(const std::string& path) : bytes_(read_regular_file(path, 256ull << 20, "png")) {
    if (bytes_.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes_.data()), 0, 8) != 0)
      throw Error("png", path + ": not a PNG file (no PNG signature)");
    png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, png_error_to_exception, png_warning_ignored);
    info = png ? png_create_info_struct(png) : nullptr;
    end_info = info ? png_create_info_struct(png) : nullptr;
    if (!end_info) {
      png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
      throw Error("png", path + ": out of memory");
    }
    png_set_read_fn(png, &reader_, read_from_memory);
    png_set_chunk_malloc_max(png, 64u << 20);  // one text chunk may hold a long prompt, not gigabytes
  }
  PngFileReader(const PngFileReader&) = delete;
  PngFileReader& operator=(const PngFileReader&) = delete;
  ~PngFileReader() { png_destroy_read_struct(&png, &info, &end_info); }

  png_structp png = nullptr;
  png_infop info = nullptr, end_info = nullptr;

 private:
  std::string bytes_;
  MemoryReader reader_{&bytes_};
};

void collect_text(png_structp png, png_infop info, std::vector<PngText>& out) {
  png_textp text = nullptr;
  const int n = png_get_text(png, info, &text, nullptr);
  for (int i = 0; i < n; ++i) {
    const png_text& t = text[i];
    const char* chunk = t.compression == PNG_TEXT_COMPRESSION_NONE   ? "tEXt"
                        : t.compression == PNG_TEXT_COMPRESSION_zTXt ? "zTXt"
                                                                     : "iTXt";
    const std::size_t length = t.compression >= PNG_ITXT_COMPRESSION_NONE ? t.itxt_length : t.text_length;
    out.push_back({t.key, std::string(t.text ? t.text : "", t.text ? length : 0), chunk});
  }
}

}  // namespace

uint8_t unit_range_to_u8(float x) {
  const float v = std::clamp(x * 0.5f + 0.5f, 0.0f, 1.0f);
  // Half to even, as the reference's (v * 255).round() in NumPy: 238.5 -> 238.
  return uint8_t(std::nearbyint(v * 255.0f));
}

std::string encode_png(const std::string& path, const Image8& image, const std::vector<PngText>& text) {
  if (image.width <= 0 || image.height <= 0 || (image.channels != 1 && image.channels != 3) ||
      image.pixels.size() != std::size_t(image.width) * image.height * image.channels)
    throw Error("png", path + ": image of " + std::to_string(image.width) + "x" + std::to_string(image.height) + "x" +
                           std::to_string(image.channels) + " does not match its " + std::to_string(image.pixels.size()) +
                           " bytes");
  for (const PngText& t : text)
    if (!valid_keyword(t.keyword))
      throw Error("png", path + ": text chunk keyword '" + t.keyword +
                             "' is not 1-79 printable Latin-1 characters without leading, trailing or double spaces");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, png_error_to_exception, png_warning_ignored);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    throw Error("png", path + ": out of memory");
  }
  std::string encoded;
  try {
    png_set_write_fn(png, &encoded, append_to_string, nullptr);
    png_set_IHDR(png, info, png_uint_32(image.width), png_uint_32(image.height), 8,
                 image.channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    std::vector<png_text> chunks(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      png_text& c = chunks[i];
      std::memset(&c, 0, sizeof c);
      c.compression = is_ascii(text[i].text) ? PNG_TEXT_COMPRESSION_NONE : PNG_ITXT_COMPRESSION_NONE;
      c.key = const_cast<char*>(text[i].keyword.c_str());
      c.text = const_cast<char*>(text[i].text.c_str());
      if (c.compression == PNG_TEXT_COMPRESSION_NONE)
        c.text_length = text[i].text.size();
      else
        c.itxt_length = text[i].text.size();
    }
    if (!chunks.empty()) png_set_text(png, info, chunks.data(), int(chunks.size()));
    png_write_info(png, info);
    const std::size_t stride = std::size_t(image.width) * image.channels;
    for (int y = 0; y < image.height; ++y)
      png_write_row(png, const_cast<png_bytep>(image.pixels.data() + y * stride));
    png_write_end(png, nullptr);
  } catch (...) {
    png_destroy_write_struct(&png, &info);
    throw;
  }
  png_destroy_write_struct(&png, &info);
  return encoded;
}

void write_png(const std::string& path, const Image8& image, const std::vector<PngText>& text) {
  write_file_atomic(path, encode_png(path, image, text));
}

namespace {
// A palette shorter than the indices in the image (a malformed file that
// decoders accept) is completed as PIL completes it, entry i gray (i, i, i);
// libpng would give black.
void pad_short_palette(png_structp png, png_infop info) {
  png_colorp palette = nullptr;
  int count = 0;
  if (png_get_color_type(png, info) != PNG_COLOR_TYPE_PALETTE ||
      png_get_PLTE(png, info, &palette, &count) != PNG_INFO_PLTE)
    return;
  const int size = 1 << png_get_bit_depth(png, info);
  if (count >= size) return;
  png_color padded[PNG_MAX_PALETTE_LENGTH];
  std::copy(palette, palette + count, padded);
  for (int i = count; i < size; ++i) padded[i] = {png_byte(i), png_byte(i), png_byte(i)};
  png_set_PLTE(png, info, padded, size);
}

Image8 read_png_as(const std::string& path, bool force_rgb) {
  PngFileReader reader(path);
  png_structp png = reader.png;
  png_infop info = reader.info;
  Image8 out;
  bool own_error = false;  // a libpng error says the file is not a valid PNG
  try {
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);  // the limit below names the size
    png_read_info(png, info);
    const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
    own_error = width > 65536 || height > 65536;
    if (own_error)
      throw Error("png",
                  std::to_string(width) + "x" + std::to_string(height) + " pixels; expected at most 65536 a side");
    // The samples as PIL reads a picture (the reference loads one with
    // convert("RGB")): palettes (a short one completed in gray) and bit
    // depths under 8 expanded, 16-bit samples cut to their high byte (0x8000
    // is 128), alpha and tRNS dropped with the colour under them kept, and no
    // gamma or colour-profile conversion (libpng's simplified reader converts
    // 16-bit samples from linear light and blends alpha towards black).
    // PIL opens 16-bit gray (no alpha channel) as integers ("I;16") and
    // convert("RGB") clips them at 255 instead of scaling: almost any such
    // picture turns white. Matching that would be faithful and useless, a
    // different reading would not match the reference, so it is refused.
    own_error = png_get_color_type(png, info) == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) == 16;
    if (own_error)
      throw Error(
          "png",
          "16-bit grayscale; expected 8-bit samples, or 16-bit colour or gray with alpha (the reference reader, PIL's "
          "convert(\"RGB\"), clips 16-bit gray samples at 255 instead of scaling them): save it as 8-bit");
    const bool color = png_get_color_type(png, info) & PNG_COLOR_MASK_COLOR;
    pad_short_palette(png, info);
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    if (force_rgb && !color) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    out.width = int(width);
    out.height = int(height);
    out.channels = int(png_get_channels(png, info));
    own_error = out.channels != (force_rgb || color ? 3 : 1) ||
                png_get_rowbytes(png, info) != std::size_t(width) * std::size_t(out.channels);
    if (own_error)
      throw Error("png", "unexpected sample layout after conversion to 8-bit " + std::string(color ? "RGB" : "gray"));
    out.pixels.resize(std::size_t(width) * height * std::size_t(out.channels));
    std::vector<png_bytep> rows(height);
    for (png_uint_32 y = 0; y < height; ++y) rows[y] = out.pixels.data() + std::size_t(y) * width * out.channels;
    png_read_image(png, rows.data());
    png_read_end(png, reader.end_info);
  } catch (const Error& e) {
    const std::string what = std::string(e.what()).substr(std::strlen("[png] "));
    throw Error("png", path + ": " + (own_error ? what : "not a valid PNG (" + what + ")"));
  }
  return out;
}

}  // namespace

Image8 read_png(const std::string& path) { return read_png_as(path, false); }
Image8 read_png_rgb(const std::string& path) { return read_png_as(path, true); }

std::vector<PngText> read_png_text(const std::string& path) {
  PngFileReader reader(path);
  png_structp png = reader.png;
  png_infop info = reader.info, end_info = reader.end_info;
  std::vector<PngText> out;
  try {
    png_set_user_limits(png, 1u << 16, 1u << 16);
    png_read_info(png, info);
    collect_text(png, info, out);
    // The image rows must be read to reach chunks after the image data.
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    std::vector<png_byte> row(png_get_rowbytes(png, info));
    for (int pass = 0; pass < passes; ++pass)
      for (png_uint_32 y = 0; y < png_get_image_height(png, info); ++y) png_read_row(png, row.data(), nullptr);
    png_read_end(png, end_info);
    collect_text(png, end_info, out);
  } catch (const Error& e) {
    throw Error("png", path + ": " + std::string(e.what()).substr(std::strlen("[png] ")));
  }
  return out;
}

}  // namespace stepmix
