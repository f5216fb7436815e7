// `stepmix generate`: prompt -> denoising loop with one precision per step ->
// PNG (pixel-space models) and/or the final latent. Prints the trace.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/checkpoint.hpp"
#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "model/transformer.hpp"
#include "pipeline/denoise.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/noise.hpp"
#include "sched/config.hpp"
#include "tools/commands.hpp"
#include "tools/policy_options.hpp"
#include "tools/runtime_options.hpp"

namespace stepmix::cli {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct GenerateOptions {
  std::string model_dir;
  std::optional<std::string> prompt, prompt_ids, negative_prompt, negative_prompt_ids;
  std::optional<int> height, width, frames;
  std::optional<std::string> latent_shape;
  std::optional<int> steps;
  std::optional<double> guidance;
  std::optional<uint64_t> seed;
  std::optional<std::string> noise_file;
  std::optional<std::string> scheduler;
  std::optional<double> flow_shift;
  std::optional<std::string> scheduler_config;
  double fps = 24.0;
  std::optional<std::string> out, save_latents;
  bool json_output = false;
  RuntimeOptions runtime;
  PolicyOptions policy;
};

std::atomic<bool> g_cancel{false};
extern "C" void on_sigint(int) {
  g_cancel = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

Image8 latent_to_image(const std::vector<float>& latent, const std::array<int64_t, 4>& shape) {
  const auto [C, T, H, W] = shape;
  // Frames side by side; channel c of frame t at latent[c][t][h][w].
  Image8 img{int(W * T), int(H), C == 3 ? 3 : 1, {}};
  img.pixels.resize(std::size_t(img.width) * img.height * img.channels);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t c = 0; c < img.channels; ++c)
          img.pixels[((h * img.width) + t * W + w) * img.channels + c] =
              unit_range_to_u8(latent[((c * T + t) * H + h) * W + w]);
  return img;
}

class ProgressBar : public DenoiseObserver {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void on_step_begin(int step, int num_steps, Precision generation, Precision) override {
    if (!enabled_) return;
    const double elapsed = seconds();
    const double rate = step > 0 ? step / elapsed : 0;
    const double eta = rate > 0 ? (num_steps - step) / rate : 0;
    const int width = 30, filled = num_steps ? width * step / num_steps : 0;
    std::fprintf(stderr, "\r[%s%s] step %d/%d  %.2f it/s  ETA %.0fs  %s   ", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), step + 1, num_steps, rate, eta,
                 std::string(precision_trace_token(generation)).c_str());
  }
  void finish() {
    if (enabled_) std::fprintf(stderr, "\r%80s\r", "");
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

void run_generate(const GenerateOptions& opt) {
  const ModelDirectory dir = ModelDirectory::open(opt.model_dir);
  const ModelDefaults defaults = read_model_defaults(dir);
  const PolicyOverrides overrides = opt.policy.overrides();
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, overrides);
  for (const auto& w : policy.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());

  const int steps = opt.steps ? *opt.steps : defaults.steps.value_or(35);
  const double guidance = opt.guidance ? *opt.guidance : defaults.guidance.value_or(6.0);
  if (steps < 1) throw Error("generate", "--steps: expected an integer >= 1, got " + std::to_string(steps));
  if (opt.prompt && opt.prompt_ids) throw Error("generate", "give --prompt or --prompt-ids, not both");
  if (!opt.prompt && !opt.prompt_ids) throw Error("generate", "a prompt is required: --prompt TEXT or --prompt-ids 1,2,3");
  if (opt.negative_prompt && opt.negative_prompt_ids)
    throw Error("generate", "give --negative-prompt or --negative-prompt-ids, not both");
  if (opt.noise_file && opt.seed) throw Error("generate", "give --seed or --noise, not both");

  opt.runtime.validate("generate");
  Cosmos3Transformer transformer = opt.runtime.load(dir);
  check_governed_counts(policy, transformer.governed_counts(), dir.transformer_dir);
  StepController controller(plan_steps(policy, transformer.has_fp8(), steps));

  const auto shape = latent_shape_for({opt.latent_shape, opt.height, opt.width, opt.frames}, dir,
                                      transformer.config().latent_channel, defaults);
  const auto [C, T, H, W] = shape;
  PromptEncoder encoder(dir);
  DenoiseRequest request;
  request.latent_shape = shape;
  request.fps = opt.fps;
  request.guidance = guidance;
  request.cond_ids = opt.prompt_ids ? parse_id_list(*opt.prompt_ids, "--prompt-ids") : encoder.encode(*opt.prompt);
  if (guidance != 1.0)
    request.uncond_ids = opt.negative_prompt_ids ? parse_id_list(*opt.negative_prompt_ids, "--negative-prompt-ids")
                                                 : encoder.encode(opt.negative_prompt.value_or(""));
  if (opt.noise_file) {
    const auto f = SafetensorsFile::open(*opt.noise_file);
    const TensorView& noise = f->get("noise");
    if (noise.dtype != DType::F32 || noise.shape != std::vector<int64_t>{1, C, T, H, W})
      throw Error("generate", *opt.noise_file + ": tensor 'noise' must be F32 " +
                                  shape_to_string({1, C, T, H, W}) + ", got " + std::string(dtype_name(noise.dtype)) +
                                  " " + shape_to_string(noise.shape));
    request.noise.assign(noise.as<float>(), noise.as<float>() + noise.numel());
  } else {
    request.noise = NormalGenerator(opt.seed.value_or(0)).normals(std::size_t(C * T * H * W));
  }
  auto scheduler =
      sched::make_scheduler(scheduler_config_for({opt.scheduler_config, opt.scheduler, opt.flow_shift}, dir, T > 1));
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);

  // Decide every output path before the loop, so bad options fail early.
  const bool pixels = is_pixel_space(dir) && (C == 1 || C == 3);
  std::optional<std::string> png_path, latent_path = opt.save_latents;
  if (opt.out) {
    if (pixels) {
      png_path = opt.out;
    } else if (!latent_path) {
      latent_path = fs::path(*opt.out).replace_extension(".safetensors").string();
      std::fprintf(stderr, "note: %s has latents that need a VAE decoder, which stepmix does not have yet; "
                           "writing the latent to %s\n", opt.model_dir.c_str(), latent_path->c_str());
    }
  }

  g_cancel = false;
  auto previous = std::signal(SIGINT, on_sigint);
  ProgressBar progress(isatty(STDERR_FILENO) && !opt.json_output);
  DenoiseResult result;
  try {
    result = denoise(transformer, *scheduler, controller, request, settings, &progress, &g_cancel);
  } catch (...) {
    std::signal(SIGINT, previous);
    progress.finish();
    throw;
  }
  std::signal(SIGINT, previous);
  progress.finish();
  const double seconds = progress.seconds();

  if (png_path) write_png(*png_path, latent_to_image(result.latent, shape));
  if (latent_path) write_safetensors(*latent_path, {make_tensor_f32("latent", {1, C, T, H, W}, result.latent)});

  const std::string trace = trace_string(result.trace);
  if (opt.json_output) {
    json out;
    out["trace"] = trace;
    json plan = json::array();
    for (Precision p : result.trace) plan.push_back(std::string(precision_json_name(p)));
    out["plan"] = plan;
    out["steps"] = steps;
    out["seconds"] = seconds;
    out["source"] = policy.source;
    out["reasoner"] = std::string(precision_json_name(result.reasoner));
    out["scheduler"] = scheduler->name();
    out["timesteps"] = scheduler->timesteps();
    out["guidance"] = guidance;
    out["latent_shape"] = {1, C, T, H, W};
    out["transformer_calls"] = result.transformer_calls;
    out["activations"] = opt.runtime.activations;
    out["weight_cache"] = opt.runtime.weight_cache;
    out["outputs"] = {{"image", png_path ? json(*png_path) : json()}, {"latents", latent_path ? json(*latent_path) : json()}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%s\n", mixed_precision_log_line(policy, controller.plan()).c_str());
  if (png_path) std::printf("image: %s\n", png_path->c_str());
  if (latent_path) std::printf("latents: %s\n", latent_path->c_str());
  std::printf("trace: %s\n", trace.c_str());
  std::printf("elapsed: %.2f s (%d steps, %d transformer calls)\n", seconds, steps, result.transformer_calls);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate an image (or latents) with per-step precision");
  // A later occurrence of an option wins, so scripts can append overrides.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--model", opt->model_dir, "Diffusers model directory")->required();
  cmd->add_option("--prompt", opt->prompt, "Text prompt (needs text_tokenizer/tokenizer.json)");
  cmd->add_option("--prompt-ids", opt->prompt_ids, "Complete understanding prefix as ids, used as given: 1,2,3");
  cmd->add_option("--negative-prompt", opt->negative_prompt, "Unconditional prompt text (default: empty)");
  cmd->add_option("--negative-prompt-ids", opt->negative_prompt_ids, "Unconditional prefix as ids");
  cmd->add_option("--height", opt->height, "Image height in pixels");
  cmd->add_option("--width", opt->width, "Image width in pixels");
  cmd->add_option("--frames", opt->frames, "Number of frames (1 = image)");
  cmd->add_option("--latent-shape", opt->latent_shape, "Latent shape C,T,H,W (instead of height/width/frames)");
  cmd->add_option("--steps", opt->steps, "Denoising steps (default: the model's, else 35)");
  cmd->add_option("--guidance", opt->guidance, "Classifier-free guidance scale (1 = off)");
  cmd->add_option("--seed", opt->seed, "Seed of the initial noise (default 0)");
  cmd->add_option("--noise", opt->noise_file, "Initial noise: F32 tensor 'noise' [1,C,T,H,W]");
  cmd->add_option("--scheduler", opt->scheduler, "unipc or euler (default: the model's scheduler_config.json)");
  cmd->add_option("--flow-shift", opt->flow_shift, "Flow shift of the sigma schedule");
  cmd->add_option("--scheduler-config", opt->scheduler_config, "A Diffusers scheduler_config.json");
  cmd->add_option("--fps", opt->fps, "Frames per second (videos)")->default_val(24.0);
  cmd->add_option("--out", opt->out, "Output PNG (pixel-space models)");
  cmd->add_option("--save-latents", opt->save_latents, "Write the final latent (F32 'latent' [1,C,T,H,W])");
  cmd->add_flag("--json", opt->json_output, "Print one JSON object");
  add_runtime_options(*cmd, opt->runtime);
  add_policy_options(*cmd, opt->policy);
  cmd->callback([opt] { run_generate(*opt); });
}

}  // namespace stepmix::cli
