// vae/config.json of a Cosmos3 checkpoint: the Diffusers AutoencoderKLWan in
// its Wan2.2 ("residual") configuration. Every key Diffusers writes for the
// class is read; a missing key takes the class's default (latents_mean and
// latents_std are required: the class's defaults are Wan2.1's 16 channels,
// never the 48 stepmix runs), an unknown key or
// a value stepmix does not implement (another z_dim, patch_size, or the
// Wan2.1 non-residual blocks) is an error naming the key.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace stepmix::vae {

struct VaeConfig {
  int64_t base_dim = 96;          // encoder base width
  int64_t decoder_base_dim = 96;  // "decoder_base_dim" (null = base_dim)
  int64_t z_dim = 48;
  std::vector<int64_t> dim_mult{1, 2, 4, 4};
  int64_t num_res_blocks = 2;
  std::vector<bool> temperal_downsample{false, true, true};  // sic: Diffusers' spelling
  int64_t patch_size = 2;
  int64_t in_channels = 12, out_channels = 12;
  int64_t scale_factor_spatial = 16, scale_factor_temporal = 4;
  std::vector<float> latents_mean, latents_std;  // z_dim each
  std::string path;  // the file read, for messages

  int levels() const { return int(dim_mult.size()); }
  // Encoder widths base_dim·[1, dim_mult...] (levels + 1 entries).
  std::vector<int64_t> encoder_widths() const;
  // Decoder widths decoder_base_dim·[dim_mult[L−1], dim_mult[L−1], …, dim_mult[0]].
  std::vector<int64_t> decoder_widths() const;
  // Decoder up block i doubles time iff reversed(temperal_downsample)[i].
  std::vector<bool> decoder_temporal_upsample() const;
  // Pixels per latent row/column (patch_size · 2^(levels−1)) and pixel
  // frames per latent frame after the first (2^(temporal flags set)).
  int64_t spatial_factor() const;
  int64_t temporal_factor() const;
  // Pixel frames of T latent frames: temporal_factor·(T − 1) + 1.
  int64_t pixel_frames(int64_t latent_frames) const { return temporal_factor() * (latent_frames - 1) + 1; }
};

// Parses and validates; throws stepmix::Error("vae", "<path>: <key>: ...").
VaeConfig parse_vae_config(const nlohmann::json& config, const std::string& path);
VaeConfig read_vae_config(const std::string& path);

}  // namespace stepmix::vae
