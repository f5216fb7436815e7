// What a run needs from a model directory besides the transformer: per-model
// defaults, the latent geometry of a request, the scheduler configuration and
// the prompt ids. Shared by `generate`, `quantize` and `compare`.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "sched/config.hpp"
#include "text/prompt_model.hpp"

namespace stepmix {

// Optional defaults in model_index.json under "stepmix":
//   {"height": 28, "width": 28, "num_inference_steps": 8, "guidance_scale": 3.0}
// Empty object when absent. Throws on a wrong type.
struct ModelDefaults {
  std::optional<int> height, width, steps;
  std::optional<double> guidance;
};
ModelDefaults read_model_defaults(const ModelDirectory& dir);

// A full model directory without vae/: latents are pixels (identity decoder).
bool is_pixel_space(const ModelDirectory& dir);

struct GeometryRequest {
  std::optional<std::string> latent_shape;  // "C,T,H,W"
  std::optional<int> height, width, frames;
};
// {C, T, H, W}. Pixel-space models: T = frames, H/W = pixels. VAE models:
// 16x spatial and 4x temporal compression (cosmos3-pipeline.md §5).
std::array<int64_t, 4> latent_shape_for(const GeometryRequest& request, const ModelDirectory& dir, int64_t channels,
                                        const ModelDefaults& defaults);

struct SchedulerRequest {
  std::optional<std::string> config_file;  // a Diffusers scheduler_config.json
  std::optional<std::string> kind;         // "unipc" or "euler"
  std::optional<double> flow_shift;
};
// The model's scheduler (or config_file, or UniPC with flow_shift 10 for
// video / 3 for images), Karras forced off as the pipeline does (§9), then the
// request's kind and flow_shift.
sched::SchedulerConfig scheduler_config_for(const SchedulerRequest& request, const ModelDirectory& dir, bool video);

// "1,2,3" -> ids; throws naming `option` on anything else.
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& option);

// Loads text_tokenizer/tokenizer.json (tokenizer/ as fallback) once.
class PromptEncoder {
 public:
  explicit PromptEncoder(const ModelDirectory& dir) : dir_(dir) {}
  // The understanding prefix of a text prompt.
  std::vector<int64_t> encode(const std::string& text);

 private:
  const ModelDirectory& dir_;
  std::optional<text::PromptModel> tokenizer_;
};

}  // namespace stepmix
