// Writing a generation's outputs and reading an initial-noise file
// (include/stepmix/model.hpp).
#include <filesystem>

#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "stepmix/model.hpp"

namespace stepmix {
namespace {

// [1, C, T, H, W] with C = 1 or 3 → one image, frames side by side.
Image8 latent_to_image(const std::vector<float>& latent, const std::array<int64_t, 4>& shape) {
  const auto [C, T, H, W] = shape;
  // Channel c of frame t at latent[c][t][h][w].
  Image8 img{int(W * T), int(H), C == 3 ? 3 : 1, {}};
  img.pixels.resize(std::size_t(img.width) * img.height * img.channels);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t c = 0; c < img.channels; ++c)
          img.pixels[((h * img.width) + t * W + w) * img.channels + c] =
              unit_range_to_u8(latent[((c * T + t) * H + h) * W + w]);
  return img;
}

}  // namespace

void write_outputs(const GenerateResult& result, const OutputPaths& paths) {
  const auto [C, T, H, W] = result.plan.latent_shape;
  if (paths.video || paths.frames_dir)
    throw Error("generate", (paths.video ? *paths.video : *paths.frames_dir) +
                                ": video needs the model's VAE: write it with Model::write_outputs");
  if (paths.image) {
    if (!result.plan.image_output)
      throw Error("generate", *paths.image + ": this model's latent is not an image (it needs a VAE decoder)");
    write_png(*paths.image, latent_to_image(result.latent, result.plan.latent_shape));
  }
  if (paths.latents) write_safetensors(*paths.latents, {make_tensor_f32("latent", {1, C, T, H, W}, result.latent)});
}

std::vector<float> read_noise_file(const std::string& path, const std::array<int64_t, 4>& shape) {
  const auto [C, T, H, W] = shape;
  const auto f = SafetensorsFile::open(path);
  const TensorView& noise = f->get("noise");
  if (noise.dtype != DType::F32 || noise.shape != std::vector<int64_t>{1, C, T, H, W})
    throw Error("generate", path + ": tensor 'noise' must be F32 " + shape_to_string({1, C, T, H, W}) + ", got " +
                                std::string(dtype_name(noise.dtype)) + " " + shape_to_string(noise.shape));
  return std::vector<float>(noise.as<float>(), noise.as<float>() + noise.numel());
}

void write_tensors(const std::string& path, const std::vector<NamedTensor>& tensors) {
  std::vector<TensorToWrite> out;
  out.reserve(tensors.size());
  for (const NamedTensor& t : tensors) out.push_back(make_tensor_f32(t.name, t.shape, t.data));
  write_safetensors(path, out);
}

std::string shape_string(const std::vector<int64_t>& shape) { return shape_to_string(shape); }

}  // namespace stepmix
