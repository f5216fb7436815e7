// A Linear layer as the checkpoint stores it: dense (BF16/F32 weight) or
// ModelOpt tensorwise FP8 (E4M3 weight + scalar weight_scale and input_scale).
// The arithmetic is chosen per call (the step controller decides), see
// docs/guide.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.hpp"
#include "stepmix/policy.hpp"
#include "stepmix/runtime.hpp"

namespace stepmix {

// What the checkpoint holds for one Linear (views into mapped files).
struct LinearWeights {
  std::string name;                  // module path, e.g. "layers.0.self_attn.to_q"
  TensorView weight;                 // [out, in]: F8_E4M3, BF16 or F32
  std::optional<float> weight_scale; // s_w, FP8 only
  std::optional<float> input_scale;  // s_x, FP8 only
  std::optional<TensorView> bias;    // [out]: BF16 or F32
};

// Test hook for the W8A8 path: sees the activation codes a call computed
// ([M, in], row-major) and may overwrite them before the GEMM (forced-code
// conformance tests against the goldens).
using ActivationCodeHook = std::function<void(const std::string& linear_name, uint8_t* codes, int64_t M, int64_t K)>;

// Calibration hook: sees every call's input activations [M, in] before the
// GEMM (FP32 calls pass `x`, BF16 calls pass `x_bf16`; the other is null).
// `stepmix quantize` records max|x| per Linear with it.
using ActivationInputObserver =
    std::function<void(const std::string& linear_name, const float* x, const uint16_t* x_bf16, int64_t M, int64_t K)>;

// Base of what a backend keeps per Linear (Linear::backend_state).
class LinearBackendState {
 public:
  virtual ~LinearBackendState() = default;
};

// One Linear layer: y[M, out] = x[M, in] · Wᵀ (+ bias), with the FP8
// arithmetic chosen per call by a step Precision: W8A16 or W8A8 for FP8
// layers; BF16 means dense arithmetic, which 16-bit layers always run
// whatever the precision asked. Weights stay views into the mapped checkpoint;
// the layer owns only what WeightCache asks for.
//
// Arithmetic:
//  FP32 activations
//   W8A16: W_deq = float32(decode(code) · s_w); y = x · W_deqᵀ (+ b), FP32 sums.
//   W8A8:  q = quantize_e4m3_saturating(x / s_x) (float32 division);
//          acc = Σ decode(q) · decode(code) (exact products, FP32 sums);
//          y = acc · float32(s_x · s_w) (+ b).
//   Dense: FP32 (BF16 weights widened exactly), FP32 sums.
//  BF16 activations: as above with x widened exactly to float32; W8A16 uses
//   Ŵ = bf16(float32(decode(code) · s_w)) (or with bf16(s_w), W8A16Rounding);
//   outputs rounded to bf16 (RNE).
//
// forward() is const and may run concurrently on different layers; one layer's
// code hook must not be changed while a forward is running.
class Linear {
 public:
  // Validates shapes, dtypes and scales; throws stepmix::Error naming the linear.
  explicit Linear(LinearWeights w, WeightCache cache = WeightCache::None,
                  W8A16Rounding rounding = W8A16Rounding::Single);

  const std::string& name() const { return weights_.name; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool is_fp8() const { return is_fp8_; }
  WeightCache weight_cache() const { return cache_; }

  // x [M, in] row-major -> y [M, out] row-major. An FP8 layer needs
  // precision W8A16 or W8A8; a dense layer ignores `precision`.
  void forward(const float* x, int64_t M, float* y, Precision precision) const;
  void forward(const uint16_t* x_bf16, int64_t M, uint16_t* y_bf16, Precision precision) const;

  // Runs Linears that read the same x [M, in] (all with the same in_features):
  // ys[i] = linears[i]->forward(x), bit for bit. The only thing shared is
  // exact by construction: in W8A8, FP8 members whose input_scale is bitwise
  // equal and that have no code hook quantize x once and all read those codes
  // (a member's codes are a function of x and s_x alone). A member with its
  // own s_x or a code hook quantizes for itself, so a group that does not
  // share one s_x is not fused. W8A16 and dense members run as usual.
  // Returns how many times x was quantized (0 outside W8A8); throws
  // stepmix::Error on mismatched arguments. At most 64 linears.
  static int forward_sharing_input(std::span<const Linear* const> linears, const float* x, int64_t M,
                                   std::span<float* const> ys, Precision precision);
  static int forward_sharing_input(std::span<const Linear* const> linears, const uint16_t* x_bf16, int64_t M,
                                   std::span<uint16_t* const> ys, Precision precision);

  // W8A8 only: sees (and may overwrite) the activation codes before the GEMM.
  void set_code_hook(ActivationCodeHook hook) { code_hook_ = std::move(hook); }
  // Any precision: sees the input of every call (calibration).
  void set_input_observer(ActivationInputObserver observer) { input_observer_ = std::move(observer); }

  // Bytes this layer owns beyond the mapped checkpoint (the weight cache).
  std::size_t resident_bytes() const { return bf16_weight_cache_.size() * sizeof(uint16_t); }

  // What a backend that runs the layer from its own copy of the weights (the
  // CUDA backend) reads: the stored tensors, the scales (FP8 layers; 1
  // otherwise), the precision check and the hooks of the CPU path.
  const TensorView& weight() const { return weights_.weight; }
  const std::optional<TensorView>& bias() const { return weights_.bias; }
  float weight_scale() const { return weight_scale_; }
  // The scale the W8A16 decode of bf16 activations multiplies by: s_w, or
  // bf16(s_w) with W8A16Rounding::Diffusers (the product of a decoded code
  // and a bf16 value is exact in float32, so the one rounding to bf16 that
  // follows gives bf16(bf16(code) · bf16(s_w))).
  float w8a16_bf16_scale() const { return w8a16_bf16_scale_; }
  float input_scale() const { return input_scale_; }
  // Throws unless this layer runs `precision` (FP8: W8A16 or W8A8).
  void check_precision(Precision precision) const;
  const ActivationCodeHook& code_hook() const { return code_hook_; }
  const ActivationInputObserver& input_observer() const { return input_observer_; }
  // A backend's state for this layer (the CUDA backend's device copy of the
  // weights), made on the backend's first use and freed with the layer, so
  // that it can never outlive the weights it copies.
  std::shared_ptr<LinearBackendState>& backend_state() const { return backend_state_; }

 private:
  // Checks one call's arguments and shows x to the input observer.
  void begin_call(const void* x, bool x_is_bf16, int64_t M, const void* y, Precision precision) const;
  // Dense and W8A16 calls (nothing to quantize).
  void run_unquantized(const void* x, bool x_is_bf16, int64_t M, void* y) const;
  // W8A8 GEMM from codes quantized with this layer's s_x; y is bf16 when x was.
  void run_w8a8(const uint8_t* codes, int64_t M, void* y, bool bf16) const;
  void forward_any(const void* x, bool x_is_bf16, int64_t M, void* y, Precision precision) const;
  template <class T>  // float or uint16_t (bf16)
  static int forward_sharing_input_impl(std::span<const Linear* const> linears, const T* x, int64_t M,
                                        std::span<T* const> ys, Precision precision);
  // W8A8: quantizes [M, in] activations into `codes` and runs the hook.
  void quantize_activations(const void* x, bool x_is_bf16, int64_t M, uint8_t* codes) const;

  LinearWeights weights_;
  WeightCache cache_;
  int64_t in_features_ = 0;
  int64_t out_features_ = 0;
  bool is_fp8_ = false;
  float weight_scale_ = 1.0f;
  float w8a16_bf16_scale_ = 1.0f;
  float input_scale_ = 1.0f;
  std::vector<uint16_t> bf16_weight_cache_;  // [out, in] Ŵ, WeightCache::All on FP8 layers
  ActivationCodeHook code_hook_;
  ActivationInputObserver input_observer_;
  mutable std::shared_ptr<LinearBackendState> backend_state_;
};

}  // namespace stepmix
