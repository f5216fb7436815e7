#include "io/png.hpp"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "io/safetensors.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

void append_to_string(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::string*>(png_get_io_ptr(png));
  out->append(reinterpret_cast<const char*>(data), n);
}

[[noreturn]] void png_error_to_exception(png_structp, png_const_charp message) { throw Error("png", message); }
void png_warning_ignored(png_structp, png_const_charp) {}

}  // namespace

uint8_t unit_range_to_u8(float x) {
  const float v = std::clamp(x * 0.5f + 0.5f, 0.0f, 1.0f);
  return uint8_t(std::lround(v * 255.0f));
}

void write_png(const std::string& path, const Image8& image) {
  if (image.width <= 0 || image.height <= 0 || (image.channels != 1 && image.channels != 3) ||
      image.pixels.size() != std::size_t(image.width) * image.height * image.channels)
    throw Error("png", path + ": image of " + std::to_string(image.width) + "x" + std::to_string(image.height) + "x" +
                           std::to_string(image.channels) + " does not match its " + std::to_string(image.pixels.size()) +
                           " bytes");
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
  write_file_atomic(path, encoded);
}

namespace {
Image8 read_png_as(const std::string& path, bool force_rgb) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path.c_str())) throw Error("png", path + ": " + img.message);
  Image8 out;
  out.width = int(img.width);
  out.height = int(img.height);
  out.channels = force_rgb || (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
  img.format = out.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  out.pixels.resize(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, out.pixels.data(), 0, nullptr)) {
    png_image_free(&img);
    throw Error("png", path + ": " + img.message);
  }
  return out;
}

}  // namespace

Image8 read_png(const std::string& path) { return read_png_as(path, false); }
Image8 read_png_rgb(const std::string& path) { return read_png_as(path, true); }

}  // namespace stepmix
