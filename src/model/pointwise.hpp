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
