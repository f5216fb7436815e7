// A Linear layer as the checkpoint stores it: dense (BF16/F32 weight) or
// ModelOpt tensorwise FP8 (E4M3 weight + scalar weight_scale and input_scale).
// The arithmetic is chosen per call (the step controller decides), see
// shared spec step-policy.md §12 and README "Precision".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace stepmix {

// Arithmetic of one call. Dense layers ignore it (they always run dense).
enum class LinearMode { Dense, W8A16, W8A8 };

// Dense-weight cache: None keeps FP8 weights at 1 byte/parameter and converts
// inside the kernel; All keeps a dequantized BF16 copy (2 bytes/parameter more).
// Results are bit-identical across cache modes.
enum class WeightCache { None, All };

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
// conformance tests, spec golden README §9).
using ActivationCodeHook = std::function<void(const std::string& linear_name, uint8_t* codes, int64_t M, int64_t K)>;
