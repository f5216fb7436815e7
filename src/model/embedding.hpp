// Input packing and output unpacking of the vision stream: latent
// patchify/unpatchify, the text embedding rows and the
// timestep sinusoid.
#pragma once

#include <cstdint>
#include <vector>

#include "core/vision_tokens.hpp"
#include "core/tensor.hpp"

namespace stepmix {


// patchify_into / unpatchify_into (core/vision_tokens.hpp) into new vectors.
std::vector<float> patchify(const float* latent, const PatchGrid& grid);

std::vector<float> unpatchify(const float* patches, const PatchGrid& grid, const std::vector<int64_t>& noisy_frames);

// timesteps: [n] scheduler timesteps → [n, 256]: τ = float32(t) ·
// float32(timestep_scale), a_j = τ · exp(-ln(10000)·j/128) in float32,
// [cos(a_0..a_127), sin(a_0..a_127)] (flip_sin_to_cos, shift 0).
std::vector<float> timestep_sinusoid(const std::vector<float>& timesteps, double timestep_scale);

// ids: [L] token ids → [L, E] float32 rows of the embedding table [vocab, E]
// (BF16 widened exactly, or F32). Ids are checked by the caller.
std::vector<float> embed_text(const TensorView& table, const std::vector<int64_t>& ids, int64_t hidden_size);

}  // namespace stepmix
