// Row-wise and element-wise pieces of the decoder layer: RMSNorm, per-head
// norm + rotary, MLP activations, residual adds, bf16 conversion.
//
// The functions in namespace kernels run the active variant (kernel_set.hpp,
// pointwise family) with rows or ranges spread over the global thread pool;
// every item is computed by one task with the same arithmetic, so results do
// not depend on the number of threads. Activations are float32 or bf16
// (uint16_t bits); bf16 outputs are computed in float32 and rounded to bf16
// once (round to nearest even).
//
// Variants: ref (the scalar loops below: the definition of every result) and
// avx512, which is bit-identical to them except that its bf16 RMSNorm sums
// the (exact, float64) squares in another order, which can move the float32
// mean square by an ulp in rare rows, and its SiLU uses a polynomial e^x
// (~2 ulp) instead of std::exp; tests allow one bf16 ulp for those two. The
// float32 pieces of every variant are the scalar ones (they define the
// float32 goldens bit for bit).
#pragma once

#include <cstdint>

namespace stepmix {

// Standard: out = (x · r) · w. Nemotron (relu2 models): out = (w · x) · r.
// r = 1/sqrt(mean(x²) + eps) in float32 in both; the mean of squares is
// accumulated in float64.
enum class NormKind { Standard, Nemotron };

namespace kernels {

// x: [rows, n] float32, weight: [n] → out: [rows, n]; a float32 out may alias x.
void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind, float* out);
void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind, uint16_t* out);

// x: [rows, heads, D] in place: per-head RMSNorm with weight [D] (none when
// norm_weight is null), then rotary with cos/sin: [rows, D] shared by the
// heads: x·cos + rotate_half(x)·sin, rotate_half(x) = [-x[D/2:], x[:D/2]]
// (two products and one sum, each rounded, as the reference evaluates them).
void head_norm_rotary(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight, float eps,
                      NormKind kind, const float* cos, const float* sin);
void head_norm_rotary(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                      float eps, NormKind kind, const float* cos, const float* sin);

// out[i] = SiLU(gate[i]) · up[i]; out may alias gate or up.
void silu_gate(const float* gate, const float* up, int64_t count, float* out);
void silu_gate(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);

// x[i] = relu(x[i])², in place.
void relu_squared(float* x, int64_t count);
void relu_squared(uint16_t* x, int64_t count);

// residual[i] += y[i] (the residual stream stays float32).
void add_to_residual(float* residual, const float* y, int64_t count);
void add_to_residual(float* residual, const uint16_t* y, int64_t count);

// out[i] = float(x[i]) / bf16(x[i]): exact / round to nearest even (NaN stays NaN).
void widen_bf16(const uint16_t* x, int64_t count, float* out);
void round_to_bf16(const float* x, int64_t count, uint16_t* out);

// The reference variant's functions: one contiguous range on the calling thread.
namespace ref {
void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind, float* out);
void rms_norm_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                   uint16_t* out);
void head_norm_rotary(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight, float eps,
                      NormKind kind, const float* cos, const float* sin);
void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin);
void silu_gate(const float* gate, const float* up, int64_t count, float* out);
void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);
void relu_squared(float* x, int64_t count);
void relu_squared_bf16(uint16_t* x, int64_t count);
void add(float* residual, const float* y, int64_t count);
void add_bf16(float* residual, const uint16_t* y, int64_t count);
void widen_bf16(const uint16_t* x, int64_t count, float* out);
void round_bf16(const float* x, int64_t count, uint16_t* out);
// x[i] = SiLU(x[i]) = x / (1 + exp(-x)), in place (the small timestep MLP).
void silu(float* x, int64_t count);
}  // namespace ref

}  // namespace kernels
}  // namespace stepmix
