// Helpers for the Linear tests: owned weight buffers exposed as TensorViews,
// and an independent scalar model of the arithmetic in step-policy.md §12.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/numerics.hpp"
#include "quant/linear.hpp"

namespace stepmix::test {

// Keeps the bytes a LinearWeights points into alive.
struct OwnedLinear {
  std::vector<std::byte> weight_bytes;
  std::vector<std::byte> bias_bytes;
  LinearWeights weights;
};

inline TensorView make_view(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const std::vector<std::byte>& bytes) {
  TensorView v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.data = bytes.data();
  v.nbytes = bytes.size();
  v.file = "<test>";
  return v;
}

// x rounded to bf16 (RNE), as the BF16-activation calls take it.
inline std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = float_to_bf16_rne(x[i]);
  return out;
}

template <class T>
std::vector<std::byte> to_bytes(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Random FP8 layer: codes from N(0,1)/s_w-ish values (no NaN codes).
inline OwnedLinear make_fp8_linear(const std::string& name, int64_t N, int64_t K, uint32_t seed, bool with_bias,
                                   float weight_scale = 0.0123f, float input_scale = 0.0217f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> codes(static_cast<size_t>(N * K));
  for (auto& c : codes) c = quantize_e4m3_saturating(normal(rng) * 100.0f);
  OwnedLinear o;
  o.weight_bytes = to_bytes(codes);
  o.weights.name = name;
  o.weights.weight = make_view(name + ".weight", DType::F8_E4M3, {N, K}, o.weight_bytes);
  o.weights.weight_scale = weight_scale;
  o.weights.input_scale = input_scale;
  if (with_bias) {
    std::vector<uint16_t> bias(static_cast<size_t>(N));
    for (auto& b : bias) b = float_to_bf16_rne(0.05f * normal(rng));
    o.bias_bytes = to_bytes(bias);
    o.weights.bias = make_view(name + ".bias", DType::BF16, {N}, o.bias_bytes);
  }
  return o;
}

inline OwnedLinear make_dense_linear(const std::string& name, DType dtype, int64_t N, int64_t K, uint32_t seed,
                                     bool with_bias) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  OwnedLinear o;
  if (dtype == DType::BF16) {
    std::vector<uint16_t> w(static_cast<size_t>(N * K));
    for (auto& v : w) v = float_to_bf16_rne(normal(rng));
    o.weight_bytes = to_bytes(w);
  } else {
    std::vector<float> w(static_cast<size_t>(N * K));
    for (auto& v : w) v = normal(rng);
    o.weight_bytes = to_bytes(w);
  }
  o.weights.name = name;
  o.weights.weight = make_view(name + ".weight", dtype, {N, K}, o.weight_bytes);
  if (with_bias) {
    std::vector<float> bias(static_cast<size_t>(N));
    for (auto& b : bias) b = 0.05f * normal(rng);
    o.bias_bytes = to_bytes(bias);
    o.weights.bias = make_view(name + ".bias", DType::F32, {N}, o.bias_bytes);
  }
  return o;
}

inline std::vector<float> random_activations(int64_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(count));
  for (auto& v : x) v = normal(rng);
  return x;
}

}  // namespace stepmix::test
