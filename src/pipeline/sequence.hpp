// The joint sequence of one CFG pass: understanding ids, then vision tokens,
// with the mRoPE position ids the pipeline builds.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/forward_inputs.hpp"

namespace stepmix {

// Pipeline keys of transformer/config.json (not part of the architecture).
struct SequenceSettings {
  double base_fps = 24.0;
  bool enable_fps_modulation = true;
  int64_t temporal_modality_margin = 15000;
  bool reset_spatial_ids = true;
  int64_t patch_size = 2;
};

// Reads base_fps, enable_fps_modulation,
// unified_3d_mrope_temporal_modality_margin, unified_3d_mrope_reset_spatial_ids
// and latent_patch_size (Diffusers defaults when absent); throws naming the
// key on a wrong type or value.
SequenceSettings read_sequence_settings(const nlohmann::json& config, const std::string& config_path);

// Throws unless the temporal positions of `frames` latent frames after
// `und_len` text tokens stay within 2^24 (float32 integers): a frame rate far
// below base_fps spreads them without bound. build_position_ids checks it;
// Model::plan too, before any work.
void check_temporal_positions(int64_t und_len, int64_t frames, double fps, const SequenceSettings& settings);

// [3, L + T·Hp·Wp] float32, rows T, H, W. Text token s gets (s, s, s); vision
// tokens start at O = L + margin, h/w are the patch row/column (offset by O
// unless reset_spatial_ids), and the T row is O + f, or with fps modulation
// and T > 1, (f / (fps/4)) · (base_fps/4) + O evaluated in float32.
std::vector<float> build_position_ids(int64_t und_len, int64_t frames, int64_t patches_h, int64_t patches_w,
                                      double fps, const SequenceSettings& settings);

// Inputs of one pass with every frame noisy (text-to-image / text-to-video).
// latent_shape = {C, T, H, W}; the latent itself and the timestep are filled
// per step by the caller.
ForwardInputs make_pass_inputs(const std::vector<int64_t>& ids, const std::array<int64_t, 4>& latent_shape, double fps,
                               const SequenceSettings& settings);

}  // namespace stepmix
