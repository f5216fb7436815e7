// The run-level API: open a Cosmos3 model directory, plan and run
// generations with per-step precision, inspect a checkpoint.
//
//   #include <stepmix/model.hpp>
//
//   stepmix::Model model = stepmix::Model::open("models/fashion-cosmos3-fp8");
//   stepmix::GenerateRequest request;
//   request.prompt = "ankle boot";
//   request.seed = 7;
//   // The outputs are declared and checked before anything is sampled.
//   stepmix::GenerationOutputs outputs(model, model.plan(request), {.out = "boot.png"});
//   stepmix::GenerateCallbacks callbacks;
//   callbacks.on_step_begin = [](const stepmix::StepEvent& e) {
//     std::printf("step %d/%d %s\n", e.step + 1, e.num_steps,
//                 std::string(stepmix::precision_trace_token(e.generation)).c_str());
//   };
//   stepmix::GenerateResult result = model.generate(request, callbacks);
//   std::printf("%s\n", stepmix::trace_string(result.trace).c_str());  // W8A16x3 / W8A8x2 / W8A16x3
//   outputs.write(result, {.prompt = "ankle boot", .seed = 7, .model = "models/fashion-cosmos3-fp8"});
//
// Every failure is a stepmix::Error whose what() is one line naming the file,
// the field and what was expected.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "stepmix/runtime.hpp"

namespace stepmix {

struct ModelOptions {
  ActivationDType activations = ActivationDType::F32;
  WeightCache weight_cache = WeightCache::None;
  // Cuda needs activations = BF16 (default_activation_dtype(Device::Cuda));
  // F32 there is refused.
  Device device = Device::Cpu;
  // Diffusers: the W8A16 weight rounding of Diffusers, SGLang and
  // TensorRT-LLM, for bit-parity tests (runtime.hpp); it changes bf16
  // activations only, so with F32 it is refused, as on a checkpoint without
  // FP8 Linears.
  W8A16Rounding w8a16_rounding = W8A16Rounding::Single;
  // CFG: the conditional and unconditional pass of a step in one batched
  // forward (each weight read once per step); the results are bit-identical
  // either way. false (or STEPMIX_CFG_BATCH=0) runs them one after the other,
  // as a request does whose batched passes would not fit in memory when one
  // at a time does (GeneratePlan::cfg_batched, and a note, say so).
  bool batch_cfg = true;
  // Scan every weight for NaN and infinities when opening (as llama.cpp's
  // --check-tensors); the first one found is an error naming the tensor.
  bool check_tensors = false;
};

// The options a BF16 reference checkpoint (bench and compare --reference)
// opens with beside an FP8 model's: the same, less what only FP8 Linears
// take (the weight cache, the W8A16 rounding), which it would refuse.
ModelOptions reference_options(ModelOptions options);

// Built-in defaults of a request (those of the Cosmos3 runtimes), used when
// neither the request nor the model's model_index.json ("stepmix":
// {"num_frames", "num_inference_steps", ...}) says. A request is an image iff
// it has one frame, else a video; the size, the step count and UniPC's flow
// shift default by that mode.
inline constexpr int kDefaultFrames = 189;  // ~7.9 s at 24 fps
inline constexpr int kDefaultVideoHeight = 720;
inline constexpr int kDefaultVideoWidth = 1280;
inline constexpr int kDefaultImageSize = 1024;  // height and width
inline constexpr int kDefaultVideoSteps = 35;
inline constexpr int kDefaultImageSteps = 50;
inline constexpr double kDefaultGuidance = 6.0;
inline constexpr double kDefaultVideoFlowShift = 10.0;
inline constexpr double kDefaultImageFlowShift = 3.0;
inline constexpr double kDefaultFps = 24.0;

// Limits of a request, checked before anything is allocated (also for
// defaults read from a model's files); kMaxSteps is stepmix/policy.hpp's.
inline constexpr double kMaxGuidance = 100.0;
inline constexpr int kMaxFrames = 4097;                   // 1 + 4·1024
inline constexpr int kMaxPixels = 16384;                  // height, width
inline constexpr int64_t kMaxVisionTokens = int64_t(1) << 20;
// Frame rates (a video's, which also spaces its frames' temporal positions:
// frame f sits base_fps/fps·f after the first).
inline constexpr double kMinFps = 0.01;
inline constexpr double kMaxFps = 1000.0;

// One generation. Unset optionals take the model's defaults, then the
// built-in ones.
struct GenerateRequest {
  // The prompt as text (needs the model's tokenizer), or the complete
  // understanding prefix as ids, used as given (ending with the end-of-text
  // and <|vision_start|> ids).
  std::optional<std::string> prompt;
  std::optional<std::vector<int64_t>> prompt_ids;
  // The unconditional pass of CFG (guidance != 1); default: empty text.
  std::optional<std::string> negative_prompt;
  std::optional<std::vector<int64_t>> negative_prompt_ids;

  // Pixels and frames, or the latent shape C,T,H,W itself.
  std::optional<int> height, width, frames;
  std::optional<std::array<int64_t, 4>> latent_shape;

  std::optional<int> steps;
  std::optional<double> guidance;
  // Initial noise: stepmix's seeded generator, or F32 values [1, C, T, H, W].
  uint64_t seed = 0;
  std::optional<std::vector<float>> noise;

  // Scheduler: the model's scheduler_config.json unless overridden.
  std::optional<std::string> scheduler;         // "unipc" | "euler"
  std::optional<double> flow_shift;
  std::optional<std::string> scheduler_config;  // a Diffusers scheduler_config.json
  // Keep a UniPC file's use_karras_sigmas true as written: the grid of
  // Diffusers' pipeline called on the checkpoint's own scheduler (as its image
  // examples do), where the flow shift has no effect; a flow_shift other than
  // 1 is then refused. Off (the runtimes' and the default): Karras is turned
  // off and the flow grid takes the request's shift.
  bool karras_sigmas = false;
  double fps = kDefaultFps;
  // Cosmos3 checkpoints: the image/video system prompt (unset: the model's
  // default_use_system_prompt, else on), and the sentences on the resolution
  // and (videos) the duration appended to the prompt (Diffusers'
  // add_resolution_template / add_duration_template).
  std::optional<bool> use_system_prompt;
  bool resolution_sentence = true;
  bool duration_sentence = true;
  // The latent kept in BF16 between steps, as the Diffusers BF16 pipeline
  // keeps it, for parity tests: the initial latent and every scheduler result
  // rounded to BF16 (its arithmetic emulated, docs/schedulers.md), the CFG
  // combination computed elementwise in BF16. stepmix's own choice (false) is
  // a float32 latent with only the transformer input rounded. Needs bf16
  // activations and the CPU.
  bool bf16_latents = false;
  // Image-to-video (models with vae/, videos only): a PNG, scaled to cover
  // the request's height × width with its aspect ratio kept and
  // centre-cropped, encoded by the VAE into latent frame 0, which is then
  // conditioned (clean): the transformer does not denoise it and its
  // velocity is zero there, so sampling leaves it as encoded.
  std::optional<std::string> image;

  // How the step policy of the checkpoint is applied (--mixed-precision ...).
  PolicyOverrides policy;
};

// What a request resolves to before any sampling: checked, with the
// precision of every step decided.
struct GeneratePlan {
  int steps = 0;
  double guidance = 1.0;
  std::array<int64_t, 4> latent_shape{};  // C, T, H, W
  bool video = false;                     // more than one frame asked for (image iff num_frames == 1)
  bool image_output = false;              // a PNG can be written: a pixel-space latent with 1 or 3
                                          // channels, or a model with vae/ (decoded)
  bool decodes = false;                   // the model has vae/: pictures and video are decoded from the latent
  std::vector<int64_t> condition_frames;  // [T]: 1 = conditioned latent frame (image-to-video), else 0
  double fps = kDefaultFps;               // the request's, for video outputs
  ResolvedPolicy policy;
  StepPlan plan;
  std::string log_line;  // "mixed_precision source=checkpoint reasoner=W8A16 generation=..."
  std::vector<int64_t> cond_ids, uncond_ids;  // uncond empty without CFG
  // The two CFG passes of a step run as one forward (ModelOptions::batch_cfg)
  // where the memory check admits it; else one at a time, with a note.
  bool cfg_batched = false;
  bool bf16_latents = false;  // GenerateRequest::bf16_latents
  // Bytes of the rendered chat texts, when a Cosmos3 prompt was built.
  std::optional<std::size_t> cond_rendered_bytes, uncond_rendered_bytes;
  // Things the user should know about this plan (one line each): notes, and
  // warnings (a prompt word the vocabulary does not know, with its nearest
  // entries).
  std::vector<std::string> notes, warnings;
  std::string scheduler;                      // e.g. "UniPCMultistepScheduler"
  double flow_shift = 1.0;                    // the shift its sigmas were made with
  bool karras_sigmas = false;                 // a Karras grid (GenerateRequest::karras_sigmas)
  std::vector<double> timesteps;
  std::vector<double> sigmas;  // the scheduler's float32 sigmas, widened
};

struct StepEvent {
  int step = 0;  // 0-based iteration
  int num_steps = 0;
  Precision generation = Precision::W8A8;
  Precision reasoner = Precision::W8A8;
};

struct GenerateCallbacks {
  // After the precision of the iteration is chosen, before its passes.
  std::function<void(const StepEvent&)> on_step_begin;
  // After the scheduler update: the latent [1, C, T, H, W] after the step.
  std::function<void(const StepEvent&, std::span<const float> latent)> on_step_end;
};

// Set from anywhere (a signal handler too): generate() stops after the
// current step and throws stepmix::Cancelled (a cancel during the last step
// lets the run finish and return its result).
class CancelToken {
 public:
  void cancel() { flag_.store(true); }
  void reset() { flag_.store(false); }
  bool cancelled() const { return flag_.load(); }
  const std::atomic<bool>& flag() const { return flag_; }

 private:
  std::atomic<bool> flag_{false};
};

class Cancelled : public Error {
 public:
  Cancelled(int steps_done, int num_steps)
      : Error("generate", "cancelled after step " + std::to_string(steps_done) + " of " + std::to_string(num_steps) +
                              "; nothing was written"),
        steps_done(steps_done) {}
  int steps_done;
};

struct GenerateResult {
  GeneratePlan plan;
  std::vector<float> latent;      // final latent [1, C, T, H, W], FP32
  std::vector<Precision> trace;   // generation precision per iteration
  Precision reasoner = Precision::W8A8;
  int transformer_calls = 0;
  double seconds = 0;  // the denoising loop
};

// What a model folder holds, as generate would run it.
struct ModelInfo {
  std::string path;             // as given
  std::string transformer_dir;  // the folder of config.json + weights
  bool has_fp8 = false;
  GovernedCounts governed;
  int64_t latent_channels = 0;
  bool pixel_space = false;  // no VAE: latents are pixels
  bool has_vae = false;      // vae/: latents decode to pictures and video
  bool has_tokenizer = false;
  std::vector<std::string> warnings;  // unknown config keys, policy warnings
  // Defaults from model_index.json ("stepmix"), when present.
  std::optional<int> default_height, default_width, default_frames, default_steps;
  std::optional<double> default_guidance;
};

// A float32 host tensor with its name.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

class VaeStage;  // the model's video VAE (private to the library)

// Threads: the const members (info, plan, encode_prompt, ...) may run on
// several threads at once; generate, forward_file and the writing of a
// model's GenerationOutputs run one at a time per model. A moved-from Model
// may only be assigned to or destroyed.
class Model {
 public:
  // A Diffusers model directory (transformer/, scheduler/, text_tokenizer/,
  // model_index.json) or a transformer folder (config.json + safetensors).
  // Weights stay memory-mapped.
  static Model open(const std::string& dir, const ModelOptions& options = {});
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelInfo& info() const;
  const ModelOptions& options() const;

  // The understanding prefix of a text prompt for the geometry and fps of
  // `request` (the model's tokenizer; Cosmos3 checkpoints build the full
  // chat prompt).
  std::vector<int64_t> encode_prompt(const std::string& text, const GenerateRequest& request) const;
  // Resolves defaults, the step policy, the latent shape, the prompt ids and
  // the timesteps; throws on anything invalid. No sampling.
  GeneratePlan plan(const GenerateRequest& request) const;
  // Runs the denoising loop of plan(request). The precision of each step is
  // set once before its passes and reset when the loop ends, also on error or
  // cancellation. A request whose estimated memory exceeds what is available
  // (MemAvailable or STEPMIX_MEMORY_LIMIT_MIB on the CPU; free device memory
  // for weights, understanding K/V and scratch on a GPU) is refused first.
  GenerateResult generate(const GenerateRequest& request, const GenerateCallbacks& callbacks = {},
                          const CancelToken* cancel = nullptr);

  // This process's resident bytes of the checkpoint's mapped weights plus any
  // dequantized weight cache (/proc/self/smaps).
  int64_t weight_bytes_resident() const;
  // Bytes of dequantized BF16 weight copies (WeightCache::All), included above.
  int64_t weight_cache_bytes() const;
  // --device cuda: the most GPU memory this process's device buffers held at
  // once since reset_device_memory_peak() (or the start); 0 on the CPU.
  int64_t device_memory_peak_bytes() const;
  void reset_device_memory_peak();
  // The safetensors files of the transformer (outputs must not replace them).
  std::vector<std::string> weight_files() const;

  // One transformer call on inputs in the golden file layout (input_ids,
  // position_ids, vision_latent, vision_timesteps, und_len[,
  // vision_condition_frame_mask]), both towers at `precision` (default: the
  // checkpoint's native one). Returns "velocity" and, with dump_hidden,
  // every intermediate tensor under its golden name.
  std::vector<NamedTensor> forward_file(const std::string& inputs_path, std::optional<Precision> precision,
                                        bool dump_hidden);

 private:
  // The model's VAE (null without vae/), for its outputs (GenerationOutputs).
  friend const VaeStage* vae_stage_of(const Model& model);
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `request` with what `plan` resolved made explicit (prompt ids, steps,
// guidance, latent shape), so that it samples the same on another model with
// other defaults (a reference checkpoint), and the flow shift it sampled
// with. The other scheduler fields, fps, seed and policy stay as they are.
GenerateRequest sampled_exactly(GenerateRequest request, const GeneratePlan& plan);

// What a generation writes. The extension of `out` decides its format:
//   .png          the image: a pixel-space latent (frames side by side), or
//                 with vae/ the decoded picture (a video's frames side by side)
//   .mp4          models with vae/: the decoded video (H.264, yuv420p, the
//                 plan's fps)
//   .safetensors  the final latent, F32 tensor "latent" [1, C, T, H, W]
// Anything else is an error naming the extension. `save_latents` is a
// .safetensors file beside a picture or video; `frames_dir` (models with
// vae/) a new folder of frame_00000.png, ... One decode feeds them all.
struct OutputRequest {
  std::optional<std::string> out;
  std::optional<std::string> save_latents;
  std::optional<std::string> frames_dir;
};

// What is recorded with an output: a PNG's "parameters" and "stepmix" text
// chunks, and `generate --json`.
struct OutputMetadata {
  std::string prompt;           // as given (ids written "ids:1,2,3")
  std::string negative_prompt;
  uint64_t seed = 0;
  std::string model;            // the model folder as given
};

// The files of one generation, declared and checked against every rule
// (io/output_set.hpp: no directory, FIFO or device replaced, no output that
// is an input such as the checkpoint's own files or the noise file, the
// folder exists and is writable) before any sampling, then staged under
// unpredictable temporary names and committed together: on a failure or a
// signal nothing new is visible. write() takes a result whose latent has the
// shape of the plan they were made for, every value of it. A moved-from
// GenerationOutputs may only be assigned to or destroyed.
class GenerationOutputs {
 public:
  // Validates now; `inputs` are further files that must not be overwritten
  // (the noise file). With vae/, also estimates the memory the decode needs
  // against what is available. Throws stepmix::Error naming the option and
  // the path. `model` must outlive the outputs (it decodes them).
  GenerationOutputs(const Model& model, const GeneratePlan& plan, const OutputRequest& request,
                    const std::vector<std::string>& inputs = {});
  ~GenerationOutputs();
  GenerationOutputs(GenerationOutputs&&) noexcept;
  GenerationOutputs& operator=(GenerationOutputs&&) noexcept;

  // The paths that will be written, for messages.
  const std::optional<std::string>& image() const;
  const std::optional<std::string>& video() const;
  const std::optional<std::string>& frames_dir() const;
  const std::optional<std::string>& latents() const;

  // Checks the result is finite, decodes (models with vae/, reporting
  // (done, total) latent frames to `on_decode`), encodes, stages and commits
  // every output.
  void write(const GenerateResult& result, const OutputMetadata& metadata,
             const std::function<void(int64_t done, int64_t total)>& on_decode = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The text chunks of a PNG (tEXt, zTXt, iTXt), keyword → text, in file order.
std::vector<std::pair<std::string, std::string>> read_png_metadata(const std::string& path);

// An F32 safetensors output (forward's --out), checked when made: a
// .safetensors name (or a character device), not one of `inputs` ({option,
// path}: files, or folders whose files it must not replace). write() stages
// it under a temporary name and renames it into place.
class TensorsOutput {
 public:
  TensorsOutput(const std::string& path, const std::vector<std::pair<std::string, std::string>>& inputs);
  ~TensorsOutput();
  void write(const std::vector<NamedTensor>& tensors);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// "[1, 4, 1, 6, 8]"
std::string shape_string(const std::vector<int64_t>& shape);

// F32 tensor `noise` [1, C, T, H, W] from a safetensors file, checked against
// the shape.
std::vector<float> read_noise_file(const std::string& path, const std::array<int64_t, 4>& latent_shape);

// "1,2,3" → ids; throws naming `option` on anything else.
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& option);

// Removes a run's temporary output files and folders when a fatal signal
// (SIGTERM, SIGHUP, SIGQUIT, SIGINT) ends the process; call once at start-up,
// before any thread exists.
void remove_temporary_outputs_on_fatal_signals();

// `stepmix inspect`: what a checkpoint holds and how its policy resolves for
// `steps` steps (default: what generate runs without --steps). Makes every
// load-time check a run makes and reads every transformer weight once (no
// NaN or Inf); the VAE is checked from its headers.
struct InspectReport {
  std::string text;                  // the human-readable summary
  std::string json;                  // one JSON object (--json)
  std::vector<std::string> warnings;
};
InspectReport inspect(const std::string& dir, const PolicyOverrides& overrides, std::optional<int> steps);

}  // namespace stepmix
