// The seam between the transformer (the VAE has its own, vae_device.hpp) and the machine
// they run on: memory the operations read and write, and the operations of a
// decoder layer (Linears, attention, pointwise). The model code is written
// once against this interface; each backend implements it:
//   CpuBackend  (cpu_backend.cpp)  host memory, the kernel layer's active
//                                  variants (src/kernels/kernel_set.hpp);
//   CUDA        (cuda_backend.cpp, built with STEPMIX_CUDA; cuda_stub.cpp
//                otherwise, which says "built without CUDA").
//
// Pointers handed to the operations point into backend memory (buffers from
// allocate() or resident constants); host data crosses with upload() and
// download(). The denoising loop's own arithmetic (patchify, CFG, the
// scheduler update) is here too, so that a backend keeps the latent in its
// memory for the whole loop. Activations are float32 or bf16 (uint16_t bits): each operation
// comes in both, with the semantics of src/kernels/ (attention.hpp,
// pointwise.hpp, linear_kernels.hpp). The residual stream is always float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/vision_tokens.hpp"
#include "kernels/attention.hpp"
#include "kernels/pointwise.hpp"
#include "sched/latent_step.hpp"
#include "stepmix/policy.hpp"
#include "stepmix/runtime.hpp"

namespace stepmix {

class Linear;

// Backend memory a run needs in all, for the up-front check of a backend
// with memory of its own (model/memory_estimate.hpp makes it).
struct DeviceMemoryEstimate {
  std::size_t weights = 0;           // device copies of the Linears and norm weights
  std::size_t understanding_kv = 0;  // the cached K/V of every prompt
  std::size_t scratch = 0;           // forward workspace, activation codes, decoded weights, GEMM workspace
  std::size_t total() const { return weights + understanding_kv + scratch; }
};

// The one line a CUDA run with float32 activations gets.
inline constexpr const char* kF32ActivationsAreCpuOnly =
    "--activations f32 is CPU-only; use --activations bf16 with --device cuda";

// A block of backend memory, freed with the object.
class BackendBuffer {
 public:
  virtual ~BackendBuffer() = default;
  // Backend memory: dereference it only through the backend's operations.
  virtual void* data() const = 0;
  virtual std::size_t bytes() const = 0;

  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // "cpu (kernels: amx)": for logs and bench reports.
  virtual std::string describe() const = 0;

  // ---- memory
  virtual std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) = 0;
  virtual void upload(void* dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // Returns once the operations queued so far have completed. The CPU's are
  // complete when their calls return; a GPU backend queues them on its
  // stream. Only a profiler needs it: the backend's copies to the host
  // already wait for what came before them.
  virtual void wait() {}
  // A small float32 host constant (norm weights) as the operations read it.
  // The host vector must outlive the backend's use of it (the model's
  // weights); the CPU returns host.data().
  virtual const float* resident(const std::vector<float>& host) = 0;

  // ---- memory of the backend's own (the CPU reports none and checks nothing)
  // Bytes its buffers hold now, and the most they held at once since
  // reset_memory_peak().
  virtual std::size_t memory_held() const { return 0; }
  virtual std::size_t memory_peak() const { return 0; }
  virtual void reset_memory_peak() {}
  // Bytes free for new buffers now; nothing for a backend without memory of
  // its own.
  virtual std::optional<std::size_t> memory_free() const { return std::nullopt; }
  // What a run of `estimate` needs beyond what is held already, against what
  // is free; nothing for a backend without memory of its own (the CPU).
  struct MemoryNeed {
    std::size_t needed = 0, free = 0;
    bool fits() const { return needed <= free; }
  };
  std::optional<MemoryNeed> memory_need(const DeviceMemoryEstimate& estimate) const {
    const std::optional<std::size_t> free = memory_free();
    if (!free) return std::nullopt;
    const std::size_t held = memory_held();
    return MemoryNeed{estimate.total() > held ? estimate.total() - held : 0, *free};
  }
  // Refuses up front, with stepmix::Error naming `what`, the estimate and
  // what is free, a run that would not fit beside what is held already.
  virtual void require_memory(const DeviceMemoryEstimate& estimate, const std::string& what) {}
  // Refuses up front, with stepmix::Error naming it, a Linear this backend
  // cannot run at `precision` (the CPU runs every shape), so that a run fails
  // before its first step rather than at the first step of that precision.
  virtual void require_runnable(const Linear& linear, Precision precision) const {}

  // ---- Linears: ys[i] = linears[i](x), x [M, in] → ys[i] [M, out_i], at the
  // step precision (Linear::forward_sharing_input: siblings reading the same
  // x quantize it once in W8A8 when their input_scale agree). Returns how many
  // times x was quantized.
  virtual int linear(std::span<const Linear* const> linears, const float* x, int64_t M, std::span<float* const> ys,
                     Precision precision) = 0;
  virtual int linear(std::span<const Linear* const> linears, const uint16_t* x, int64_t M,
                     std::span<uint16_t* const> ys, Precision precision) = 0;

  // ---- the timestep embedding MLP (model/embedding.hpp), float32 whatever
  // the activation dtype: embedding [U, E] = second(SiLU(first(sinusoid
  // [U, 256]))), hidden [U, E] its scratch, all in backend memory. Both
  // Linears dense (BF16 or float32 weights), as Linear::forward on float32
  // rows: the CPU runs exactly that and kernels::ref::silu; a GPU agrees
  // within float32 rounding of the sums.
  virtual void timestep_mlp(const Linear& first, const Linear& second, const float* sinusoid, int64_t U,
                            float* hidden, float* embedding) = 0;

  // ---- attention (kernels/attention.hpp layouts)
  virtual void attention(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) = 0;
  virtual void attention(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         uint16_t* out) = 0;

  // ---- pointwise (kernels/pointwise.hpp)
  virtual void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                        float* out) = 0;
  virtual void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                        uint16_t* out) = 0;
  virtual void head_norm_rotary(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                                float eps, NormKind kind, const float* cos, const float* sin) = 0;
  virtual void head_norm_rotary(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                                const float* norm_weight, float eps, NormKind kind, const float* cos,
                                const float* sin) = 0;
  virtual void silu_gate(const float* gate, const float* up, int64_t count, float* out) = 0;
  virtual void silu_gate(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) = 0;
  virtual void relu_squared(float* x, int64_t count) = 0;
  virtual void relu_squared(uint16_t* x, int64_t count) = 0;
  virtual void add_to_residual(float* residual, const float* y, int64_t count) = 0;
  virtual void add_to_residual(float* residual, const uint16_t* y, int64_t count) = 0;
  // x[r, :] += row[:] for r in [0, rows): a per-frame embedding on its tokens.
  virtual void add_row(float* x, int64_t rows, int64_t n, const float* row) = 0;
  virtual void widen_bf16(const uint16_t* x, int64_t count, float* out) = 0;
  virtual void round_to_bf16(const float* x, int64_t count, uint16_t* out) = 0;

  // ---- the denoising loop on a latent in backend memory, float32, with the
  // host loop's arithmetic bit for bit (core/vision_tokens.hpp,
  // pipeline/denoise.cpp, sched/latent_step.hpp)
  virtual void patchify(const float* latent, const PatchGrid& grid, float* patches) = 0;
  // noisy_frames: host memory.
  virtual void unpatchify(const float* patches, const PatchGrid& grid, std::span<const int64_t> noisy_frames,
                          float* out) = 0;
  // guided[i] = v_uncond[i] + g·(v_cond[i] − v_uncond[i]).
  virtual void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance,
                           float* guided) = 0;
  // False when any of x [count] is NaN or ±inf (core/non_finite.hpp).
  virtual bool all_finite(const float* x, int64_t count) = 0;
  // x [count] ← the scheduler's step from v; UniPC reads and writes `history`.
  virtual void scheduler_step(const sched::LatentStep& step, int64_t count, float* x, const float* v,
                              const sched::LatentHistory& history) = 0;
};

// The CPU backend (one per process is enough: it holds no model state).
Backend& cpu_backend();
// The backend of `device`; throws stepmix::Error naming what is missing
// (a build without CUDA, no driver, no GPU).
Backend& backend_for(Device device);
// The same, refusing what the backend cannot run: float32 activations on CUDA
// (kF32ActivationsAreCpuOnly).
Backend& backend_for(Device device, ActivationDType activations);
// Set by the CUDA build (cuda_backend.cpp) or the stub (cuda_stub.cpp).
Backend& cuda_backend();

}  // namespace stepmix
