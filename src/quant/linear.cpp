#include "quant/linear.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/dtype.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/kernel_set.hpp"
#include "quant/scale_bounds.hpp"
#include "stepmix/error.hpp"

namespace stepmix {

namespace {

using kernels::ActivationOperand;
using kernels::BiasType;
using kernels::GemmArgs;
using kernels::GemmArithmetic;
using kernels::OutputType;
using kernels::WeightOperand;

[[noreturn]] void fail(const std::string& linear, const std::string& message) {
  throw Error("linear", "'" + linear + "': " + message);
}

void check_view_bytes(const std::string& linear, const TensorView& t, const char* what) {
  if (t.data == nullptr && t.numel() > 0) fail(linear, std::string(what) + " has no data");
  if (t.nbytes != std::size_t(t.numel()) * dtype_size(t.dtype))
    fail(linear, std::string(what) + " holds " + std::to_string(t.nbytes) + " bytes, expected " +
                     std::to_string(std::size_t(t.numel()) * dtype_size(t.dtype)) + " for " +
                     std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape));
}

float checked_scale(const std::string& linear, const std::optional<float>& scale, const char* what) {
  if (!scale) fail(linear, std::string("FP8 weight needs a ") + what + " (ModelOpt's static per-tensor scale)");
  if (const auto problem = fp8_scale_problem(*scale)) fail(linear, std::string(what) + " " + *problem);
  return *scale;
}

// Scratch that lives as long as the calling thread: activation codes of the
// last W8A8 call, reused so steady-state calls do not allocate.
std::vector<uint8_t>& thread_code_scratch() {
  thread_local std::vector<uint8_t> codes;
  return codes;
}

}  // namespace

Linear::Linear(LinearWeights w, WeightCache cache, W8A16Rounding rounding) : weights_(std::move(w)), cache_(cache) {
  const std::string& n = weights_.name;
  const TensorView& weight = weights_.weight;
  if (weight.rank() != 2) fail(n, "weight must be 2-D [out, in], got " + shape_to_string(weight.shape));
  out_features_ = weight.shape[0];
  in_features_ = weight.shape[1];
  if (out_features_ < 1 || in_features_ < 1) fail(n, "weight shape " + shape_to_string(weight.shape) + " is empty");
  check_view_bytes(n, weight, "weight");

  switch (weight.dtype) {
    case DType::F8_E4M3:
      is_fp8_ = true;
      weight_scale_ = checked_scale(n, weights_.weight_scale, "weight_scale");
      input_scale_ = checked_scale(n, weights_.input_scale, "input_scale");
      // A positive normal float rounds to a positive finite bf16 (scales are
      // bounded far below bf16's largest value, quant/scale_bounds.hpp).
      w8a16_bf16_scale_ =
          rounding == W8A16Rounding::Diffusers ? bf16_to_float(float_to_bf16_rne(weight_scale_)) : weight_scale_;
      break;
    case DType::BF16:
    case DType::F32:
      if (weights_.weight_scale || weights_.input_scale)
        fail(n, "a " + std::string(dtype_name(weight.dtype)) + " weight cannot carry weight_scale/input_scale");
      break;
    default:
      fail(n, "weight dtype " + std::string(dtype_name(weight.dtype)) + " is not F8_E4M3, BF16 or F32");
  }

  if (weights_.bias) {
    const TensorView& bias = *weights_.bias;
    if (bias.rank() != 1 || bias.shape[0] != out_features_)
      fail(n, "bias shape " + shape_to_string(bias.shape) + " does not match [" + std::to_string(out_features_) + "]");
    if (bias.dtype != DType::BF16 && bias.dtype != DType::F32)
      fail(n, "bias dtype " + std::string(dtype_name(bias.dtype)) + " is not BF16 or F32");
    check_view_bytes(n, bias, "bias");
  }

  if (is_fp8_ && cache_ == WeightCache::All) {
    // Ŵ for the W8A16 BF16-activation path, made with the same kernel the
    // uncached path fuses, so both give identical bits.
    const int64_t count = out_features_ * in_features_;
    bf16_weight_cache_.resize(std::size_t(count));
    const auto& k = kernels::active_kernels().linear;
    const auto* codes = weight.as<uint8_t>();
    constexpr int64_t kRowsPerTask = 64;
    const int64_t tasks = (out_features_ + kRowsPerTask - 1) / kRowsPerTask;
    ThreadPool::global().parallel_for(tasks, [&](int64_t t) {
      const int64_t row0 = t * kRowsPerTask;
      const int64_t rows = std::min(kRowsPerTask, out_features_ - row0);
      k.dequantize_e4m3_to_bf16(codes + row0 * in_features_, rows * in_features_, w8a16_bf16_scale_,
                                bf16_weight_cache_.data() + row0 * in_features_);
    });
  }
}

void Linear::check_precision(Precision precision) const {
  if (is_fp8_ && precision != Precision::W8A16 && precision != Precision::W8A8)
    fail(name(), "an FP8 layer runs W8A16 or W8A8, not dense BF16 arithmetic");
}

void Linear::quantize_activations(const void* x, bool x_is_bf16, int64_t M, uint8_t* codes) const {
  const auto& k = kernels::active_kernels().linear;
  const int64_t K = in_features_;
  // Rows per task so that each task quantizes at least ~16k elements.
  const int64_t rows_per_task = std::max<int64_t>(1, (16384 + K - 1) / K);
  const int64_t tasks = (M + rows_per_task - 1) / rows_per_task;
  ThreadPool::global().parallel_for(tasks, [&](int64_t t) {
    const int64_t row0 = t * rows_per_task;
    const int64_t count = std::min(rows_per_task, M - row0) * K;
    if (x_is_bf16) {
      k.quantize_e4m3_bf16(static_cast<const uint16_t*>(x) + row0 * K, count, input_scale_, codes + row0 * K);
    } else {
      k.quantize_e4m3_f32(static_cast<const float*>(x) + row0 * K, count, input_scale_, codes + row0 * K);
    }
  });
  if (code_hook_) code_hook_(name(), codes, M, K);
}

namespace {

void set_bias(GemmArgs& args, const std::optional<TensorView>& bias) {
  if (!bias) return;
  args.bias_type = bias->dtype == DType::F32 ? BiasType::F32 : BiasType::BF16;
  args.bias = bias->data;
}

// The GEMM of one call with everything but the operand types set.
GemmArgs base_args(const LinearWeights& w, int64_t M, int64_t N, int64_t K, void* y, bool bf16) {
  GemmArgs args;
  args.M = M;
  args.N = N;
  args.K = K;
  args.y = y;
  args.y_type = bf16 ? OutputType::BF16 : OutputType::F32;
  set_bias(args, w.bias);
  args.w = w.weight.data;
  return args;
}

uint8_t* code_scratch(int64_t count) {
  std::vector<uint8_t>& codes = thread_code_scratch();
  if (codes.size() < std::size_t(count)) codes.resize(std::size_t(count));
  return codes.data();
}

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace

void Linear::begin_call(const void* x, bool x_is_bf16, int64_t M, const void* y, Precision precision) const {
  check_precision(precision);
  if (M < 0) fail(name(), "negative row count " + std::to_string(M));
  if (M > 0 && (!x || !y)) fail(name(), "null activation or output pointer");
  if (M > 0 && input_observer_) {
    if (x_is_bf16) {
      input_observer_(name(), nullptr, static_cast<const uint16_t*>(x), M, in_features_);
    } else {
      input_observer_(name(), static_cast<const float*>(x), nullptr, M, in_features_);
    }
  }
}

void Linear::run_unquantized(const void* x, bool x_is_bf16, int64_t M, void* y) const {
  GemmArgs args = base_args(weights_, M, out_features_, in_features_, y, x_is_bf16);
  args.a = x;
  args.a_type = x_is_bf16 ? ActivationOperand::BF16 : ActivationOperand::F32;
  const DType wtype = weights_.weight.dtype;
  if (!is_fp8_) {
    // BF16 x BF16 products are exact; FP32 weights or activations need FP32 products.
    const bool bf16_products = x_is_bf16 && wtype == DType::BF16;
    args.arithmetic = bf16_products ? GemmArithmetic::BF16 : GemmArithmetic::F32;
    args.w_type = wtype == DType::F32 ? WeightOperand::F32 : WeightOperand::BF16;
  } else if (!x_is_bf16) {
    // FP32 activations need the FP32 W_deq, which the BF16 cache cannot hold.
    args.arithmetic = GemmArithmetic::F32;
    args.w_type = WeightOperand::E4M3TimesScaleF32;
    args.weight_scale = weight_scale_;
  } else {
    args.arithmetic = GemmArithmetic::BF16;
    if (!bf16_weight_cache_.empty()) {
      args.w_type = WeightOperand::BF16;
      args.w = bf16_weight_cache_.data();
    } else {
      args.w_type = WeightOperand::E4M3TimesScaleBF16;
      args.weight_scale = w8a16_bf16_scale_;
    }
  }
  kernels::active_kernels().linear.gemm(args);
}

void Linear::run_w8a8(const uint8_t* codes, int64_t M, void* y, bool bf16) const {
  GemmArgs args = base_args(weights_, M, out_features_, in_features_, y, bf16);
  args.arithmetic = GemmArithmetic::BF16;
  args.a_type = ActivationOperand::E4M3Codes;
  args.a = codes;
  args.w_type = WeightOperand::E4M3;
  args.alpha = input_scale_ * weight_scale_;
  kernels::active_kernels().linear.gemm(args);
}

void Linear::forward_any(const void* x, bool x_is_bf16, int64_t M, void* y, Precision precision) const {
  begin_call(x, x_is_bf16, M, y, precision);
  if (M == 0) return;
  if (!is_fp8_ || precision == Precision::W8A16) return run_unquantized(x, x_is_bf16, M, y);
  uint8_t* codes = code_scratch(M * in_features_);
  quantize_activations(x, x_is_bf16, M, codes);
  run_w8a8(codes, M, y, x_is_bf16);
}

void Linear::forward(const float* x, int64_t M, float* y, Precision precision) const {
  forward_any(x, /*x_is_bf16=*/false, M, y, precision);
}

void Linear::forward(const uint16_t* x_bf16, int64_t M, uint16_t* y_bf16, Precision precision) const {
  forward_any(x_bf16, /*x_is_bf16=*/true, M, y_bf16, precision);
}

template <class T>
int Linear::forward_sharing_input_impl(std::span<const Linear* const> linears, const T* x, int64_t M,
                                       std::span<T* const> ys, Precision precision) {
  constexpr bool x_is_bf16 = std::is_same_v<T, uint16_t>;
  if (linears.size() != ys.size() || linears.empty() || linears.size() > 64)
    throw Error("linear", "forward_sharing_input: " + std::to_string(linears.size()) + " linears and " +
                              std::to_string(ys.size()) + " outputs (expected 1 to 64 of each, as many outputs)");
  for (const Linear* l : linears) {
    if (!l) throw Error("linear", "forward_sharing_input: null linear");
    if (l->in_features_ != linears[0]->in_features_)
      fail(l->name(), "in_features " + std::to_string(l->in_features_) + " differs from '" + linears[0]->name() +
                          "' (" + std::to_string(linears[0]->in_features_) + ") in a shared-input group");
  }
  for (std::size_t i = 0; i < linears.size(); ++i) linears[i]->begin_call(x, x_is_bf16, M, ys[i], precision);
  if (M == 0) return 0;
  const auto shares_codes = [](const Linear& a, const Linear& b) {
    return a.is_fp8_ && b.is_fp8_ && !a.code_hook_ && !b.code_hook_ &&
           float_bits(a.input_scale_) == float_bits(b.input_scale_);
  };
  uint64_t done = 0;  // bit i: linears[i] has run
  int quantizations = 0;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (done >> i & 1) continue;
    const Linear& lead = *linears[i];
    if (!lead.is_fp8_ || precision == Precision::W8A16) {
      lead.run_unquantized(x, x_is_bf16, M, ys[i]);
      continue;
    }
    // This group finishes before the next one quantizes into the scratch.
    uint8_t* codes = code_scratch(M * lead.in_features_);
    lead.quantize_activations(x, x_is_bf16, M, codes);
    ++quantizations;
    lead.run_w8a8(codes, M, ys[i], x_is_bf16);
    for (std::size_t j = i + 1; j < linears.size(); ++j) {
      if ((done >> j & 1) || !shares_codes(lead, *linears[j])) continue;
      linears[j]->run_w8a8(codes, M, ys[j], x_is_bf16);
      done |= uint64_t{1} << j;
    }
  }
  return quantizations;
}

int Linear::forward_sharing_input(std::span<const Linear* const> linears, const float* x, int64_t M,
                                  std::span<float* const> ys, Precision precision) {
  return forward_sharing_input_impl(linears, x, M, ys, precision);
}

int Linear::forward_sharing_input(std::span<const Linear* const> linears, const uint16_t* x_bf16, int64_t M,
                                  std::span<uint16_t* const> ys, Precision precision) {
  return forward_sharing_input_impl(linears, x_bf16, M, ys, precision);
}

}  // namespace stepmix
