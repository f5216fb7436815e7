// Portable BF16-activation pointwise kernels (the scalar twins), the variant
// choice, and the thread-pool wrappers of pointwise.hpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/numerics.hpp"
#include "kernels/linear_kernels.hpp"
#include "model/parallel.hpp"
#include "model/pointwise_kernels.hpp"
#include "model/rope.hpp"

namespace stepmix {
namespace pointwise {
namespace {

void rms_norm_to_bf16_portable(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                               uint16_t* out) {
  std::vector<float> normed(static_cast<std::size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    rms_norm(x + r * n, 1, n, weight, eps, kind, normed.data());
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = float_to_bf16_rne(normed[std::size_t(i)]);
  }
}

void head_norm_rotary_portable(uint16_t* x, int64_t rows, int64_t heads, int64_t D, const float* norm_weight,
                               float eps, NormKind kind, const float* cos, const float* sin) {
  std::vector<float> head(static_cast<std::size_t>(D));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      uint16_t* v = x + (r * heads + h) * D;
      for (int64_t d = 0; d < D; ++d) head[std::size_t(d)] = bf16_to_float(v[d]);
      if (norm_weight) rms_norm(head.data(), 1, D, norm_weight, eps, kind, head.data());
      apply_rotary(head.data(), 1, 1, D, cos + r * D, sin + r * D);
      for (int64_t d = 0; d < D; ++d) v[d] = float_to_bf16_rne(head[std::size_t(d)]);
    }
}

void silu_gate_portable(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = bf16_to_float(gate[i]);
    out[i] = float_to_bf16_rne((g / (1.0f + std::exp(-g))) * bf16_to_float(up[i]));
  }
}

void relu_squared_portable(uint16_t* x, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = bf16_to_float(x[i]);
    const float r = v > 0.0f ? v : 0.0f;
    x[i] = float_to_bf16_rne(r * r);
  }
}

void add_to_f32_portable(float* residual, const uint16_t* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) residual[i] += bf16_to_float(y[i]);
}

void widen_portable(const uint16_t* x, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_float(x[i]);
}

void round_portable(const float* x, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = float_to_bf16_rne(x[i]);
}

const Bf16Kernels kPortable{"portable",
                            rms_norm_to_bf16_portable,
                            head_norm_rotary_portable,
                            silu_gate_portable,
                            relu_squared_portable,
                            add_to_f32_portable,
                            widen_portable,
                            round_portable};

}  // namespace

const Bf16Kernels& portable_kernels() { return kPortable; }

const Bf16Kernels* avx512_kernels() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.fma && cpu.os_saves_avx512_state ? &kAvx512Kernels
                                                                                              : nullptr;
}

const Bf16Kernels& active_kernels() {
  static const Bf16Kernels& chosen = []() -> const Bf16Kernels& {
    const Bf16Kernels* fast = avx512_kernels();
    return fast && std::string(kernels::active_kernels().name) != "ref" ? *fast : kPortable;
  }();
  return chosen;
}

}  // namespace pointwise

using pointwise::active_kernels;
constexpr int64_t kGrainElements = kParallelGrainElements;

void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out) {
  parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
    active_kernels().rms_norm_to_bf16(x + r0 * n, r1 - r0, n, weight, eps, kind, out + r0 * n);
  });
}

void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin) {
  parallel_rows(rows, heads * head_dim, [&](int64_t r0, int64_t r1) {
    active_kernels().head_norm_rotary(x + r0 * heads * head_dim, r1 - r0, heads, head_dim, norm_weight, eps, kind,
                                      cos + r0 * head_dim, sin + r0 * head_dim);
  });
}

void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) {
  parallel_ranges(count, kGrainElements,
                  [&](int64_t b, int64_t e) { active_kernels().silu_gate(gate + b, up + b, e - b, out + b); });
}

void relu_squared_bf16(uint16_t* x, int64_t count) {
  parallel_ranges(count, kGrainElements, [&](int64_t b, int64_t e) { active_kernels().relu_squared(x + b, e - b); });
}

void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count) {
  parallel_ranges(count, kGrainElements,
                  [&](int64_t b, int64_t e) { active_kernels().add_to_f32(residual + b, y + b, e - b); });
}

void widen_bf16(const uint16_t* x, int64_t count, float* out) {
  parallel_ranges(count, kGrainElements, [&](int64_t b, int64_t e) { active_kernels().widen(x + b, e - b, out + b); });
}

void round_to_bf16(const float* x, int64_t count, uint16_t* out) {
  parallel_ranges(count, kGrainElements, [&](int64_t b, int64_t e) { active_kernels().round(x + b, e - b, out + b); });
}

}  // namespace stepmix
