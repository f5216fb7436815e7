// The CPU backend: host memory and the kernel layer's active variants.
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/backend.hpp"
#include "backend/vae_device.hpp"
#include "core/non_finite.hpp"
#include "core/parallel.hpp"
#include "kernels/kernel_set.hpp"
#include "quant/linear.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

// 64-byte aligned host memory (one cache line, one AVX-512 vector).
class HostBuffer final : public BackendBuffer {
 public:
  explicit HostBuffer(std::size_t bytes)
      : bytes_(bytes), data_(bytes ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr) {
    if (bytes && !data_) throw std::bad_alloc();
  }
  ~HostBuffer() override { std::free(data_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() const override { return data_; }
  std::size_t bytes() const override { return bytes_; }

 private:
  std::size_t bytes_;
  void* data_;
};

template <class T>
int linear_on_host(std::span<const Linear* const> linears, const T* x, int64_t M, std::span<T* const> ys,
                   Precision precision) {
  if (linears.size() == 1) {
    linears[0]->forward(x, M, ys[0], precision);
    return precision == Precision::W8A8 && linears[0]->is_fp8() ? 1 : 0;
  }
  return Linear::forward_sharing_input(linears, x, M, ys, precision);
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::Cpu; }
  std::string describe() const override { return "cpu (kernels: " + kernels::active_kernels().describe() + ")"; }

  std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) override { return std::make_unique<HostBuffer>(bytes); }
  void upload(void* dst, const void* host, std::size_t bytes) override { copy(dst, host, bytes); }
  void download(void* host, const void* src, std::size_t bytes) override { copy(host, src, bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  const float* resident(const std::vector<float>& host) override { return host.data(); }

  int linear(std::span<const Linear* const> linears, const float* x, int64_t M, std::span<float* const> ys,
             Precision precision) override {
    return linear_on_host(linears, x, M, ys, precision);
  }
  int linear(std::span<const Linear* const> linears, const uint16_t* x, int64_t M, std::span<uint16_t* const> ys,
             Precision precision) override {
    return linear_on_host(linears, x, M, ys, precision);
  }

  void timestep_mlp(const Linear& first, const Linear& second, const float* sinusoid, int64_t U, float* hidden,
                    float* embedding) override {
    first.forward(sinusoid, U, hidden, Precision::BF16);
    kernels::ref::silu(hidden, U * first.out_features());
    second.forward(hidden, U, embedding, Precision::BF16);
  }

  void attention(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) override {
    kernels::attention(p, q, k, v, out);
  }
  void attention(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                 uint16_t* out) override {
    kernels::attention(p, q, k, v, out);
  }

  void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                float* out) override {
    kernels::rms_norm(x, rows, n, weight, eps, kind, out);
  }
  void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                uint16_t* out) override {
    kernels::rms_norm(x, rows, n, weight, eps, kind, out);
  }
  void head_norm_rotary(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight, float eps,
                        NormKind kind, const float* cos, const float* sin) override {
    kernels::head_norm_rotary(x, rows, heads, head_dim, norm_weight, eps, kind, cos, sin);
  }
  void head_norm_rotary(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                        float eps, NormKind kind, const float* cos, const float* sin) override {
    kernels::head_norm_rotary(x, rows, heads, head_dim, norm_weight, eps, kind, cos, sin);
  }
  void silu_gate(const float* gate, const float* up, int64_t count, float* out) override {
    kernels::silu_gate(gate, up, count, out);
  }
  void silu_gate(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) override {
    kernels::silu_gate(gate, up, count, out);
  }
  void relu_squared(float* x, int64_t count) override { kernels::relu_squared(x, count); }
  void relu_squared(uint16_t* x, int64_t count) override { kernels::relu_squared(x, count); }
  void add_to_residual(float* residual, const float* y, int64_t count) override {
    kernels::add_to_residual(residual, y, count);
  }
  void add_to_residual(float* residual, const uint16_t* y, int64_t count) override {
    kernels::add_to_residual(residual, y, count);
  }
  void add_row(float* x, int64_t rows, int64_t n, const float* row) override {
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) kernels::active_kernels().pointwise.add_f32(x + r * n, row, n);
    });
  }
  void widen_bf16(const uint16_t* x, int64_t count, float* out) override { kernels::widen_bf16(x, count, out); }
  void round_to_bf16(const float* x, int64_t count, uint16_t* out) override { kernels::round_to_bf16(x, count, out); }

  void patchify(const float* latent, const PatchGrid& grid, float* patches) override {
    patchify_into(latent, grid, patches);
  }
  void unpatchify(const float* patches, const PatchGrid& grid, std::span<const int64_t> noisy_frames,
                  float* out) override {
    unpatchify_into(patches, grid, noisy_frames, out);
  }
  void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance,
                   float* guided) override {
    for (int64_t i = 0; i < count; ++i) guided[i] = v_uncond[i] + guidance * (v_cond[i] - v_uncond[i]);
  }
  bool all_finite(const float* x, int64_t count) override { return !first_non_finite(x, std::size_t(count)); }
  void scheduler_step(const sched::LatentStep& step, int64_t count, float* x, const float* v,
                      const sched::LatentHistory& history) override {
    sched::apply_latent_step(step, std::size_t(count), x, v, history);
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

Backend& backend_for(Device device) { return device == Device::Cuda ? cuda_backend() : cpu_backend(); }

VaeDevice& vae_device_for(Device device) {
  if (device != Device::Cuda) throw Error("vae", "internal: the CPU decodes frames in host memory, not on a VAE device");
  return cuda_vae_device();
}

Backend& backend_for(Device device, ActivationDType activations) {
  Backend& backend = backend_for(device);  // first: a missing GPU is the thing to say
  if (device == Device::Cuda && activations == ActivationDType::F32) throw Error("cuda", kF32ActivationsAreCpuOnly);
  return backend;
}

}  // namespace stepmix
