// `stepmix generate`: prompt (and, for image-to-video, a picture) -> denoising
// loop with one precision per step -> PNG / MP4 / PNG frames (decoded by the
// model's VAE, or pixel-space latents) and/or the final latent. Prints the
// trace.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "options.hpp"

namespace stepmix::cli {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct GenerateOptions {
  std::string model_dir;
  RequestOptions request;
  std::optional<uint64_t> seed;
  std::optional<std::string> noise_file;
  std::optional<std::string> out, save_latents, frames_dir, image;
  bool no_decode = false;
  bool json_output = false;
  RuntimeOptions runtime;
  PolicyOptions policy;
};

// Step, it/s, ETA and precision on stderr, redrawn in place.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void on_step_begin(const StepEvent& e) {
    if (!enabled_) return;
    const double elapsed = seconds();
    const double rate = e.step > 0 ? e.step / elapsed : 0;
    const double eta = rate > 0 ? (e.num_steps - e.step) / rate : 0;
    const int width = 30, filled = e.num_steps ? width * e.step / e.num_steps : 0;
    std::fprintf(stderr, "\r[%s%s] step %d/%d  %.2f it/s  ETA %.0fs  %s   ", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), e.step + 1, e.num_steps, rate, eta,
                 std::string(precision_trace_token(e.generation)).c_str());
  }
  // After each decoded latent frame, on the same line.
  void on_decode(int64_t done, int64_t total) {
    if (!enabled_) return;
    const int width = 30, filled = total ? int(width * done / total) : 0;
    std::fprintf(stderr, "\r[%s%s] decode %lld/%lld latent frames                ", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), (long long)done, (long long)total);
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
  const ModelOptions model_options = opt.runtime.model_options();
  GenerateRequest request = opt.request.to_request();
  request.policy = opt.policy.overrides();
  if (opt.noise_file && opt.seed) throw Error("generate", "give --seed or --noise, not both");
  request.seed = opt.seed.value_or(0);
  request.image = opt.image;
  if (opt.no_decode && (opt.out || opt.frames_dir))
    throw Error("generate", "--no-decode stops at the latent: give --save-latents FILE instead of --out/--frames-dir");
  if (opt.no_decode && !opt.save_latents) throw Error("generate", "--no-decode: give --save-latents FILE");

  Model model = Model::open(opt.model_dir, model_options);
  for (const auto& w : model.info().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const GeneratePlan plan = model.plan(request);
  if (opt.noise_file) request.noise = read_noise_file(*opt.noise_file, plan.latent_shape);

  // Decide every output path before the loop, so bad options (and a decode
  // that would not fit in memory) fail early.
  OutputPaths outputs;
  outputs.latents = opt.save_latents;
  outputs.frames_dir = opt.frames_dir;
  if (opt.out) {
    std::string ext = fs::path(*opt.out).extension().string();
    for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".mp4") {  // refused by check_outputs on a model without vae/
      outputs.video = opt.out;
    } else if (plan.image_output) {
      outputs.image = opt.out;
    } else if (!outputs.latents) {
      outputs.latents = fs::path(*opt.out).replace_extension(".safetensors").string();
      std::fprintf(stderr, "note: %s has latents that need a VAE decoder and no vae/; writing the latent to %s\n",
                   opt.model_dir.c_str(), outputs.latents->c_str());
    }
  }
  model.check_outputs(plan, outputs);

  ProgressBar progress(isatty(STDERR_FILENO) && !opt.json_output);
  GenerateCallbacks callbacks;
  callbacks.on_step_begin = [&](const StepEvent& e) { progress.on_step_begin(e); };
  CancelToken cancel;
  GenerateResult result;
  try {
    with_ctrl_c_cancelling(cancel, [&] { result = model.generate(request, callbacks, &cancel); });
  } catch (...) {
    progress.finish();
    throw;
  }
  const double seconds = progress.seconds();
  try {
    model.write_outputs(result, outputs, [&](int64_t done, int64_t total) { progress.on_decode(done, total); });
  } catch (...) {
    progress.finish();
    throw;
  }
  progress.finish();

  const std::string trace = trace_string(result.trace);
  const auto [C, T, H, W] = plan.latent_shape;
  if (opt.json_output) {
    json out;
    out["trace"] = trace;
    json steps = json::array();
    for (Precision p : result.trace) steps.push_back(std::string(precision_json_name(p)));
    out["plan"] = steps;
    out["steps"] = plan.steps;
    out["seconds"] = seconds;
    out["source"] = plan.policy.source;
    out["reasoner"] = std::string(precision_json_name(result.reasoner));
    out["scheduler"] = plan.scheduler;
    out["timesteps"] = plan.timesteps;
    out["guidance"] = plan.guidance;
    out["latent_shape"] = {1, C, T, H, W};
    out["transformer_calls"] = result.transformer_calls;
    out["activations"] = opt.runtime.activations;
    out["weight_cache"] = opt.runtime.weight_cache;
    auto path_or_null = [](const std::optional<std::string>& p) { return p ? json(*p) : json(); };
    out["outputs"] = {{"image", path_or_null(outputs.image)},
                      {"video", path_or_null(outputs.video)},
                      {"frames_dir", path_or_null(outputs.frames_dir)},
                      {"latents", path_or_null(outputs.latents)}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%s\n", plan.log_line.c_str());
  if (outputs.image) std::printf("image: %s\n", outputs.image->c_str());
  if (outputs.video) std::printf("video: %s\n", outputs.video->c_str());
  if (outputs.frames_dir) std::printf("frames: %s\n", outputs.frames_dir->c_str());
  if (outputs.latents) std::printf("latents: %s\n", outputs.latents->c_str());
  std::printf("trace: %s\n", trace.c_str());
  std::printf("elapsed: %.2f s (%d steps, %d transformer calls)\n", seconds, plan.steps, result.transformer_calls);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate an image (or latents) with per-step precision");
  // A later occurrence of an option wins, so scripts can append overrides.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--model", opt->model_dir, "Diffusers model directory")->required();
  add_request_options(*cmd, opt->request, kPromptText | kNegativePrompt | kGeometry | kSampling | kScheduler |
                                              kSchedulerConfig | kFps);
  cmd->add_option("--seed", opt->seed, "Seed of the initial noise (default 0)");
  cmd->add_option("--noise", opt->noise_file, "Initial noise: F32 tensor 'noise' [1,C,T,H,W]");
  cmd->add_option("--out", opt->out,
                  "Output .png (an image, or a video's frames side by side) or, for models with vae/, .mp4 "
                  "(H.264 at --fps)");
  cmd->add_option("--frames-dir", opt->frames_dir, "Models with vae/: also every frame as DIR/frame_00000.png, ... (a new folder)");
  cmd->add_option("--save-latents", opt->save_latents, "Write the final latent (F32 'latent' [1,C,T,H,W])");
  cmd->add_flag("--no-decode", opt->no_decode, "Stop at the latent (with --save-latents); no VAE decode");
  cmd->add_option("--image", opt->image,
                  "Image-to-video (models with vae/): a PNG, scaled to cover --height x --width and centre-cropped, "
                  "as latent frame 0");
  cmd->add_flag("--json", opt->json_output, "Print one JSON object");
  add_runtime_options(*cmd, opt->runtime);
  add_policy_options(*cmd, opt->policy);
  cmd->callback([opt] { run_generate(*opt); });
}

}  // namespace stepmix::cli
