#include "model/pointwise.hpp"

#include <cmath>

namespace stepmix {

void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float* y = out + r * n;
    // The mean of squares is accumulated in double: closer to the exact value
    // than any float32 summation order, and cheap next to the GEMMs.
    double sum_squares = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_squares += double(in[i]) * double(in[i]);
    const float mean_square = float(sum_squares / double(n));
    const float inv_rms = 1.0f / std::sqrt(mean_square + eps);
    if (kind == NormKind::Standard) {
      for (int64_t i = 0; i < n; ++i) y[i] = (in[i] * inv_rms) * weight[i];
    } else {
      for (int64_t i = 0; i < n; ++i) y[i] = (weight[i] * in[i]) * inv_rms;
    }
  }
}

void silu(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void silu_gate(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = (gate[i] / (1.0f + std::exp(-gate[i]))) * up[i];
}

void relu_squared(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    x[i] = r * r;
  }
}

}  // namespace stepmix
