#include "model/embedding.hpp"

#include <cmath>

#include "core/numerics.hpp"

namespace stepmix {

std::vector<float> patchify(const float* latent, const PatchGrid& grid) {
  std::vector<float> patches(std::size_t(grid.tokens() * grid.features()));
  patchify_into(latent, grid, patches.data());
  return patches;
}

std::vector<float> unpatchify(const float* patches, const PatchGrid& grid, const std::vector<int64_t>& noisy_frames) {
  std::vector<float> out(std::size_t(grid.channels * grid.frames * grid.height * grid.width));
  unpatchify_into(patches, grid, noisy_frames, out.data());
  return out;
}

std::vector<float> timestep_sinusoid(const std::vector<float>& timesteps, double timestep_scale) {
  constexpr int64_t half = kTimestepChannels / 2;
  // Float32 throughout, as upstream: -ln(max_period) rounded to float32, times
  // j, divided by half (exact: a power of two), then exp.
  const float log_max_period = float(-std::log(10000.0));
  float frequencies[half];
  for (int64_t j = 0; j < half; ++j) frequencies[j] = std::exp(log_max_period * float(j) / float(half));

  std::vector<float> out(timesteps.size() * kTimestepChannels);
  for (std::size_t i = 0; i < timesteps.size(); ++i) {
    const float tau = timesteps[i] * float(timestep_scale);
    float* row = out.data() + i * kTimestepChannels;
    for (int64_t j = 0; j < half; ++j) {
      const float angle = tau * frequencies[j];
      row[j] = std::cos(angle);
      row[j + half] = std::sin(angle);
    }
  }
  return out;
}

std::vector<float> embed_text(const TensorView& table, const std::vector<int64_t>& ids, int64_t E) {
  const int64_t L = int64_t(ids.size());
  std::vector<float> rows(std::size_t(L * E));  // [L, E]
  for (int64_t i = 0; i < L; ++i) {
    const int64_t row = ids[std::size_t(i)] * E;
    for (int64_t e = 0; e < E; ++e)
      rows[std::size_t(i * E + e)] =
          table.dtype == DType::BF16 ? bf16_to_float(table.as<uint16_t>()[row + e]) : table.as<float>()[row + e];
  }
  return rows;
}

}  // namespace stepmix
