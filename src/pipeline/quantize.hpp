// Post-training quantization of a BF16 Cosmos3 checkpoint into the ModelOpt
// tensorwise FP8 layout:
//   weight_scale s_w = max|W| / 448, weight codes = e4m3(clamp(W / s_w)),
//   input_scale  s_x = max|x| / 448 with max|x| over every input the Linear
//   saw while sampling the calibration prompts (every step, both CFG passes),
// the static "max" calibration ModelOpt performs. Everything else is copied.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stepmix/policy.hpp"

namespace stepmix {

// Calibration sampling when neither the request nor the model says.
inline constexpr int kCalibrationSteps = 8;
inline constexpr double kCalibrationGuidance = 3.0;

struct CalibrationSettings {
  std::vector<std::vector<int64_t>> prompts;  // understanding prefixes (cond passes)
  std::vector<int64_t> negative_prompt;       // uncond pass prefix (CFG)
  int seeds = 2;                              // seeds 0..seeds-1 per prompt
  int steps = 8;
  double guidance = 3.0;
  std::array<int64_t, 4> latent_shape{};      // C, T, H, W
  bool video = false;                         // more than one frame (UniPC's default flow shift)
  double fps = 24.0;
  std::optional<std::string> scheduler_config;  // default: the model's
};

struct QuantizeSettings {
  std::string model_dir;  // BF16 Diffusers directory
  std::string out_dir;    // must not exist; written atomically (temp dir + rename)
  CalibrationSettings calibration;
  // The policy written to quantization_config.runtime; nullopt writes
  // "runtime": null (no schedule).
  std::optional<StepPolicy> policy = StepPolicy{};
};

struct QuantizeReport {
  std::map<std::string, float> input_amax;   // per governed Linear
  std::map<std::string, float> weight_amax;
  int transformer_calls = 0;
};

// Throws stepmix::Error when the model is already quantized, a Linear never
// saw a non-zero input or has an all-zero weight, or the output exists.
QuantizeReport quantize_checkpoint(const QuantizeSettings& settings);

// The quantization_config block stepmix writes; `runtime` is
// omitted when `with_runtime` is false (the hf_quant_config.json copy).
nlohmann::json modelopt_fp8_quantization_config(const std::optional<StepPolicy>& policy, bool with_runtime);

}  // namespace stepmix
