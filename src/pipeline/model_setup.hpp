// What a run needs from a model directory besides the transformer: per-model
// defaults, the latent geometry of a request, the scheduler configuration and
// the prompt ids. Shared by Model (generate), inspect, quantize, compare and
// bench.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "sched/config.hpp"
#include "stepmix/model.hpp"
#include "text/prompt_model.hpp"

namespace stepmix {

// Optional defaults in model_index.json under "stepmix":
//   {"height": 28, "width": 28, "num_inference_steps": 8, "guidance_scale": 3.0}
// Empty object when absent. Throws on a wrong type.
struct ModelDefaults {
  std::optional<int> height, width, frames, steps;
  std::optional<double> guidance;
  bool native_flow_schedule = false;  // the pipeline's use_native_flow_schedule
  // Pixels per latent row/column and pixel frames per latent frame after the
  // first: vae/config.json's (its scale_factor_spatial/_temporal, checked
  // against its architecture), else Wan2.2's 16 and 4.
  int64_t spatial_factor = 16, temporal_factor = 4;
};
ModelDefaults read_model_defaults(const ModelDirectory& dir);

// The limits of a request (stepmix/model.hpp) for the step count and the
// guidance scale: throw stepmix::Error(component, "<field>: expected ...,
// got ...") outside [1, kMaxSteps] / a finite number in [0, kMaxGuidance].
void check_steps_value(int steps, const std::string& component, const std::string& field);
void check_guidance_value(double guidance, const std::string& component, const std::string& field);
// A frame rate in [kMinFps, kMaxFps], the same way.
void check_fps_value(double fps, const std::string& component, const std::string& field);

// A field of a request that `component` takes from elsewhere (quantize's
// prompts from its prompt file, compare's noise from its seeds) must be
// unset: "[<component>] request.<field> is not used here (<source>); leave it
// unset", not silently replaced.
void refuse_request_field(bool set, const std::string& component, const std::string& field, const std::string& source);

// An understanding prefix the transformer takes: at most text::kMaxPromptIds
// ids ("<source>: N token ids, more than the 4096 ..."), every id in
// [0, vocab_size) of the transformer's config ("<source>: id X (position i)
// is outside the vocabulary [0, V) of <config_path>"), else an error. Ids
// given by the request are held to what a tokenized prompt is.
void check_prompt_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& source,
                      const std::string& component, const std::string& config_path);

// A full model directory without vae/: latents are pixels (identity decoder).
bool is_pixel_space(const ModelDirectory& dir);

struct GeometryRequest {
  std::optional<std::array<int64_t, 4>> latent_shape;  // C, T, H, W
  std::optional<int> height, width, frames;
};
// The request's pixel frames: --frames, else the model's default, else
// kDefaultFrames; with a latent shape, the frames it decodes to. The request
// is a video iff that is more than one (an image iff num_frames == 1).
int64_t request_frames(const GeometryRequest& request, const ModelDirectory& dir, const ModelDefaults& defaults);
// Steps when the request gives none: the model's, else 35 for a video and
// 50 for an image.
int default_steps(const ModelDefaults& defaults, bool video);
// {C, T, H, W}. Pixel-space models: T = frames, H/W = pixels. Latent models:
// the VAE's spatial and temporal compression (defaults.spatial_factor,
// temporal_factor). Unset sizes are the model's, else
// 720 x 1280 for a video and 1024 x 1024 for an image.
std::array<int64_t, 4> latent_shape_for(const GeometryRequest& request, const ModelDirectory& dir, int64_t channels,
                                        const ModelDefaults& defaults);

struct SchedulerRequest {
  std::optional<std::string> config_file;  // a Diffusers scheduler_config.json
  std::optional<std::string> kind;         // "unipc" or "euler"
  std::optional<double> flow_shift;
  bool bf16_latents = false;  // the scheduler's arithmetic emulates a BF16 latent
  bool keep_karras = false;   // GenerateRequest::karras_sigmas
};
// The model's scheduler (or config_file, or UniPC when the model has none),
// Karras forced off as the Cosmos3 video examples and vLLM-Omni do
// (docs/schedulers.md §1) unless keep_karras keeps a UniPC file's Karras grid,
// then the request's kind and flow shift. UniPC's flow_shift is a request
// value: unset, it is 10 for a video and 3 for an image, whatever the file
// holds (a note says when that differs); FlowMatch Euler keeps its file's
// shift unless the request gives one.
sched::SchedulerConfig scheduler_config_for(const SchedulerRequest& request, const ModelDirectory& dir,
                                            const ModelDefaults& defaults, bool video);

// The run a prompt is built for: Cosmos3 checkpoints append sentences on the
// resolution and duration to the prompt and pick the image or video system
// prompt (text/prompt_model.hpp).
struct PromptGeometry {
  int64_t height = 0, width = 0;  // pixels
  int64_t frames = 1;             // 1 = image
  double fps = 24.0;
  std::optional<bool> use_system_prompt;  // unset: the model's default
  bool resolution_sentence = true, duration_sentence = true;
};

struct EncodedPrompts {
  std::vector<int64_t> cond, uncond;  // uncond empty unless asked for
  // Bytes of the rendered chat texts (Cosmos3 checkpoints only).
  std::optional<std::size_t> cond_rendered_bytes, uncond_rendered_bytes;
};

// Steps and guidance of a run: the request's, else the defaults; but a
// distilled build's scheduler (FlowMatch Euler with a fixed sigma list,
// fixed_step_sampler_config) fixes them to the list's length and to 1, its
// guidance being in the weights (one pass per step): another value asked
// for is an error tagged `component`.
struct Sampling {
  int steps = 0;
  double guidance = 1.0;
  bool fixed = false;            // a distilled build's
  std::string scheduler_source;  // the scheduler's file, for messages
};
Sampling resolve_sampling(const sched::SchedulerConfig& config, std::optional<int> steps,
                          std::optional<double> guidance, int default_steps, double default_guidance,
                          const std::string& component);

// Guidance 1 runs no unconditional pass: a negative prompt (text or ids) in
// the request would be ignored, so it is an error tagged `component`; but a
// distilled build's pipeline ignores it, and the warning to say so is
// returned.
std::optional<std::string> check_negative_prompt_has_a_pass(const GenerateRequest& request, const Sampling& sampling,
                                                            const std::string& component);

// The pixel geometry a latent shape {C, T, H, W} stands for: the request's
// height/width/frames when it gave them, else the model's defaults (its frame
// count as asked, not rounded to what the latent decodes to).
PromptGeometry prompt_geometry_for(const GeometryRequest& request, const std::array<int64_t, 4>& latent_shape,
                                   const ModelDirectory& dir, const ModelDefaults& defaults, double fps,
                                   std::optional<bool> use_system_prompt, bool resolution_sentence = true,
                                   bool duration_sentence = true);

// Prompt texts → understanding ids with the model's tokenizer
// (text_tokenizer/tokenizer.json, tokenizer/ as fallback), loaded once on
// first use: a plain model (WordLevel, bare prompts) encodes the text and
// appends eos and <|vision_start|>; a Cosmos3 chat model builds the prompt
// as the Diffusers pipeline does (sentences, system prompt, chat template).
class PromptEncoder {
 public:
  explicit PromptEncoder(const ModelDirectory& dir) : dir_(dir) {}
  bool has_tokenizer() const { return dir_.tokenizer_path.has_value(); }

  // The conditional prefix of one prompt. A word a WordLevel vocabulary does
  // not know reads as its unk token, like any other unknown word: with
  // `warnings`, one line per such word names it and the nearest entries.
  std::vector<int64_t> encode(const std::string& text, const PromptGeometry& geometry,
                              std::vector<std::string>* warnings = nullptr);
  // Both prefixes of a CFG run: `prompt` unset when the conditional prefix is
  // given as ids (only the unconditional one is built then).
  EncodedPrompts encode_pair(const std::optional<std::string>& prompt, const std::string& negative_prompt,
                             bool with_uncond, const PromptGeometry& geometry,
                             std::vector<std::string>* warnings = nullptr);

 private:
  text::PromptModel& model();
  std::vector<int64_t> plain_prefix(const std::string& text, const char* which, std::vector<std::string>* warnings);

  const ModelDirectory& dir_;
  // Model::plan is const and may run on several threads: the first use loads
  // under the lock (the tokenizer itself is safe to share once loaded).
  std::mutex load_mutex_;
  std::optional<text::PromptModel> model_;
};

}  // namespace stepmix
