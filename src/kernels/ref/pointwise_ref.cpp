// The reference variant's pointwise kernels: scalar loops, the definition of
// every result (kernels/pointwise.hpp).
#include <cmath>
#include <vector>

#include "core/numerics.hpp"
#include "kernels/pointwise.hpp"

namespace stepmix::kernels::ref {
namespace {

// x: [heads, D] of one row, rotated in place with that row's cos/sin [D].
void rotate_heads(float* x, int64_t heads, int64_t D, const float* c, const float* s) {
  const int64_t half = D / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * D;
    for (int64_t j = 0; j < half; ++j) {
      const float first = v[j];
      const float second = v[j + half];
      // Two products and one sum, each rounded, as the reference evaluates them.
      v[j] = first * c[j] + (-second) * s[j];
      v[j + half] = second * c[j + half] + first * s[j + half];
    }
  }
}

}  // namespace

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

void rms_norm_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                   uint16_t* out) {
  std::vector<float> normed(static_cast<std::size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    rms_norm(x + r * n, 1, n, weight, eps, kind, normed.data());
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = float_to_bf16_rne(normed[std::size_t(i)]);
  }
}

void head_norm_rotary(float* x, int64_t rows, int64_t heads, int64_t D, const float* norm_weight, float eps,
                      NormKind kind, const float* cos, const float* sin) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * heads * D;
    if (norm_weight) rms_norm(row, heads, D, norm_weight, eps, kind, row);
    rotate_heads(row, heads, D, cos + r * D, sin + r * D);
  }
}

void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t D, const float* norm_weight, float eps,
                           NormKind kind, const float* cos, const float* sin) {
  std::vector<float> head(static_cast<std::size_t>(D));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      uint16_t* v = x + (r * heads + h) * D;
      for (int64_t d = 0; d < D; ++d) head[std::size_t(d)] = bf16_to_float(v[d]);
      if (norm_weight) rms_norm(head.data(), 1, D, norm_weight, eps, kind, head.data());
      rotate_heads(head.data(), 1, D, cos + r * D, sin + r * D);
      for (int64_t d = 0; d < D; ++d) v[d] = float_to_bf16_rne(head[std::size_t(d)]);
    }
}

void silu(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void silu_gate(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = (gate[i] / (1.0f + std::exp(-gate[i]))) * up[i];
}

void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = bf16_to_float(gate[i]);
    out[i] = float_to_bf16_rne((g / (1.0f + std::exp(-g))) * bf16_to_float(up[i]));
  }
}

void relu_squared(float* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    x[i] = r * r;
  }
}

void relu_squared_bf16(uint16_t* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = bf16_to_float(x[i]);
    const float r = v > 0.0f ? v : 0.0f;
    x[i] = float_to_bf16_rne(r * r);
  }
}

void add(float* residual, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) residual[i] += y[i];
}

void add_bf16(float* residual, const uint16_t* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) residual[i] += bf16_to_float(y[i]);
}

void widen_bf16(const uint16_t* x, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_float(x[i]);
}

void round_bf16(const float* x, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = float_to_bf16_rne(x[i]);
}

}  // namespace stepmix::kernels::ref
