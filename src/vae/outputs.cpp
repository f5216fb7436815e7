#include "vae/outputs.hpp"

#include <algorithm>
#include <memory>

#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "io/video.hpp"
#include "stepmix/error.hpp"

namespace stepmix::vae {

DecodeOutputIds declare_decode_outputs(OutputSet& set, const DecodeOutputs& outputs, const std::string& out_label) {
  DecodeOutputIds ids;
  if (outputs.image) ids.image = set.add_file(out_label, *outputs.image);
  if (outputs.video) ids.video = set.add_file(out_label, *outputs.video);
  if (outputs.tensor) ids.tensor = set.add_file(out_label, *outputs.tensor);
  if (outputs.frames_dir) ids.frames_dir = set.add_folder("--frames-dir", *outputs.frames_dir, false);
  return ids;
}

void decode_and_stage(const WanVae& vae, const float* latent, const std::vector<int64_t>& shape,
                      const DecodeOutputs& outputs, const DecodeOutputIds& ids, OutputSet& set,
                      const RunOptions& options) {
  if (shape.size() != 5)
    throw Error("vae", (options.input_label.empty() ? "latent" : options.input_label) +
                           ": expected shape [1, z_dim, T, h, w], got " + shape_to_string(shape));
  const int64_t F = vae.config().pixel_frames(shape[2]), sf = vae.config().spatial_factor();
  const int64_t H = shape[3] * sf, W = shape[4] * sf;
  // The encoder is set up first, so a size it cannot take fails before the decode.
  std::unique_ptr<Mp4Writer> video;
  if (ids.video) video = std::make_unique<Mp4Writer>(*outputs.video, int(W), int(H), outputs.fps);
  std::unique_ptr<PngSequenceWriter> frames;
  if (ids.frames_dir) frames = std::make_unique<PngSequenceWriter>(set.stage_folder(*ids.frames_dir));
  Image8 strip;
  if (ids.image) {
    strip.width = int(W * F);
    strip.height = int(H);
    strip.channels = 3;
    strip.pixels.resize(std::size_t(strip.width) * strip.height * 3);
  }
  std::vector<float> pixels;
  if (ids.tensor) pixels.resize(std::size_t(3 * F * H * W));

  vae.decode(latent, shape, [&](int64_t t, const Frame& rgb) {
    if (video || frames || ids.image) {
      const Image8 image = to_image8(rgb);
      if (video) video->add_frame(image);
      if (frames) frames->add_frame(image);
      if (ids.image)
        for (int64_t y = 0; y < H; ++y)
          std::copy_n(image.pixels.begin() + y * W * 3, W * 3, strip.pixels.begin() + (y * strip.width + t * W) * 3);
    }
    if (ids.tensor)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t p = 0; p < H * W; ++p) pixels[std::size_t((c * F + t) * H * W + p)] = rgb.f32[std::size_t(p * 3 + c)];
  }, options);

  if (video) set.stage_file(*ids.video, video->finish());
  if (ids.image) set.stage_file(*ids.image, encode_png(*outputs.image, strip, outputs.image_text));
  if (ids.tensor)
    set.stage_file(*ids.tensor, encode_safetensors(*outputs.tensor, {make_tensor_f32("pixels", {1, 3, F, H, W}, pixels)}));
}

void decode_to_outputs(const WanVae& vae, const float* latent, const std::vector<int64_t>& shape,
                       const DecodeOutputs& outputs, const RunOptions& options) {
  OutputSet set;
  const DecodeOutputIds ids = declare_decode_outputs(set, outputs, "--out");
  set.validate();
  decode_and_stage(vae, latent, shape, outputs, ids, set, options);
  set.commit();
}

}  // namespace stepmix::vae
