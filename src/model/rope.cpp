#include "model/rope.hpp"

#include <cmath>

namespace stepmix {

std::vector<float> rope_inv_freq(const Cosmos3Config& config) {
  const int64_t slots = config.head_dim / 2;
  const float theta = float(config.rope_theta);
  const float head_dim = float(config.head_dim);
  std::vector<float> inv_freq(std::size_t(slots), 0.0f);
  for (int64_t j = 0; j < slots; ++j) {
    const float exponent = float(2 * j) / head_dim;
    inv_freq[std::size_t(j)] = 1.0f / std::pow(theta, exponent);
  }
  return inv_freq;
}

RopeTables build_rope_tables(const Cosmos3Config& config, const float* position_ids, int64_t sequence_length) {
  const int64_t D = config.head_dim;
  const int64_t slots = D / 2;
  const std::vector<float> inv_freq = rope_inv_freq(config);
  const std::vector<RopeAxis> axes = config.rope_slot_axes();

  RopeTables tables;
  tables.rows = sequence_length;
  tables.head_dim = D;
  tables.cos.resize(std::size_t(sequence_length * D));
  tables.sin.resize(std::size_t(sequence_length * D));
  for (int64_t s = 0; s < sequence_length; ++s) {
    float* cos_row = tables.cos.data() + s * D;
    float* sin_row = tables.sin.data() + s * D;
    for (int64_t j = 0; j < slots; ++j) {
      const float position = position_ids[int64_t(axes[std::size_t(j)]) * sequence_length + s];
      const float angle = position * inv_freq[std::size_t(j)];
      cos_row[j] = cos_row[j + slots] = std::cos(angle);
      sin_row[j] = sin_row[j + slots] = std::sin(angle);
    }
  }
  return tables;
}

}  // namespace stepmix
