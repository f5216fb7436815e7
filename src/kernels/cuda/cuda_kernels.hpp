// Host entry points of every CUDA kernel of the backend: plain functions on
// device pointers, sizes and a stream, so that a backend table can hold them
// beside the CPU KernelSet. All pointers are device pointers unless a name
// says otherwise; work is queued on `stream` and the functions return at
// once (errors of a running kernel surface at the next synchronize()).
// Arguments are checked before anything is queued: a bad one throws
// stepmix::Error("cuda", "<function>: ...").
//
// The arithmetic of each kernel is that of its CPU twin, named beside it;
// "bit-exact" means the CUDA result equals the CPU one bit for bit on every
// input (tests/cuda holds the checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_device.hpp"
#include "kernels/linear_kernels.hpp"
#include "core/vision_tokens.hpp"
#include "kernels/attention.hpp"
#include "kernels/pointwise.hpp"
#include "sched/latent_step.hpp"

namespace stepmix::cuda {

// ================================================================ FP8
// codes[i] = quantize_e4m3_saturating(x[i] / input_scale): float32 division,
// clamp to ±448, round to nearest even (core/numerics.hpp). Bit-exact with
// kernels::ref::quantize_e4m3_f32 / _bf16 (bf16 widened exactly first).
void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes, StreamHandle stream);
void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes, StreamHandle stream);
// out[i] = bf16(float32(decode(codes[i]) · weight_scale)), one rounding: the
// W8A16 weight. Bit-exact with kernels::ref::dequantize_e4m3_to_bf16.
void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float weight_scale, uint16_t* out,
                             StreamHandle stream);

// ================================================================ GEMM (cuBLASLt)
// y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]), row-major, as kernels::GemmArgs;
// output bf16, float32 accumulation. Summation order is cuBLASLt's, so the
// results agree with the CPU kernels within float32 rounding of the sums, not
// bit for bit; for one runner, shape and pointer alignment they are the same
// on every call (the cached plan fixes the algorithm).
struct GemmBias {
  kernels::BiasType type = kernels::BiasType::None;
  const void* data = nullptr;  // [N] bf16 or float32
};

// A cuBLASLt handle, its workspace and one plan per (operation, shape,
// alignment), chosen by cuBLASLt's heuristic the first time a shape is seen.
// Not thread-safe: one runner per host thread / stream.
class GemmRunner {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t(32) << 20;
  // A product with a float32 bias runs in row chunks (whole multiples of 16
  // rows, at most 256 MiB of float32 [rows, N]) into a float32 scratch, then
  // adds the bias as it rounds: the scratch bytes M rows of N outputs take.
  static constexpr std::size_t f32_bias_scratch_bytes(int64_t M, int64_t N) {
    constexpr std::size_t kScratchBytes = std::size_t(256) << 20;
    int64_t chunk = int64_t(kScratchBytes / (std::size_t(N) * sizeof(float))) / 16 * 16;
    if (chunk < 16) chunk = 16;
    if (chunk > M) chunk = M;
    return std::size_t(chunk) * std::size_t(N) * sizeof(float);
  }
  explicit GemmRunner(std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~GemmRunner();
  GemmRunner(GemmRunner&&) noexcept;
  GemmRunner& operator=(GemmRunner&&) noexcept;
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // Plans made so far (one per distinct shape and alignment).
  std::size_t cached_plans() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Dense: BF16 × BF16 (a dense checkpoint, or W8A16 after the decode). A bf16
// bias is added in the cuBLASLt epilogue (float32, one rounding to bf16); a
// float32 bias, which that epilogue cannot take with bf16 output, goes
// through a float32 product and a separate bf16(acc + bias) kernel, which is
// the CPU's epilogue exactly.
void gemm_bf16(GemmRunner& runner, const uint16_t* x, const uint16_t* w, int64_t M, int64_t N, int64_t K,
               GemmBias bias, uint16_t* y, StreamHandle stream);

// W8A8: E4M3 activation codes × E4M3 weight codes on FP8 tensor cores, per-
// tensor scales read from device memory (input_scale_device and
// weight_scale_device: one float each), so y = bf16(acc · s_x · s_w + bias).
// Needs K % 16 == 0 and N % 8 == 0 (cuBLASLt's FP8 alignment).
void gemm_w8a8(GemmRunner& runner, const uint8_t* x_codes, const uint8_t* w_codes, int64_t M, int64_t N, int64_t K,
               const float* input_scale_device, const float* weight_scale_device, GemmBias bias, uint16_t* y,
               StreamHandle stream);

// W8A16 without a cached copy: decodes W into `decoded` ([N, K] bf16, a
// transient buffer the caller reuses across layers) with
// dequantize_e4m3_to_bf16, then gemm_bf16. With --weight-cache all the caller
// decodes once at load and calls gemm_bf16 itself; both give the same bits as
// long as the transient buffer and the cached copy are aligned alike (256
// bytes, as cudaMalloc returns): alignment is part of a plan's key.
void gemm_w8a16(GemmRunner& runner, const uint16_t* x, const uint8_t* w_codes, float weight_scale, int64_t M,
                int64_t N, int64_t K, GemmBias bias, uint16_t* decoded, uint16_t* y, StreamHandle stream);

// float32 y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]) for a few rows (the
// timestep MLP, M = distinct timesteps): W bf16 (widened exactly) or float32,
// float32 sums (one warp per output: 32 fused lane sums added pairwise), so
// it agrees with the CPU's dense float32 Linear within float32 rounding of
// the sums. M at most 65 535.
void linear_rows_f32(const float* x, const void* w, bool w_is_bf16, int64_t M, int64_t N, int64_t K, GemmBias bias,
                     float* y, StreamHandle stream);

// ================================================================ attention
// Layouts of kernels/attention.hpp, bf16: q [q_rows, q_heads, D], k and v
// [kv_rows, kv_heads, D], out [q_rows, q_heads, D]; GQA (query head h reads
// KV head h / (q_heads / kv_heads)); scale 1/sqrt(D); causal = query i sees
// keys 0..i. The generation stream passes K/V laid out as [understanding
// rows; generation rows] with causal = false.

enum class FlashVariant {
  Auto,                // what attention_bf16 uses
  Rows16PerWarp,       // 8 warps × 16 query rows, Q kept in registers, 64-key tiles
  Rows32PerWarp,       // 4 warps × 32 query rows, Q re-read from shared memory, 32-key tiles
  Rows32PerWarp64Keys  // the same with 64-key tiles (FlashAttention-2's shape on Hopper)
};
inline constexpr FlashVariant kFlashVariants[] = {FlashVariant::Rows16PerWarp, FlashVariant::Rows32PerWarp,
                                                   FlashVariant::Rows32PerWarp64Keys};
inline const char* flash_variant_name(FlashVariant v) {
  switch (v) {
    case FlashVariant::Rows16PerWarp: return "flash 16 rows/warp";
    case FlashVariant::Rows32PerWarp: return "flash 32 rows/warp";
    case FlashVariant::Rows32PerWarp64Keys: return "flash 32 rows/warp 64 keys";
    case FlashVariant::Auto: break;
  }
  return "flash (auto)";
}

// Flash attention (FlashAttention-2 style, bf16 tensor-core products, float32
// scores and softmax statistics, online softmax, no [q_rows, kv_rows] matrix
// in memory). Like the CPU's AVX-512 kernel it rounds the softmax weights to
// bf16 before the value product, so it agrees with the reference within
// ~2^-8 of max|v|, not bit for bit. Head dims 64 and 128.
bool attention_flash_supported(const AttentionProblem& problem);
void attention_flash_bf16(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                          uint16_t* out, StreamHandle stream, FlashVariant variant = FlashVariant::Auto);
// The plain twin for tests: one thread per (query row, head), the CPU
// reference's arithmetic in its order (attention_reference on widened
// operands, output rounded once). Any head_dim up to 256. Slow.
void attention_reference_bf16(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k,
                              const uint16_t* v, uint16_t* out, StreamHandle stream);
// cuDNN's fused attention (its SDPA forward operation, cuDNN 9.13.1 or
// newer), tested against the reference kernel like the flash kernel.
// Non-causal problems only, head_dim a multiple of 8 up to 256. cuDNN is
// opened with dlopen at the first call (attention_cudnn.cpp); a build without
// cuDNN's headers, a missing or older library, or a shape no engine takes
// throws Error("cuda", "attention_cudnn_bf16: ...") naming the cuDNN call and
// its status. attention_cudnn_available says beforehand whether it can run,
// and why not.
bool attention_cudnn_available(std::string* why = nullptr);
void attention_cudnn_bf16(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                          uint16_t* out, StreamHandle stream);
// Whether attention_bf16 gives `problem` to cuDNN by default: a non-causal
// problem, on a cuDNN of 9.15.1 or newer (the release from which PyTorch's
// SDPA prefers cuDNN's attention on Hopper: older ones mishandled sequence
// lengths that are not a multiple of 128, as the Nano problem's 44,460 keys
// are not), and a shape cuDNN's heuristics give a plan for. The plan is
// made here, on the first ask for a shape, and kept for the process (a run
// has a few shapes: one per prompt length and latent size); a library that
// cannot be opened, a GPU the backend cannot use, and a shape no engine
// takes are remembered, with `why`. Why cuDNN first: its Hopper engines use
// the warpgroup MMA and TMA instructions the flash kernel (mma.sync,
// FlashAttention-2's class) does not, and they are what the peer, PyTorch's
// SDPA, runs there by default; the device check measures both
// (bench/cuda-device-check.sh) and turns the default off for its run when
// cuDNN's fails its spot check.
bool attention_cudnn_preferred(const AttentionProblem& problem, std::string* why = nullptr);

// What attention_bf16 runs, and what may be asked of it:
// STEPMIX_CUDA_ATTENTION (read at each call) is "auto" (or unset: cuDNN's
// attention for a problem the flash kernel would take, where
// attention_cudnn_preferred; else the flash or the reference kernel), "flash"
// (never cuDNN) or "cudnn" (cuDNN for every non-causal problem, its errors
// thrown); another value is an Error naming the variable.
enum class AttentionChoice { Auto, Flash, Cudnn };
AttentionChoice attention_choice();
enum class AttentionEngine { Cudnn, Flash, Reference };
inline const char* attention_engine_name(AttentionEngine engine) {
  return engine == AttentionEngine::Cudnn ? "cudnn" : engine == AttentionEngine::Flash ? "flash" : "reference";
}
// The engine attention_bf16 gives `problem`: cuDNN's as attention_choice()
// says (causal problems never), else the flash kernel when
// attention_flash_supported, else the reference kernel. attention_bf16
// checks the problem and its operands before it asks.
AttentionEngine attention_engine(const AttentionProblem& problem);
void attention_bf16(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out, StreamHandle stream);

// ================================================================ pointwise (bf16 activations)
// The CPU twins are the portable kernels of kernels/ref/pointwise_ref.cpp.
// RMSNorm sums squares in float64 like the CPU, in another order, so a row's
// float32 mean can (rarely) differ by one ulp: results are bit-exact except
// for such rows, which differ by at most one bf16 ulp. SiLU evaluates exp in
// float64 and rounds it to float32: the correctly rounded value, which glibc's
// expf (< 0.502 ulp) misses about once in 1,400 normal inputs, so a float32
// SiLU can differ by two ulps there. Everything else is bit-exact.

// x: [rows, n] float32 → out: [rows, n] bf16(rms_norm(x)).
void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out, StreamHandle stream);
// x: [rows, heads, D] bf16 in place: per-head RMSNorm with weight [D] (none
// when norm_weight is null), rotary with cos/sin [rows, D] (one row per token,
// shared by the heads), one rounding to bf16. D even, at most 256.
void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin, StreamHandle stream);
// out[i] = bf16(SiLU(gate[i]) · up[i]); out may alias gate or up.
void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out, StreamHandle stream);
// x[i] = SiLU(x[i]) = x / (1 + exp(-x)) in float32, in place (the timestep
// MLP): kernels::ref::silu.
void silu_f32(float* x, int64_t count, StreamHandle stream);
// x[i] = bf16(relu(x[i])²), in place.
void relu_squared_bf16(uint16_t* x, int64_t count, StreamHandle stream);
// residual[i] += float(y[i]).
void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count, StreamHandle stream);
// x[r, :] += row[:] for r < rows, x [rows, n] and row [n] float32 (one
// embedding row added to a frame's tokens); bit-exact with the CPU's add_f32.
void add_row_f32(float* x, int64_t rows, int64_t n, const float* row, StreamHandle stream);
void widen_bf16(const uint16_t* x, int64_t count, float* out, StreamHandle stream);
void round_to_bf16(const float* x, int64_t count, uint16_t* out, StreamHandle stream);

// ================================================================ denoising loop
// out: [256] float32, timestep_sinusoid of model/embedding.hpp for one
// timestep: τ = timestep · timestep_scale, a_j = τ · exp(-ln(10000)·j/128),
// [cos a_0..a_127, sin a_0..a_127]; exp, cos and sin in float64 rounded to
// float32 (within one float32 ulp of the CPU's, almost always equal).
void timestep_sinusoid(float timestep, float timestep_scale, float* out, StreamHandle stream);
// guided[i] = v_uncond[i] + g·(v_cond[i] − v_uncond[i]), each operation rounded
// to float32 as in the CPU loop (bit-exact). guided may alias either input.
void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance, float* guided,
                 StreamHandle stream);
// FlowMatch Euler, float32 latent: x[i] = x[i] + dt·v[i], dt = σ_{k+1} − σ_k
// computed on the host in float32 (bit-exact with the scheduler's fp32 path).
// UniPC: unipc_step_f32 below (its history stays in device memory).
void euler_step(float* x, const float* v, int64_t count, float dt, StreamHandle stream);
// One UniPC step (sched/latent_step.hpp) on a float32 latent and its
// history in device memory, every operation rounded to float32 in the order
// of apply_latent_step (bit-exact with it and with the scheduler's fp32
// step()): x [count] in place from v, m_k into x0_now, x̃_k into last_sample.
void unipc_step_f32(const sched::UniPCStep& step, int64_t count, float* x, const float* v, const float* x0_prev2,
                    const float* x0_prev, float* x0_now, float* last_sample, StreamHandle stream);
// *flag (device, zeroed by the caller) becomes 1 when any x[i] is NaN or
// ±inf, tested on the bits as core/non_finite.hpp does.
void flag_non_finite_f32(const float* x, int64_t count, uint32_t* flag, StreamHandle stream);
// Exact index maps of core/vision_tokens.hpp (patchify_into, unpatchify_into): latent [C, T, H, W] → patches
// [T·Hp·Wp, p·p·C] (padding zero), and back for the frames listed (host
// array, `frame_count` entries) into out [C, T, H, W] (every other frame zero).
void patchify(const float* latent, const PatchGrid& grid, float* patches, StreamHandle stream);
void unpatchify(const float* patches, const PatchGrid& grid, const int64_t* noisy_frames_host, int64_t frame_count,
                float* out, StreamHandle stream);

// ================================================================ the video VAE
// Frames channels-last [h][w][c] (vae/frame.hpp). A convolution runs as an
// implicit GEMM: conv_gather_taps_bf16 writes the rows of its output
// positions as [row][tap][c_in] bf16 (tap = (a·kh + b)·kw + c, zero for a null
// frame or a tap in the padding), gemm_bf16_to_f32 multiplies them by the
// weights [c_out][taps·c_in], and conv_epilogue_f32 adds the bias, then the
// residual, rounding after each (the CPU's epilogue, kernels/conv_kernels.hpp).

// The kt input frames of one output frame, oldest first; null = zeros.
struct ConvFrames {
  static constexpr int kMaxFrames = 4;
  const uint16_t* frame[kMaxFrames] = {};
};
struct ConvFloatFrames {  // float32 frames of the average-down shortcut
  static constexpr int kMaxFrames = 4;
  const float* frame[kMaxFrames] = {};
};
struct ConvGeometry {
  int kt = 1, kh = 1, kw = 1;
  int64_t c_in = 0;
  int64_t h_in = 0, w_in = 0, w_out = 0;
  int stride = 1, pad_top = 0, pad_left = 0;
};
// Rows [row0, row0 + rows) of the output positions (row = y·w_out + x) into
// a [rows][kt·kh·kw·c_in]. Bit-exact gathers.
void conv_gather_taps_bf16(const ConvFrames& frames, const ConvGeometry& geometry, int64_t row0, int64_t rows,
                           uint16_t* a, StreamHandle stream);
// y[r][o] = (y[r][o] + bias[o]) + residual[r][o] in place (residual may be null).
void conv_epilogue_f32(float* y, const float* bias, const float* residual, int64_t rows, int64_t c_out,
                       StreamHandle stream);
// kernels::ref::channel_rms_norm (x, gamma float32; y float32 or bf16): the
// sum of squares in float64 rounded once, SiLU's exponential in float64
// rounded once; the CPU variants differ by the order of their float32 sums.
void channel_rms_norm(const float* x, int64_t positions, int64_t channels, const float* gamma, float scale, bool silu,
                      bool bf16_out, void* y, StreamHandle stream);
// The index maps of vae/layers.hpp, bit-exact: nearest ×2 of [h][w][c]
// (bf16 output rounds to nearest even), the duplicate-up shortcut, channels
// [c0, c0 + c) of every position, unpatchify with the clamp to [-1, 1].
void upsample_nearest2(const float* x, int64_t h, int64_t w, int64_t c, bool bf16_out, void* y, StreamHandle stream);
void duplicate_up(const float* x, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int ft, int fs, int dt, float* y,
                  StreamHandle stream);
void channel_slice(const float* x, int64_t positions, int64_t channels, int64_t c0, int64_t c, float* y,
                   StreamHandle stream);
void unpatchify_clamped(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y, StreamHandle stream);
// The encoder's: patchify of pixels [h][w][c] (vae/layers.hpp patchify) and
// the average-down shortcut of ft frames [h][w][c_in] (null = zeros) into
// [h/fs][w/fs][c_out], its sums in the CPU's order (bit-exact).
void patchify_pixels(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y, StreamHandle stream);
void average_down(const ConvFloatFrames& frames, int ft, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int fs,
                  float* y, StreamHandle stream);
// The mid block's attention: qkv [P][3C] into q, k [P][C] and vᵀ [C][P]; and
// s[r][:] = softmax(s[r][:]) per row (exp in float64 rounded once, float32 sums).
void split_qkv(const float* qkv, int64_t P, int64_t C, float* q, float* k, float* vt, StreamHandle stream);
void softmax_rows(float* s, int64_t rows, int64_t n, StreamHandle stream);
// float32 y[M, N] = x[M, K] · W[N, K]ᵀ, bf16 operands (the convolutions), and
// y = alpha · x · Wᵀ with float32 operands (the attention's two products);
// float32 sums in cuBLASLt's order, no bias. W's rows are ld_w elements apart
// when it is given (≥ K: the last K columns of a wider weight matrix, as a
// causal convolution without its missing frames' taps uses); 0 means K.
void gemm_bf16_to_f32(GemmRunner& runner, const uint16_t* x, const uint16_t* w, int64_t M, int64_t N, int64_t K,
                      float* y, StreamHandle stream, int64_t ld_w = 0);
void gemm_f32(GemmRunner& runner, const float* x, const float* w, int64_t M, int64_t N, int64_t K, float alpha,
              float* y, StreamHandle stream);

// ================================================================ seeded device fills (tests, benchmarks)
// Counter-based (the value of element i depends only on seed and i), so the
// same seed fills the same values at any launch shape.
void fill_uniform_f32(float* x, int64_t count, uint64_t seed, float low, float high, StreamHandle stream);
void fill_uniform_bf16(uint16_t* x, int64_t count, uint64_t seed, float low, float high, StreamHandle stream);
// Finite E4M3 codes (never 0x7F/0xFF), uniform over the 254 of them.
void fill_random_e4m3(uint8_t* codes, int64_t count, uint64_t seed, StreamHandle stream);

}  // namespace stepmix::cuda
