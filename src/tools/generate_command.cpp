// `stepmix generate`: prompt (and, for image-to-video, a picture) -> denoising
// loop with one precision per step -> PNG / MP4 / PNG frames (decoded by the
// model's VAE, or a pixel-space latent) and/or the final latent. Prints the plan before
// sampling and the trace after; --batch-count N runs seeds s, s+1, ... with
// one model load.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "commands.hpp"
#include "options.hpp"
#include "stepmix/tools.hpp"

namespace stepmix::cli {
namespace {

using json = nlohmann::json;

struct GenerateOptions {
  std::string model_dir;
  RequestOptions request;
  std::optional<std::string> seed;  // -1: draw one
  std::optional<std::string> noise_file;
  std::optional<std::string> out, save_latents, frames_dir, image;
  bool no_decode = false;
  int batch_count = 1;
  bool no_system_prompt = false, system_prompt = false;
  bool no_resolution_sentence = false, no_duration_sentence = false;
  bool bf16_latents = false;
  bool json_output = false;
  RuntimeOptions runtime;
  PolicyOptions policy;
};

// "-1" draws a seed; otherwise an integer in [0, 2^64).
uint64_t resolve_seed(const std::optional<std::string>& text, bool& drawn) {
  drawn = false;
  if (!text) return 0;
  if (*text == "-1") {
    drawn = true;
    std::random_device device;
    // Below 2^63, so that a batch's seeds s ... s+N-1 never wrap.
    return ((uint64_t(device()) << 32) ^ device()) >> 1;
  }
  const auto bad = [&] {
    return Error("generate", "--seed: expected an integer in [0, 18446744073709551615] or -1 (a random seed), got '" +
                                 *text + "'");
  };
  if (text->empty() || text->size() > 20 || text->find_first_not_of("0123456789") != std::string::npos) throw bad();
  unsigned long long v = 0;
  try {
    std::size_t used = 0;
    v = std::stoull(*text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  return uint64_t(v);
}

// `pattern` with %d replaced by the image's index (the only placeholder).
std::optional<std::string> output_name(const std::optional<std::string>& pattern, int index, int count,
                                       const char* option) {
  if (!pattern) return std::nullopt;
  const std::size_t at = pattern->find("%d");
  if (at == std::string::npos) {
    if (count > 1)
      throw Error("generate", std::string(option) + " " + *pattern + ": with --batch-count " + std::to_string(count) +
                                  " the name needs %d (replaced by 0.." + std::to_string(count - 1) + ")");
    return pattern;
  }
  if (pattern->find('%', at + 2) != std::string::npos)
    throw Error("generate", std::string(option) + " " + *pattern + ": %d is the only placeholder");
  return pattern->substr(0, at) + std::to_string(index) + pattern->substr(at + 2);
}

// Step, it/s, ETA and precision on stderr, redrawn in place; "ETA --" until
// a step has finished, full when the last one has.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  void start() { start_ = std::chrono::steady_clock::now(); }
  void draw(int done, int num_steps, Precision precision) const {
    if (!enabled_) return;
    const double elapsed = seconds();
    const int width = 30, filled = num_steps ? width * done / num_steps : 0;
    char eta[32] = "--";
    if (done > 0) std::snprintf(eta, sizeof eta, "%.0fs", elapsed / done * (num_steps - done));
    std::fprintf(stderr, "\r[%s%s] step %d/%d  %.2f it/s  ETA %s  %s   ", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), std::min(done + 1, num_steps), num_steps,
                 done > 0 ? done / elapsed : 0.0, eta, std::string(precision_trace_token(precision)).c_str());
  }
  // After each decoded latent frame, on the same line.
  void draw_decode(int64_t done, int64_t total) const {
    if (!enabled_) return;
    const int width = 30, filled = total ? int(width * done / total) : 0;
    std::fprintf(stderr, "\r[%s%s] decode %lld/%lld latent frames              ", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), (long long)done, (long long)total);
  }
  void finish() const {
    if (enabled_) std::fprintf(stderr, "\r%80s\r", "");
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::string prompt_text(const GenerateRequest& r) {
  if (r.prompt) return *r.prompt;
  std::string s = "ids:";
  for (std::size_t i = 0; i < r.prompt_ids->size(); ++i) s += (i ? "," : "") + std::to_string((*r.prompt_ids)[i]);
  return s;
}

std::string negative_text(const GenerateRequest& r) {
  if (!r.negative_prompt_ids) return r.negative_prompt.value_or("");
  std::string s = "ids:";
  for (std::size_t i = 0; i < r.negative_prompt_ids->size(); ++i)
    s += (i ? "," : "") + std::to_string((*r.negative_prompt_ids)[i]);
  return s;
}

// The option combinations that need no model, checked before it loads.
void check_generate_options(const GenerateOptions& opt) {
  if (opt.noise_file && opt.seed) throw Error("generate", "give --seed or --noise, not both");
  if (opt.batch_count < 1 || opt.batch_count > 1000)
    throw Error("generate", "--batch-count: expected an integer in [1, 1000], got " + std::to_string(opt.batch_count));
  if (opt.noise_file && opt.batch_count > 1)
    throw Error("generate", "--noise gives one initial latent; --batch-count needs seeds");
  if (opt.no_decode && (opt.out || opt.frames_dir))
    throw Error("generate", "--no-decode stops at the latent: give --save-latents FILE instead of --out/--frames-dir");
  if (opt.no_decode && !opt.save_latents) throw Error("generate", "--no-decode: give --save-latents FILE");
}

// One generation as --json prints it: the plan, the trace, the request and
// the files written.
json generation_json(const GenerateOptions& opt, ActivationDType activations, const GeneratePlan& plan,
                     const GenerateRequest& request, const GenerateResult& result, const OutputMetadata& meta,
                     const GenerationOutputs& o, double seconds, bool drawn) {
  const auto [C, T, H, W] = plan.latent_shape;
  json out;
  out["trace"] = trace_string(result.trace);
  json steps = json::array();
  for (Precision p : result.trace) steps.push_back(std::string(precision_json_name(p)));
  out["plan"] = steps;
  out["steps"] = plan.steps;
  out["seconds"] = seconds;
  out["source"] = plan.policy.source;
  out["reasoner"] = std::string(precision_json_name(result.reasoner));
  out["scheduler"] = plan.scheduler;
  out["flow_shift"] = plan.flow_shift;
  out["karras_sigmas"] = plan.karras_sigmas;
  out["timesteps"] = plan.timesteps;
  out["guidance"] = plan.guidance;
  out["latent_shape"] = {1, C, T, H, W};
  out["transformer_calls"] = result.transformer_calls;
  out["cfg_batched"] = plan.cfg_batched;
  out["activations"] = std::string(activation_dtype_name(activations));
  out["weight_cache"] = opt.runtime.weight_cache;
  out["w8a16_rounding"] = opt.runtime.w8a16_rounding;
  out["bf16_latents"] = plan.bf16_latents;
  out["prompt"] = meta.prompt;
  out["negative_prompt"] = meta.negative_prompt;
  out["prompt_ids"] = plan.cond_ids.size();
  out["negative_prompt_ids"] = plan.uncond_ids.size();
  out["prompt_rendered_bytes"] = plan.cond_rendered_bytes ? json(*plan.cond_rendered_bytes) : json();
  out["negative_prompt_rendered_bytes"] = plan.uncond_rendered_bytes ? json(*plan.uncond_rendered_bytes) : json();
  out["seed"] = opt.noise_file ? json() : json(request.seed);
  out["seed_drawn"] = drawn;
  out["noise"] = opt.noise_file ? json(*opt.noise_file) : json();
  out["model"] = opt.model_dir;
  out["version"] = std::string("stepmix ") + STEPMIX_VERSION;
  const auto path_or_null = [](const std::optional<std::string>& path) { return path ? json(*path) : json(); };
  out["outputs"] = {{"image", path_or_null(o.image())},
                    {"video", path_or_null(o.video())},
                    {"frames_dir", path_or_null(o.frames_dir())},
                    {"latents", path_or_null(o.latents())}};
  return out;
}

void run_generate(const GenerateOptions& opt, bool fps_given) {
  const ModelOptions model_options = opt.runtime.model_options();
  GenerateRequest request = opt.request.to_request("generate");
  request.policy = opt.policy.overrides();
  if (opt.no_system_prompt) request.use_system_prompt = false;
  if (opt.system_prompt) request.use_system_prompt = true;
  request.resolution_sentence = !opt.no_resolution_sentence;
  request.duration_sentence = !opt.no_duration_sentence;
  request.bf16_latents = opt.bf16_latents;
  check_generate_options(opt);
  request.image = opt.image;
  bool drawn = false;
  const uint64_t first_seed = resolve_seed(opt.seed, drawn);
  if (first_seed > UINT64_MAX - uint64_t(opt.batch_count - 1))
    throw Error("generate", "--seed " + std::to_string(first_seed) + " with --batch-count " +
                                std::to_string(opt.batch_count) + ": the seeds s ... s+N-1 pass 18446744073709551615");

  Model model = Model::open(opt.model_dir, model_options);
  for (const auto& w : model.info().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const GeneratePlan plan = model.plan(request);
  // An image (one frame) has no duration sentence, no frame-rate modulation
  // and no video container, so a --fps would change nothing.
  const bool mp4_out = opt.out && is_video_output(*opt.out);
  if (fps_given && !plan.video && !mp4_out)
    throw Error("generate",
                "--fps: an image (--frames 1) has no frame rate, so it would be ignored; it "
                "applies to videos (--frames 2 or more)");
  if (opt.no_decode && !plan.decodes)
    throw Error("generate", "--no-decode: " + opt.model_dir + " has no vae/, so nothing would be decoded; drop it");
  for (const auto& note : plan.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  for (const auto& w : plan.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (opt.noise_file) request.noise = read_noise_file(*opt.noise_file, plan.latent_shape);

  // Every output of every image is checked before the first step.
  std::vector<GenerationOutputs> outputs;
  std::vector<std::string> inputs;
  if (opt.noise_file) inputs.push_back(*opt.noise_file);
  for (int i = 0; i < opt.batch_count; ++i)
    outputs.emplace_back(model, plan,
                         OutputRequest{output_name(opt.out, i, opt.batch_count, "--out"),
                                       output_name(opt.save_latents, i, opt.batch_count, "--save-latents"),
                                       output_name(opt.frames_dir, i, opt.batch_count, "--frames-dir")},
                         inputs);

  if (!opt.json_output) {
    std::printf("%s\n", plan.log_line.c_str());
    if (drawn) std::printf("seed: %llu (drawn; --seed %llu repeats the run)\n", (unsigned long long)first_seed,
                           (unsigned long long)first_seed);
    std::fflush(stdout);
  }
  json images = json::array();
  ProgressBar progress(isatty(STDERR_FILENO) && !opt.json_output);
  double total_seconds = 0;
  for (int i = 0; i < opt.batch_count; ++i) {
    request.seed = first_seed + uint64_t(i);
    GenerateCallbacks callbacks;
    callbacks.on_step_begin = [&](const StepEvent& e) { progress.draw(e.step, e.num_steps, e.generation); };
    callbacks.on_step_end = [&](const StepEvent& e, std::span<const float>) {
      progress.draw(e.step + 1, e.num_steps, e.generation);
    };
    CancelToken cancel;
    GenerateResult result;
    progress.start();
    try {
      with_ctrl_c_cancelling(cancel, [&] { result = model.generate(request, callbacks, &cancel); });
    } catch (...) {
      progress.finish();
      throw;
    }
    const double seconds = progress.seconds();
    total_seconds += seconds;
    const OutputMetadata meta{prompt_text(request), negative_text(request), request.seed, opt.model_dir};
    try {
      outputs[std::size_t(i)].write(result, meta,
                                    [&](int64_t done, int64_t total) { progress.draw_decode(done, total); });
    } catch (...) {
      progress.finish();
      throw;
    }
    progress.finish();

    const GenerationOutputs& o = outputs[std::size_t(i)];
    if (opt.json_output) {
      images.push_back(generation_json(opt, model_options.activations, plan, request, result, meta, o, seconds, drawn));
      continue;
    }
    if (opt.batch_count > 1) std::printf("image %d: seed %llu\n", i, (unsigned long long)request.seed);
    if (o.image()) std::printf("image: %s\n", o.image()->c_str());
    if (o.video()) std::printf("video: %s\n", o.video()->c_str());
    if (o.frames_dir()) std::printf("frames: %s\n", o.frames_dir()->c_str());
    if (o.latents()) std::printf("latents: %s\n", o.latents()->c_str());
    std::printf("trace: %s\n", trace_string(result.trace).c_str());
    std::printf("elapsed: %.2f s (%d steps, %d transformer calls)\n", seconds, plan.steps, result.transformer_calls);
  }
  if (opt.json_output)
    std::cout << (opt.batch_count == 1 ? images[0] : images).dump(2, ' ', false, json::error_handler_t::replace)
              << "\n";
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate an image or a video (or latents) with per-step precision");
  cmd->add_option("-m,--model", opt->model_dir, "Diffusers model directory")->required();
  add_request_options(*cmd, opt->request, kPromptText | kNegativePrompt | kGeometry | kSampling | kScheduler |
                                              kSchedulerConfig | kFps);
  cmd->add_flag("--bf16-latents", opt->bf16_latents,
                "Keep the latent in BF16 between steps, as the Diffusers BF16 pipeline does (parity tests; needs "
                "--activations bf16 and --device cpu)");
  CLI::Option* no_system =
      cmd->add_flag("--no-system-prompt", opt->no_system_prompt,
                    "Cosmos3 checkpoints: no image/video system prompt (default: model_index.json's "
                    "default_use_system_prompt, else on)");
  cmd->add_flag("--system-prompt", opt->system_prompt,
                "Cosmos3 checkpoints: the image/video system prompt even where model_index.json's "
                "default_use_system_prompt is false")
      ->excludes(no_system);
  cmd->add_flag("--no-resolution-sentence", opt->no_resolution_sentence,
                "Cosmos3 checkpoints: leave out the sentence on the resolution appended to the prompt");
  cmd->add_flag("--no-duration-sentence", opt->no_duration_sentence,
                "Cosmos3 checkpoints: leave out the sentence on the duration appended to a video's prompt");
  cmd->add_option("-s,--seed", opt->seed, "Seed of the initial noise: 0..2^64-1, or -1 for a random one (default 0)")->check(non_empty());
  cmd->add_option("--noise", opt->noise_file, "Initial noise: F32 tensor 'noise' [1,C,T,H,W] (instead of --seed)");
  cmd->add_option("-b,--batch-count", opt->batch_count,
                  "Images with seeds s, s+1, ... (--out, --save-latents and --frames-dir need %d)")
      ->default_val(1)
      ->check(non_empty());
  cmd->add_option("-o,--out", opt->out,
                  "Output: .png (an image, or a video's frames side by side; decoded by the model's vae/ or a "
                  "pixel-space latent), .mp4 (models with vae/: H.264 at --fps) or .safetensors (the latent); %d = "
                  "image index with --batch-count");
  cmd->add_option("--frames-dir", opt->frames_dir, "Models with vae/: also every frame as DIR/frame_00000.png, ... (a new folder)");
  cmd->add_option("--save-latents", opt->save_latents, "Also write the final latent (.safetensors, F32 'latent')");
  cmd->add_flag("--no-decode", opt->no_decode, "Stop at the latent (with --save-latents): no VAE decode");
  cmd->add_option("--image", opt->image,
                  "Image-to-video (models with vae/): a PNG, scaled to cover --height x --width and centre-cropped, "
                  "as latent frame 0")->check(non_empty());
  cmd->add_flag("--json", opt->json_output, "Print one JSON object (an array with --batch-count)");
  add_runtime_options(*cmd, opt->runtime);
  add_policy_options(*cmd, opt->policy);
  CLI::Option* fps = cmd->get_option("--fps");
  cmd->callback([opt, fps] { run_generate(*opt, fps->count() > 0); });
}

}  // namespace stepmix::cli
