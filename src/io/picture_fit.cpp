// resize_and_center_crop (io/video.hpp) in every build: the sizes, the gray to
// RGB step and the centred crop are plain arithmetic; only a scale that
// changes the size needs libswscale (scale_rgb24, in io/video.cpp, or its
// refusal in io/video_stub.cpp). A picture that already has the request's
// size is returned as it is, which is what the bicubic scaler gives at equal
// sizes anyway, so a build without FFmpeg still takes a fitted picture.
#include "io/video.hpp"
#include "stepmix/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace stepmix {

Image8 resize_and_center_crop(const Image8& image, int width, int height) {
  if (width < 1 || height < 1 || image.width < 1 || image.height < 1)
    throw Error("video", "resize: sizes must be positive");
  Image8 rgb = image;
  if (image.channels == 1) {
    rgb.channels = 3;
    rgb.pixels.resize(image.pixels.size() * 3);
    for (std::size_t i = 0; i < image.pixels.size(); ++i)
      rgb.pixels[3 * i] = rgb.pixels[3 * i + 1] = rgb.pixels[3 * i + 2] = image.pixels[i];
  }
  if (rgb.width == width && rgb.height == height) return rgb;
  // The largest centred window of the target's aspect ratio.
  int crop_w = rgb.width, crop_h = rgb.height;
  if (int64_t(rgb.width) * height > int64_t(rgb.height) * width) {
    crop_w = int(std::lround(double(rgb.height) * width / height));
  } else {
    crop_h = int(std::lround(double(rgb.width) * height / width));
  }
  crop_w = std::max(1, crop_w);
  crop_h = std::max(1, crop_h);
  const int x0 = (rgb.width - crop_w) / 2, y0 = (rgb.height - crop_h) / 2;
  const uint8_t* window = rgb.pixels.data() + (std::size_t(y0) * rgb.width + x0) * 3;
  return scale_rgb24(window, rgb.width * 3, crop_w, crop_h, width, height);
}

}  // namespace stepmix
