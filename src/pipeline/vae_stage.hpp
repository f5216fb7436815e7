// The model's video VAE (vae/) around a generation: the image of an
// image-to-video request encoded into latent frame 0 before sampling, the
// final latent decoded into the requested pictures and video after it, and
// the memory both need, checked before any sampling.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "io/output_set.hpp"
#include "stepmix/model.hpp"
#include "vae/outputs.hpp"
#include "vae/vae.hpp"

namespace stepmix {

// root/vae when the model folder has one.
std::optional<std::string> vae_folder_of(const ModelDirectory& dir);

class VaeStage;
// The VAE of an opened model; null without vae/ (src/pipeline/model.cpp).
const VaeStage* vae_stage_of(const Model& model);

class VaeStage {
 public:
  // Reads vae/config.json and the weight headers only; checks that the
  // latent channels agree with the transformer's. On Device::Cuda the
  // decoder and the image encode of image-to-video run on the GPU
  // (backend/vae_device.hpp).
  VaeStage(const std::string& folder, int64_t transformer_channels, ActivationDType activations,
           Device device = Device::Cpu);

  const vae::WanVae& sizes() const { return sizes_; }

  // Latent frame 0 [C][h][w] of `image_path` (a PNG, scaled to cover
  // height × width pixels and centre-cropped), normalised as the transformer
  // sees latents. Loads the encoder when needed (on a GPU it is released after
  // each encode, so the decoder has the memory).
  std::vector<float> encode_condition_image(const std::string& image_path, int64_t height, int64_t width) const;

  // Throw when decoding `latent_shape` {C, T, h, w} (collecting the whole
  // clip when `collect`), or encoding the image of its frame 0, would need
  // more than the memory available.
  void check_decode_memory(const std::array<int64_t, 4>& latent_shape, bool collect) const;
  void check_encode_memory(const std::array<int64_t, 4>& latent_shape) const;

  // Decodes `latent` [1, C, T, h, w] once into every output declared in
  // `ids` of `set` (validated by the caller); the caller commits.
  void decode_and_stage(const std::vector<float>& latent, const std::array<int64_t, 4>& latent_shape,
                        const vae::DecodeOutputs& outputs, const vae::DecodeOutputIds& ids, OutputSet& set,
                        const std::function<void(int64_t, int64_t)>& progress) const;

 private:
  const vae::WanVae& loaded(bool decoder) const;

  std::string folder_;
  vae::VaeOptions options_;
  VaeDevice* device_ = nullptr;  // decodes and encodes there; null: on the CPU
  vae::WanVae sizes_;
  mutable std::optional<vae::WanVae> decoder_, encoder_;
};

}  // namespace stepmix
