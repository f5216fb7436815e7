// Attention entry points: the active variant's (kernel_set.hpp).
#include "kernels/attention.hpp"

#include "kernels/kernel_set.hpp"

namespace stepmix::kernels {

void attention(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) {
  active_kernels().attention.f32(p, q, k, v, out);
}

void attention(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out) {
  active_kernels().attention.bf16(p, q, k, v, out);
}

}  // namespace stepmix::kernels
