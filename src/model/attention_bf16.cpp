#include "model/attention_bf16.hpp"

#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/linear_kernels.hpp"
#include "model/attention.hpp"
#include "model/pointwise.hpp"

namespace stepmix {
namespace {

struct Widened {
  std::vector<float> q, k, v, out;
};

// Float32 copies of the operands (the twin and the portable path share them).
Widened widen_operands(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v) {
  const int64_t D = p.head_dim;
  Widened w;
  w.q.resize(std::size_t(p.q_rows * p.q_heads * D));
  w.k.resize(std::size_t(p.kv_rows * p.kv_heads * D));
  w.v.resize(w.k.size());
  w.out.resize(w.q.size());
  widen_bf16(q, int64_t(w.q.size()), w.q.data());
  widen_bf16(k, int64_t(w.k.size()), w.k.data());
  widen_bf16(v, int64_t(w.v.size()), w.v.data());
  return w;
}

}  // namespace

void attention_bf16_reference(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                              uint16_t* out) {
  check_attention_problem(p);
  Widened w = widen_operands(p, q, k, v);
  attention_reference(p, w.q.data(), w.k.data(), w.v.data(), w.out.data());
  round_to_bf16(w.out.data(), int64_t(w.out.size()), out);
}

void attention_bf16_portable(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                             uint16_t* out) {
  check_attention_problem(p);
  Widened w = widen_operands(p, q, k, v);
  attention_blocked(p, w.q.data(), w.k.data(), w.v.data(), w.out.data());
  round_to_bf16(w.out.data(), int64_t(w.out.size()), out);
}

bool attention_bf16_avx512_supported(const AttentionProblem& p) {
  return cpu_features().can_run_avx512_bf16() && p.head_dim % 64 == 0 && p.head_dim <= 256;
}

void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out) {
  static const bool reference_kernels = std::string(kernels::active_kernels().name) == "ref";
  if (!reference_kernels && attention_bf16_avx512_supported(p))
    attention_bf16_avx512(p, q, k, v, out);
  else
    attention_bf16_portable(p, q, k, v, out);
}

}  // namespace stepmix
