// Row-wise and element-wise pieces of the decoder layer in float32 (shared
// spec cosmos3-transformer.md §6): RMSNorm variants and MLP activations.
#pragma once

#include <cstdint>

namespace stepmix {

// Standard: out = (x · r) · w. Nemotron (relu2 models): out = (w · x) · r.
// r = 1/sqrt(mean(x²) + eps) in float32 in both.
enum class NormKind { Standard, Nemotron };

// x: [rows, n], weight: [n] → out: [rows, n]; out may alias x. Per-head q/k
// norms are the same call with rows·heads rows of n = D.
void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind, float* out);

// gate, up: [count] → out[i] = SiLU(gate[i]) · up[i]; out may alias gate.
void silu_gate(const float* gate, const float* up, int64_t count, float* out);

// x[i] = relu(x[i])², in place.
void relu_squared(float* x, int64_t count);

// x[i] = SiLU(x[i]) = x / (1 + exp(-x)), in place.
void silu(float* x, int64_t count);

}  // namespace stepmix

// ---------------------------------------------------------------- BF16 activations
// The pieces between the Linears of ActivationDType::BF16: inputs and outputs
// are bf16 (uint16_t bits), the arithmetic is float32 and each output is
// rounded to bf16 once (round to nearest even). Rows are independent and are
// spread over the global thread pool, so results do not depend on the number
// of threads. AVX-512 variants are used where the CPU has them
// (pointwise_kernels.hpp); STEPMIX_ISA=ref keeps the portable ones.
namespace stepmix {

// x: [rows, n] float32 → out: [rows, n] bf16(rms_norm(x)) (same arithmetic as
// rms_norm above, one rounding at the end).
void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out);

// x: [rows, heads, D] bf16, in place: per-head RMSNorm with weight [D] (none
// when norm_weight is null), then rotary with cos/sin: [rows, D] shared by the
// heads (apply_rotary's arithmetic), then one rounding to bf16.
void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin);

// out[i] = bf16(SiLU(gate[i]) · up[i]); out may alias gate or up.
void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);

// x[i] = bf16(relu(x[i])²), in place.
void relu_squared_bf16(uint16_t* x, int64_t count);

// residual[i] += float(y[i]) (the residual stream stays float32).
void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count);

// out[i] = float(x[i]) / bf16(x[i]), exact / round to nearest even.
void widen_bf16(const uint16_t* x, int64_t count, float* out);
void round_to_bf16(const float* x, int64_t count, uint16_t* out);

}  // namespace stepmix
