// Pointwise entry points: the active variant's kernels (kernel_set.hpp) over
// rows or ranges spread on the global thread pool.
#include "kernels/pointwise.hpp"

#include "core/parallel.hpp"
#include "kernels/kernel_set.hpp"

namespace stepmix::kernels {
namespace {

const PointwiseFamily& family() { return active_kernels().pointwise; }

// fn(begin, end) over element ranges of at least the pool's grain.
template <class Fn>
void over_elements(int64_t count, const Fn& fn) {
  parallel_ranges(count, kParallelGrainElements, fn);
}

}  // namespace

void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind, float* out) {
  parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
    family().rms_norm_f32(x + r0 * n, r1 - r0, n, weight, eps, kind, out + r0 * n);
  });
}

void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind, uint16_t* out) {
  parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
    family().rms_norm_bf16(x + r0 * n, r1 - r0, n, weight, eps, kind, out + r0 * n);
  });
}

void head_norm_rotary(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight, float eps,
                      NormKind kind, const float* cos, const float* sin) {
  parallel_rows(rows, heads * head_dim, [&](int64_t r0, int64_t r1) {
    family().head_norm_rotary_f32(x + r0 * heads * head_dim, r1 - r0, heads, head_dim, norm_weight, eps, kind,
                                  cos + r0 * head_dim, sin + r0 * head_dim);
  });
}

void head_norm_rotary(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                      float eps, NormKind kind, const float* cos, const float* sin) {
  parallel_rows(rows, heads * head_dim, [&](int64_t r0, int64_t r1) {
    family().head_norm_rotary_bf16(x + r0 * heads * head_dim, r1 - r0, heads, head_dim, norm_weight, eps, kind,
                                   cos + r0 * head_dim, sin + r0 * head_dim);
  });
}

void silu_gate(const float* gate, const float* up, int64_t count, float* out) {
  over_elements(count, [&](int64_t b, int64_t e) { family().silu_gate_f32(gate + b, up + b, e - b, out + b); });
}

void silu_gate(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) {
  over_elements(count, [&](int64_t b, int64_t e) { family().silu_gate_bf16(gate + b, up + b, e - b, out + b); });
}

void relu_squared(float* x, int64_t count) {
  over_elements(count, [&](int64_t b, int64_t e) { family().relu_squared_f32(x + b, e - b); });
}

void relu_squared(uint16_t* x, int64_t count) {
  over_elements(count, [&](int64_t b, int64_t e) { family().relu_squared_bf16(x + b, e - b); });
}

void add_to_residual(float* residual, const float* y, int64_t count) {
  over_elements(count, [&](int64_t b, int64_t e) { family().add_f32(residual + b, y + b, e - b); });
}

void add_to_residual(float* residual, const uint16_t* y, int64_t count) {
  over_elements(count, [&](int64_t b, int64_t e) { family().add_bf16(residual + b, y + b, e - b); });
}

void widen_bf16(const uint16_t* x, int64_t count, float* out) {
  over_elements(count, [&](int64_t b, int64_t e) { family().widen_bf16(x + b, e - b, out + b); });
}

void round_to_bf16(const float* x, int64_t count, uint16_t* out) {
  over_elements(count, [&](int64_t b, int64_t e) { family().round_bf16(x + b, e - b, out + b); });
}

}  // namespace stepmix::kernels
