// Shared helpers of the model tests: golden files, the tiny checkpoints and
// the max-normalised deviation metric of the golden README §9.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/golden.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "model/transformer.hpp"

namespace stepmix::test {

inline const std::vector<std::string>& forward_cases() {
  static const std::vector<std::string> cases = {"image", "video", "odd", "cond"};
  return cases;
}

inline std::shared_ptr<const SafetensorsFile> open_forward_case(const std::string& name) {
  return SafetensorsFile::open(golden_path("forward/" + name + ".safetensors"));
}

inline std::vector<float> golden_floats(const SafetensorsFile& file, const std::string& name) {
  const TensorView& t = file.get(name);
  EXPECT_EQ(t.dtype, DType::F32) << name;
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

// max|a - g| / max|g| (golden README §9).
inline double max_normalised_deviation(const std::vector<float>& actual, const std::vector<float>& golden) {
  EXPECT_EQ(actual.size(), golden.size());
  double max_diff = 0, max_golden = 0;
  for (std::size_t i = 0; i < std::min(actual.size(), golden.size()); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(actual[i]) - double(golden[i])));
    max_golden = std::max(max_golden, std::fabs(double(golden[i])));
  }
  if (std::isnan(max_diff)) return INFINITY;
  return max_golden > 0 ? max_diff / max_golden : max_diff;
}

// bf16 activations against the float32 goldens (forward_bf16_test.cpp says
// where they come from): dense, W8A16, W8A8 free running, and W8A8 with the
// stored activation codes substituted (what is left are the bf16 roundings
// of the dense case).
inline constexpr double kBf16DenseBound = 5e-2;
inline constexpr double kBf16W8A16Bound = 5e-2;
inline constexpr double kBf16W8A8FreeRunningBound = 2e-1;
inline constexpr double kBf16W8A8ForcedBound = kBf16DenseBound;

// Substitutes the golden forward case's stored W8A8 activation codes
// (w8a8.act_codes.<linear>) in every W8A8 call of `model`, counting the calls.
inline void force_stored_codes(Cosmos3Transformer& model, std::shared_ptr<const SafetensorsFile> golden, int& calls) {
  model.set_activation_code_hook([golden, &calls](const std::string& linear, uint8_t* q, int64_t M, int64_t K) {
    const TensorView& stored = golden->get("w8a8.act_codes." + linear);
    ASSERT_EQ(stored.numel(), M * K) << linear;
    std::copy_n(stored.as<uint8_t>(), M * K, q);
    ++calls;
  });
}

// The CFG shape of a step: `cond` and an unconditional pass over the same
// latent behind a shorter prompt (the last L - L/2 prompt tokens, every
// position shifted down), so the two differ in length and position ids.
inline ForwardInputs shorter_prompt(const ForwardInputs& cond) {
  ForwardInputs uncond = cond;
  const int64_t L = int64_t(cond.input_ids.size()), S = int64_t(cond.position_ids.size() / 3), drop = L / 2;
  EXPECT_GT(drop, 0);
  uncond.input_ids.erase(uncond.input_ids.begin(), uncond.input_ids.begin() + drop);
  uncond.position_ids.clear();
  for (int64_t axis = 0; axis < 3; ++axis)
    for (int64_t col = drop; col < S; ++col) uncond.position_ids.push_back(cond.position_ids[axis * S + col] - float(drop));
  return uncond;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// "transformer" (BF16) or "transformer-fp8".
inline Cosmos3Transformer load_tiny(const std::string& folder, WeightCache cache = WeightCache::None,
                                    Backend& backend = cpu_backend()) {
  return Cosmos3Transformer::load(ModelDirectory::open(golden_path(folder)), cache, backend);
}

}  // namespace stepmix::test
