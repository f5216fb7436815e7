// Interleaved 3-axis mRoPE: the cos/sin tables of the joint sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.hpp"

namespace stepmix {

// inv_freq_j = 1 / θ^(2j/D), j = 0..D/2-1, evaluated as torch does in float32
// (float32 exponent 2j/D, float32 pow, float32 reciprocal), so that it is
// bit-identical to the upstream `inv_freq` buffer: at vision positions around
// 15000 a one-ulp difference moves the tables by ~6e-5.
std::vector<float> rope_inv_freq(const Cosmos3Config& config);

// cos/sin of the joint sequence, one row of D values per token.
struct RopeTables {
  int64_t rows = 0;
  int64_t head_dim = 0;
  std::vector<float> cos;  // [rows, D]
  std::vector<float> sin;  // [rows, D]

  const float* cos_row(int64_t row) const { return cos.data() + row * head_dim; }
  const float* sin_row(int64_t row) const { return sin.data() + row * head_dim; }
};

// position_ids: [3, S] (T, H, W rows), float32. Angle of slot j at token s is
// the single float32 product position[axis(j), s] · inv_freq[j]; the slots are
// repeated for the second half of the head (emb = [ang, ang]).
RopeTables build_rope_tables(const Cosmos3Config& config, const float* position_ids, int64_t sequence_length);

// The rotation itself (x·cos + rotate_half(x)·sin) is a kernel:
// kernels::head_norm_rotary (src/kernels/pointwise.hpp).

}  // namespace stepmix
