// A scheduler step for a caller that holds the latent in its own memory (the
// CUDA backend keeps the whole denoising loop on the GPU): the scheduler
// computes the step's float32 coefficients on the host and advances its own
// counters (Scheduler::begin_latent_step); the caller applies the
// elementwise update to its buffers. apply_latent_step is that update on the
// host, the very loops the schedulers' own step() runs in their fp32
// arithmetic, so a device twin can be tested against it bit for bit.
#pragma once

#include <cstddef>
#include <utility>

namespace stepmix::sched {

// UniPC (bh2, x0 form) at step k, as unipc.cpp derives it:
//   1. m_k = x_k − σ_k·v_k
//   2. corrector (k ≥ 1) from x̃_{k−1}: x̃_k = base(c_ratio, x̃_{k−1}, c_m, m_{k−1}) − c_d·inner,
//      inner = ½·(m_k − m_{k−1}) (order 1) or ρ1·(m_{k−2} − m_{k−1})/r + ρ2·(m_k − m_{k−1}) (order 2)
//   3. x̃_k is remembered for the next corrector
//   4. predictor: x_{k+1} = m_k (the final step), base(p_ratio, x̃_k, p_m, m_k) (order 1), or
//      that − p_d·(½·(m_{k−1} − m_k)/p_r) (order 2)
// with base(a, x, b, m) = a·x − b·m; every operation rounded to float32.
struct UniPCStep {
  float sigma = 0;
  int corrector_order = 0;  // 0: no corrector (k = 0)
  float c_ratio = 0, c_m = 0, c_d = 0, c_r = 0, c_rho1 = 0, c_rho2 = 0;
  int predictor_order = 0;  // 0: the final step
  float p_ratio = 0, p_m = 0, p_d = 0, p_r = 0;
};

struct LatentStep {
  enum class Kind { Euler, UniPC } kind = Kind::Euler;
  float euler_dt = 0;  // Euler: x += dt·v, dt = σ_{k+1} − σ_k in float32
  UniPCStep unipc;
};

// UniPC's history, each buffer as long as the latent: x0_prev2 = m_{k−2},
// x0_prev = m_{k−1}, x0_now receives m_k, last_sample = x̃_{k−1} (then x̃_k).
// After each step, advance() renames them for the next (no copy).
struct LatentHistory {
  float* x0_prev2 = nullptr;
  float* x0_prev = nullptr;
  float* x0_now = nullptr;
  float* last_sample = nullptr;

  void advance() {
    std::swap(x0_prev2, x0_prev);
    std::swap(x0_prev, x0_now);
  }
};

// The step on host memory: x [n] updated in place from v [n]; UniPC reads
// and writes `history` (Euler ignores it). The caller advances the history.
void apply_latent_step(const LatentStep& step, std::size_t n, float* x, const float* v, const LatentHistory& history);

}  // namespace stepmix::sched
