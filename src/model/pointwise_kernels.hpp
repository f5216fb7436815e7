// Variants of the BF16-activation pointwise kernels (pointwise.hpp): the
// portable scalar twin every faster variant is tested against, and AVX-512.
// Each entry processes a contiguous range on the calling thread; the public
// functions in pointwise.hpp split the work over the thread pool.
#pragma once

#include <cstdint>

#include "model/pointwise.hpp"

namespace stepmix::pointwise {

struct Bf16Kernels {
  const char* name;
  void (*rms_norm_to_bf16)(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                           uint16_t* out);
  void (*head_norm_rotary)(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin);
  void (*silu_gate)(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);
  void (*relu_squared)(uint16_t* x, int64_t count);
  void (*add_to_f32)(float* residual, const uint16_t* y, int64_t count);
  void (*widen)(const uint16_t* x, int64_t count, float* out);
  void (*round)(const float* x, int64_t count, uint16_t* out);
};

// Scalar loops; the definition of every result.
const Bf16Kernels& portable_kernels();
// AVX-512F (+FMA for exp); null when the CPU cannot run it.
const Bf16Kernels* avx512_kernels();
// What pointwise.hpp uses: AVX-512 when available and STEPMIX_ISA is not "ref".
const Bf16Kernels& active_kernels();

// Implemented in pointwise_avx512.cpp (only call when avx512_kernels() is set).
extern const Bf16Kernels kAvx512Kernels;

}  // namespace stepmix::pointwise
