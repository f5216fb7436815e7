// The CUDA backend (built with STEPMIX_CUDA; cuda_stub.cpp otherwise): device
// memory, one stream, and the kernels of src/kernels/cuda/ behind the Backend
// seam, so that the one transformer forward (model/forward_pass.cpp) runs on
// a Hopper GPU unchanged.
//
// Activations are bf16 only: the float32-activation operations refuse with
// kF32ActivationsAreCpuOnly (the CUDA kernels have no float32 GEMM, attention
// or norm outputs; the float32 path exists to match float32 references on the
// CPU). The one float32 product is the timestep MLP's, a few rows
// (linear_rows_f32), as on the CPU whatever the activation dtype.
// Everything is queued on one non-blocking stream in program order; host
// copies wait for it, so a forward's results are ready when download()
// returns. One forward at a time per process: the scratch of the
// Linears (activation codes, the transient decoded weight) and the cuBLASLt
// plans are shared by every model on the backend.
//
// Linears run from a device copy of their weights made on first use and
// freed with the Linear (Linear::backend_state):
//   dense    bf16 weight (a float32 weight is refused), bias as stored;
//   FP8      the E4M3 codes, 1 byte per parameter, and {input_scale,
//            weight_scale} as two device floats; with WeightCache::All also
//            Ŵ = bf16(decode(code)·weight_scale), decoded once on the device;
//   W8A8     x quantized to E4M3 with the Linear's input_scale (the CUDA
//            quantizer, bit-exact with the CPU's), siblings with bitwise-equal
//            input_scale and no code hook reading the same codes (as
//            Linear::forward_sharing_input), then cuBLASLt's FP8 GEMM with the
//            scales read from device memory and bf16 output;
//   W8A16    Ŵ decoded into one transient buffer per call (no whole bf16 copy)
//            then cuBLASLt's BF16 GEMM, or the cached Ŵ: the same bits.
// Code hooks (forced-code tests) and input observers (calibration) see host
// copies of the codes / inputs, as on the CPU.
#include <cstring>

#include "backend/backend.hpp"
#include "backend/cuda_buffers.hpp"
#include "core/dtype.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "quant/linear.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using kernels::BiasType;

[[noreturn]] void refuse_f32() { throw Error("cuda", kF32ActivationsAreCpuOnly); }

[[noreturn]] void fail(const Linear& l, const std::string& message) {
  throw Error("cuda", "linear '" + l.name() + "': " + message);
}

// cuBLASLt's FP8 GEMM: K a multiple of 16 and N of 8.
void require_fp8_gemm_shape(const Linear& l) {
  const int64_t N = l.out_features(), K = l.in_features();
  if (K % 16 != 0 || N % 8 != 0)
    fail(l, "W8A8 on FP8 tensor cores needs in_features % 16 == 0 and out_features % 8 == 0, got [" +
                std::to_string(N) + ", " + std::to_string(K) + "]");
}

class DeviceMemory final : public BackendBuffer {
 public:
  explicit DeviceMemory(std::size_t bytes) : buffer_(bytes) {}
  void* data() const override { return buffer_.data(); }
  std::size_t bytes() const override { return buffer_.bytes(); }

 private:
  cuda::DeviceBuffer buffer_;
};

// A Linear's weights on the device.
struct LinearOnDevice final : LinearBackendState {
  cuda::DeviceBuffer weight;   // [out, in]: E4M3 codes (FP8) or bf16
  cuda::DeviceBuffer decoded;  // [out, in] bf16 Ŵ: FP8 layers with WeightCache::All
  cuda::DeviceBuffer bias;     // [out] bf16 or float32, as stored
  cuda::DeviceBuffer scales;   // FP8: {input_scale, weight_scale}
  cuda::GemmBias gemm_bias;

  const float* input_scale() const { return scales.as<float>(); }
  const float* weight_scale() const { return scales.as<float>() + 1; }
};

using cuda_buffers::grown;
using cuda_buffers::uploaded;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const cuda::DeviceInfo& info) : info_(cuda::require_device(info.device)) {}

  Device device() const override { return Device::Cuda; }
  std::string describe() const override {
    return "cuda (" + info_.name + ", compute capability " + std::to_string(info_.compute_major) + "." +
           std::to_string(info_.compute_minor) + ", " + cuda::format_bytes(info_.total_memory) + "; " +
           cuda::build_info() + ")";
  }

  // ---- memory
  std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) override { return std::make_unique<DeviceMemory>(bytes); }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    cuda::copy_to_device(dst, host, bytes, stream());
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    cuda::copy_to_host(host, src, bytes, stream());
  }
  void copy(void* dst, const void* src, std::size_t bytes) override { cuda::copy_device(dst, src, bytes, stream()); }
  void wait() override { stream_.synchronize(); }

  const float* resident(const std::vector<float>& host) override {
    return resident_.get(host.data(), host.size(), stream());
  }

  std::size_t memory_held() const override { return cuda::allocated_bytes(); }
  std::size_t memory_peak() const override { return cuda::peak_allocated_bytes(); }
  void reset_memory_peak() override { cuda::reset_peak_allocated_bytes(); }
  std::optional<std::size_t> memory_free() const override { return cuda::device_memory().free_bytes; }
  void require_memory(const DeviceMemoryEstimate& e, const std::string& what) override {
    const MemoryNeed need = *memory_need(e);
    if (need.fits()) return;
    const std::size_t held = memory_held();
    const cuda::MemoryInfo memory = cuda::device_memory();
    throw Error("cuda", cuda::memory_shortfall_message(
                            need.needed, memory,
                            what + " (weights " + cuda::format_bytes(e.weights) + " + understanding K/V " +
                                cuda::format_bytes(e.understanding_kv) + " + scratch " +
                                cuda::format_bytes(e.scratch) + ", " + cuda::format_bytes(held) + " held already)"));
  }
  void require_runnable(const Linear& l, Precision precision) const override {
    if (precision == Precision::W8A8 && l.is_fp8()) require_fp8_gemm_shape(l);
  }

  // ---- Linears
  int linear(std::span<const Linear* const>, const float*, int64_t, std::span<float* const>, Precision) override {
    refuse_f32();
  }
  int linear(std::span<const Linear* const> linears, const uint16_t* x, int64_t M, std::span<uint16_t* const> ys,
             Precision precision) override;

  void timestep_mlp(const Linear& first, const Linear& second, const float* sinusoid, int64_t U, float* hidden,
                    float* embedding) override {
    linear_rows_f32(first, sinusoid, U, hidden);
    cuda::silu_f32(hidden, U * first.out_features(), stream());
    linear_rows_f32(second, hidden, U, embedding);
  }

  // ---- attention
  void attention(const AttentionProblem&, const float*, const float*, const float*, float*) override { refuse_f32(); }
  void attention(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                 uint16_t* out) override {
    cuda::attention_bf16(p, q, k, v, out, stream());
  }

  // ---- pointwise
  void rms_norm(const float*, int64_t, int64_t, const float*, float, NormKind, float*) override { refuse_f32(); }
  void rms_norm(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                uint16_t* out) override {
    cuda::rms_norm_to_bf16(x, rows, n, weight, eps, kind, out, stream());
  }
  void head_norm_rotary(float*, int64_t, int64_t, int64_t, const float*, float, NormKind, const float*,
                        const float*) override {
    refuse_f32();
  }
  void head_norm_rotary(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                        float eps, NormKind kind, const float* cos, const float* sin) override {
    cuda::head_norm_rotary_bf16(x, rows, heads, head_dim, norm_weight, eps, kind, cos, sin, stream());
  }
  void silu_gate(const float*, const float*, int64_t, float*) override { refuse_f32(); }
  void silu_gate(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) override {
    cuda::silu_gate_bf16(gate, up, count, out, stream());
  }
  void relu_squared(float*, int64_t) override { refuse_f32(); }
  void relu_squared(uint16_t* x, int64_t count) override { cuda::relu_squared_bf16(x, count, stream()); }
  void add_to_residual(float*, const float*, int64_t) override { refuse_f32(); }
  void add_to_residual(float* residual, const uint16_t* y, int64_t count) override {
    cuda::add_bf16_to_f32(residual, y, count, stream());
  }
  void add_row(float* x, int64_t rows, int64_t n, const float* row) override {
    cuda::add_row_f32(x, rows, n, row, stream());
  }
  void widen_bf16(const uint16_t* x, int64_t count, float* out) override {
    cuda::widen_bf16(x, count, out, stream());
  }
  void round_to_bf16(const float* x, int64_t count, uint16_t* out) override {
    cuda::round_to_bf16(x, count, out, stream());
  }

  // ---- the denoising loop
  void patchify(const float* latent, const PatchGrid& grid, float* patches) override {
    cuda::patchify(latent, grid, patches, stream());
  }
  void unpatchify(const float* patches, const PatchGrid& grid, std::span<const int64_t> noisy_frames,
                  float* out) override {
    cuda::unpatchify(patches, grid, noisy_frames.data(), int64_t(noisy_frames.size()), out, stream());
  }
  void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance,
                   float* guided) override {
    cuda::cfg_combine(v_uncond, v_cond, count, guidance, guided, stream());
  }
  bool all_finite(const float* x, int64_t count) override {
    uint32_t* flag = grown<uint32_t>(flag_, 1);
    cuda::fill_zero(flag, sizeof(uint32_t), stream());
    cuda::flag_non_finite_f32(x, count, flag, stream());
    uint32_t host = 0;
    download(&host, flag, sizeof host);
    return host == 0;
  }
  void scheduler_step(const sched::LatentStep& step, int64_t count, float* x, const float* v,
                      const sched::LatentHistory& h) override {
    if (step.kind == sched::LatentStep::Kind::Euler) {
      cuda::euler_step(x, v, count, step.euler_dt, stream());
    } else {
      cuda::unipc_step_f32(step.unipc, count, x, v, h.x0_prev2, h.x0_prev, h.x0_now, h.last_sample, stream());
    }
  }

 private:

  cuda::StreamHandle stream() const { return stream_.get(); }
  // f32_weight: the caller takes float32 weights too (linear_rows_f32).
  const LinearOnDevice& on_device(const Linear& l, bool f32_weight = false);
  void linear_rows_f32(const Linear& l, const float* x, int64_t M, float* y);
  void observe_inputs(std::span<const Linear* const> linears, const uint16_t* x, int64_t M);
  void run_code_hook(const Linear& l, uint8_t* codes, int64_t M);
  void w8a8(const Linear& l, const LinearOnDevice& d, const uint8_t* codes, int64_t M, uint16_t* y);

  cuda::DeviceInfo info_;
  cuda::Stream stream_;
  cuda::GemmRunner runner_;
  cuda_buffers::ResidentConstants resident_;
  cuda::DeviceBuffer codes_;    // [M, in] E4M3 activation codes of the current W8A8 group
  cuda::DeviceBuffer decoded_;  // [out, in] bf16 Ŵ of the current uncached W8A16 Linear
  cuda::DeviceBuffer flag_;     // all_finite's answer
  std::vector<uint8_t> host_codes_;
};

const LinearOnDevice& CudaBackend::on_device(const Linear& l, bool f32_weight) {
  const TensorView& w = l.weight();
  if (w.dtype != DType::F8_E4M3 && w.dtype != DType::BF16 && !(f32_weight && w.dtype == DType::F32))
    fail(l, std::string("the CUDA backend runs BF16 and F8_E4M3 weights here, not ") +
                std::string(dtype_name(w.dtype)));
  std::shared_ptr<LinearBackendState>& state = l.backend_state();
  if (state) {
    if (const auto* d = dynamic_cast<const LinearOnDevice*>(state.get())) return *d;
  }
  auto d = std::make_shared<LinearOnDevice>();
  d->weight = uploaded(w.data, w.nbytes, stream());
  if (const auto& bias = l.bias()) {
    d->bias = uploaded(bias->data, bias->nbytes, stream());
    d->gemm_bias = {bias->dtype == DType::F32 ? BiasType::F32 : BiasType::BF16, d->bias.data()};
  }
  if (l.is_fp8()) {
    const float scales[2] = {l.input_scale(), l.weight_scale()};
    d->scales = uploaded(scales, sizeof scales, stream());
    if (l.weight_cache() == WeightCache::All) {
      const int64_t count = l.out_features() * l.in_features();
      d->decoded = cuda::DeviceBuffer(std::size_t(count) * sizeof(uint16_t));
      cuda::dequantize_e4m3_to_bf16(d->weight.as<uint8_t>(), count, l.w8a16_bf16_scale(), d->decoded.as<uint16_t>(),
                                    stream());
    }
  }
  state = d;
  return *d;
}

// The timestep MLP's dense float32 product, with Linear::forward's checks
// and input observer.
void CudaBackend::linear_rows_f32(const Linear& l, const float* x, int64_t M, float* y) {
  l.check_precision(Precision::BF16);  // dense only: an FP8 layer needs W8A16 or W8A8
  if (M < 0) fail(l, "negative row count " + std::to_string(M));
  if (l.input_observer() && M > 0) {
    std::vector<float> host(std::size_t(M * l.in_features()));
    download(host.data(), x, host.size() * sizeof(float));
    l.input_observer()(l.name(), host.data(), nullptr, M, l.in_features());
  }
  const LinearOnDevice& d = on_device(l, true);
  cuda::linear_rows_f32(x, d.weight.data(), l.weight().dtype == DType::BF16, M, l.out_features(), l.in_features(),
                        d.gemm_bias, y, stream());
}

void CudaBackend::observe_inputs(std::span<const Linear* const> linears, const uint16_t* x, int64_t M) {
  std::vector<uint16_t> host;
  for (const Linear* l : linears) {
    if (!l->input_observer() || M == 0) continue;
    if (host.empty()) {
      host.resize(std::size_t(M * l->in_features()));
      download(host.data(), x, host.size() * sizeof(uint16_t));
    }
    l->input_observer()(l->name(), nullptr, host.data(), M, l->in_features());
  }
}

void CudaBackend::run_code_hook(const Linear& l, uint8_t* codes, int64_t M) {
  const int64_t K = l.in_features();
  host_codes_.resize(std::size_t(M * K));
  download(host_codes_.data(), codes, host_codes_.size());
  l.code_hook()(l.name(), host_codes_.data(), M, K);
  upload(codes, host_codes_.data(), host_codes_.size());
}

void CudaBackend::w8a8(const Linear& l, const LinearOnDevice& d, const uint8_t* codes, int64_t M, uint16_t* y) {
  const int64_t N = l.out_features(), K = l.in_features();
  require_fp8_gemm_shape(l);
  cuda::gemm_w8a8(runner_, codes, d.weight.as<uint8_t>(), M, N, K, d.input_scale(), d.weight_scale(), d.gemm_bias, y,
                  stream());
}

int CudaBackend::linear(std::span<const Linear* const> linears, const uint16_t* x, int64_t M,
                        std::span<uint16_t* const> ys, Precision precision) {
  // The checks of Linear::forward_sharing_input, so both backends refuse alike.
  if (linears.size() != ys.size() || linears.empty() || linears.size() > 64)
    throw Error("linear", "forward_sharing_input: " + std::to_string(linears.size()) + " linears and " +
                              std::to_string(ys.size()) + " outputs (expected 1 to 64 of each, as many outputs)");
  for (std::size_t i = 0; i < linears.size(); ++i) {
    const Linear* l = linears[i];
    if (!l) throw Error("linear", "forward_sharing_input: null linear");
    if (l->in_features() != linears[0]->in_features())
      throw Error("linear", "'" + l->name() + "': in_features " + std::to_string(l->in_features()) +
                                " differs from '" + linears[0]->name() + "' in a shared-input group");
    l->check_precision(precision);
    if (M < 0) throw Error("linear", "'" + l->name() + "': negative row count " + std::to_string(M));
    if (M > 0 && (!x || !ys[i])) throw Error("linear", "'" + l->name() + "': null activation or output pointer");
  }
  observe_inputs(linears, x, M);
  if (M == 0) return 0;

  const auto shares_codes = [](const Linear& a, const Linear& b) {
    const float sa = a.input_scale(), sb = b.input_scale();
    return a.is_fp8() && b.is_fp8() && !a.code_hook() && !b.code_hook() && std::memcmp(&sa, &sb, sizeof sa) == 0;
  };
  uint64_t done = 0;  // bit i: linears[i] has run
  int quantizations = 0;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (done >> i & 1) continue;
    const Linear& lead = *linears[i];
    const LinearOnDevice& d = on_device(lead);
    const int64_t N = lead.out_features(), K = lead.in_features();
    if (!lead.is_fp8()) {
      cuda::gemm_bf16(runner_, x, d.weight.as<uint16_t>(), M, N, K, d.gemm_bias, ys[i], stream());
      continue;
    }
    if (precision == Precision::W8A16) {
      if (d.decoded.data()) {
        cuda::gemm_bf16(runner_, x, d.decoded.as<uint16_t>(), M, N, K, d.gemm_bias, ys[i], stream());
      } else {
        cuda::gemm_w8a16(runner_, x, d.weight.as<uint8_t>(), lead.w8a16_bf16_scale(), M, N, K, d.gemm_bias,
                         grown<uint16_t>(decoded_, N * K), ys[i], stream());
      }
      continue;
    }
    // W8A8: this group's codes, read by every sibling that shares them (the
    // stream runs the group's GEMMs before the next quantization overwrites them).
    uint8_t* codes = grown<uint8_t>(codes_, M * K);
    cuda::quantize_e4m3_bf16(x, M * K, lead.input_scale(), codes, stream());
    ++quantizations;
    if (lead.code_hook()) run_code_hook(lead, codes, M);
    w8a8(lead, d, codes, M, ys[i]);
    for (std::size_t j = i + 1; j < linears.size(); ++j) {
      if ((done >> j & 1) || !shares_codes(lead, *linears[j])) continue;
      w8a8(*linears[j], on_device(*linears[j]), codes, M, ys[j]);
      done |= uint64_t{1} << j;
    }
  }
  return quantizations;
}

}  // namespace

// Probes the GPU once. Made once and never destroyed: its stream, cuBLASLt
// handle and buffers would otherwise be torn down after the CUDA runtime
// itself at exit.
Backend& cuda_backend() {
  static const cuda::DeviceInfo info = cuda::probe_device(0);
  if (!info.usable) throw Error("cuda", "--device cuda: " + info.reason);
  static CudaBackend* backend = new CudaBackend(info);
  return *backend;
}

}  // namespace stepmix
