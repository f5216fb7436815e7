#include "pipeline/vae_stage.hpp"

#include <filesystem>

#include "backend/vae_device.hpp"
#include "io/png.hpp"
#include "io/video.hpp"

namespace stepmix {
namespace fs = std::filesystem;

std::optional<std::string> vae_folder_of(const ModelDirectory& dir) {
  if (dir.transformer_dir == dir.root) return std::nullopt;  // a bare transformer folder
  const fs::path vae = fs::path(dir.root) / "vae";
  if (!fs::exists(vae)) return std::nullopt;
  return vae.string();
}

namespace {

vae::VaeOptions headers_only(ActivationDType activations) {
  vae::VaeOptions o;
  o.arithmetic = activations == ActivationDType::BF16 ? kernels::GemmArithmetic::BF16 : kernels::GemmArithmetic::F32;
  o.decoder = o.encoder = false;
  return o;
}

}  // namespace

VaeStage::VaeStage(const std::string& folder, int64_t transformer_channels, ActivationDType activations,
                   Device device)
    : folder_(folder),
      options_(headers_only(activations)),
      device_(device == Device::Cpu ? nullptr : &vae_device_for(device)),
      sizes_(vae::WanVae::load(folder, options_)) {
  if (sizes_.config().z_dim != transformer_channels)
    throw Error("generate", folder + "/config.json: z_dim: expected the transformer's latent_channel " +
                                std::to_string(transformer_channels) + ", got " + std::to_string(sizes_.config().z_dim));
}

const vae::WanVae& VaeStage::loaded(bool decoder) const {
  std::optional<vae::WanVae>& slot = decoder ? decoder_ : encoder_;
  if (!slot) {
    vae::VaeOptions o = options_;
    o.decoder = decoder;
    o.encoder = !decoder;
    slot.emplace(vae::WanVae::load(folder_, o));
  }
  return *slot;
}

std::vector<float> VaeStage::encode_condition_image(const std::string& image_path, int64_t height,
                                                    int64_t width) const {
  const Image8 image = read_png_rgb(image_path);
  const Image8 fitted = resize_and_center_crop(image, int(width), int(height));
  vae::RunOptions run;
  run.input_label = image_path;
  run.device = device_;
  const vae::EncodeResult e = loaded(false).encode_image(fitted, run);
  if (device_) {
    // The encoder's GPU copies go with it: the sampling and the decode that
    // follow need that memory more than a later encode needs the weights.
    encoder_.reset();
    device_->release_cached();
  }
  return e.latent;  // [1, C, 1, h, w]: frame 0 in the [C][h][w] order
}

void VaeStage::check_decode_memory(const std::array<int64_t, 4>& shape, bool collect) const {
  const auto [C, T, h, w] = shape;
  const int64_t sf = sizes_.config().spatial_factor();
  // On the GPU this runs again just before the decode, when the
  // transformer's buffers are held.
  vae::check_decode_fits(sizes_, T, h, w, collect, device_, vae::available_memory_bytes().value_or(SIZE_MAX),
                         "decoding " + std::to_string(sizes_.config().pixel_frames(T)) + " frames of " +
                             std::to_string(h * sf) + "x" + std::to_string(w * sf));
}

void VaeStage::check_encode_memory(const std::array<int64_t, 4>& shape) const {
  const int64_t sf = sizes_.config().spatial_factor(), H = shape[2] * sf, W = shape[3] * sf;
  vae::check_encode_fits(sizes_, 1, H, W, device_, vae::available_memory_bytes().value_or(SIZE_MAX),
                         "encoding a " + std::to_string(H) + "x" + std::to_string(W) + " image");
}

void VaeStage::decode_and_stage(const std::vector<float>& latent, const std::array<int64_t, 4>& shape,
                                const vae::DecodeOutputs& outputs, const vae::DecodeOutputIds& ids, OutputSet& set,
                                const std::function<void(int64_t, int64_t)>& progress) const {
  const auto [C, T, h, w] = shape;
  vae::RunOptions run;
  run.input_label = "the generated latent";
  run.progress = progress;
  run.device = device_;
  if (device_) check_decode_memory(shape, false);
  vae::decode_and_stage(loaded(true), latent.data(), {1, C, T, h, w}, outputs, ids, set, run);
}

}  // namespace stepmix
