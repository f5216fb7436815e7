// `stepmix compare`: the same prompts and seeds under a reference and under
// each precision mode of an FP8 checkpoint (W8A16 everywhere, W8A8
// everywhere, the mixed schedule, extra --policy windows), measured against
// the reference: pooled and paired image metrics, the per-step latent error,
// classifier accuracy, pictures. Everything goes to a temporary folder that is
// renamed to --out at the end, so an interrupted run leaves nothing behind.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>

#include "io/checkpoint.hpp"
#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "io/temporary_outputs.hpp"
#include "model/transformer.hpp"
#include "pipeline/classifier.hpp"
#include "pipeline/denoise.hpp"
#include "pipeline/metrics.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/noise.hpp"
#include "pipeline/report.hpp"
#include "pipeline/report_png.hpp"
#include "tools/commands.hpp"
#include "tools/runtime_options.hpp"

namespace stepmix::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct CompareOptions {
  std::string model_dir, prompts_file, out_dir;
  std::optional<std::string> reference_dir;
  int seeds = 0;
  std::optional<int> steps;
  std::optional<double> guidance;
  std::vector<std::string> policies;
  std::optional<std::string> negative_prompt, negative_prompt_ids;
  std::optional<std::string> latent_shape;
  std::optional<int> height, width, frames;
  std::optional<std::string> scheduler_config;
  std::optional<std::string> classifier_dir;
  double diff_gain = 10;
  bool force = false;
  RuntimeOptions runtime;
};

std::atomic<bool> g_cancel{false};
extern "C" void on_compare_sigint(int) {
  g_cancel = true;
  std::signal(SIGINT, SIG_DFL);
}

// One column: which weights and which per-step plan.
struct PreparedMode {
  CompareMode info;
  Cosmos3Transformer* transformer = nullptr;
  StepPlan plan;
};

// "first-last:F,L" -> (F, L).
std::pair<int, int> parse_first_last(const std::string& text) {
  static const std::regex form(R"(first-last:(\d{1,6}),(\d{1,6}))");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    throw Error("compare", "--policy: expected first-last:F,L (e.g. first-last:2,1), got '" + text + "'");
  return {std::stoi(m[1]), std::stoi(m[2])};
}

PreparedMode prepare_mode(const ModelDirectory& dir, Cosmos3Transformer& model, int steps, std::string name,
                          std::string description, const PolicyOverrides& overrides) {
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, overrides);
  check_governed_counts(policy, model.governed_counts(), dir.transformer_dir);
  PreparedMode m;
  m.transformer = &model;
  m.plan = plan_steps(policy, model.has_fp8(), steps);
  m.info = {std::move(name), std::move(description), trace_string(m.plan.generation), policy.source,
            std::string(precision_trace_token(m.plan.reasoner))};
  return m;
}

class StepRecorder : public DenoiseObserver {
 public:
  void on_step_end(int, const std::vector<float>&, const std::vector<float>*, const std::vector<float>&,
                   const std::vector<float>& latent) override {
    latents.push_back(latent);
  }
  std::vector<std::vector<float>> latents;
};

class StepErrorMeter : public DenoiseObserver {
 public:
  explicit StepErrorMeter(const std::vector<std::vector<float>>& reference) : reference_(reference) {}
  void on_step_end(int step, const std::vector<float>&, const std::vector<float>*, const std::vector<float>&,
                   const std::vector<float>& latent) override {
    errors.push_back(relative_l2_error(latent, reference_.at(std::size_t(step))));
  }
  std::vector<double> errors;

 private:
  const std::vector<std::vector<float>>& reference_;
};

// The classifier to rate outputs with, if any applies.
std::optional<MlpClassifier> find_classifier(const CompareOptions& opt, const ModelDirectory& dir,
                                             const ModelDirectory* reference, int64_t output_values,
                                             CompareSetup& setup) {
  std::vector<fs::path> candidates;
  if (opt.classifier_dir) {
    candidates.push_back(*opt.classifier_dir);
  } else {
    candidates.push_back(fs::path(dir.root) / "classifier");
    if (reference) candidates.push_back(fs::path(reference->root) / "classifier");
  }
  for (const fs::path& c : candidates) {
    if (!opt.classifier_dir && !fs::exists(c / "classifier.json")) continue;
    MlpClassifier classifier = MlpClassifier::load(c.string());
    if (classifier.input_size() != output_values) {
      const std::string why = c.string() + " takes " + std::to_string(classifier.input_size()) +
                              " values, the output has " + std::to_string(output_values);
      if (opt.classifier_dir) throw Error("compare", "--classifier: " + why);
      setup.notes.push_back("classifier skipped: " + why);
      return std::nullopt;
    }
    setup.classifier = c.string();
    setup.classes = classifier.classes();
    return classifier;
  }
  return std::nullopt;
}

void write_report(const CompareOptions& opt, const CompareSetup& setup, const CompareRun& run, const json& report) {
  const fs::path out(opt.out_dir);
  const fs::path tmp = out.string() + ".tmp." + std::to_string(::getpid());
  const TemporaryOutput cleanup_on_signal(tmp.string());
  fs::remove_all(tmp);
  try {
    fs::create_directories(tmp);
    write_file_atomic((tmp / "report.json").string(), report.dump(2) + "\n");
    write_file_atomic((tmp / "report.md").string(), compare_report_markdown(report));
    write_png((tmp / "grid.png").string(), compare_grid(setup, run));
    write_png((tmp / "step_error.png").string(), step_error_plot(report));
    if (opt.force) fs::remove_all(out);
    fs::rename(tmp, out);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

void print_summary(const json& report, const std::string& out_dir) {
  std::printf("reference: %s\n", report["reference"]["description"].get<std::string>().c_str());
  std::printf("%-16s %-28s %9s %8s %10s  %-26s %s\n", "mode", "trace", "PSNR dB", "SSIM", "MAE",
              "gain vs W8A8 [95% CI]", "improved");
  for (const json& m : report["modes"]) {
    if (m["pooled"].is_null()) continue;
    const json& p = m["pooled"];
    char psnr[32], gain[64] = "-", improved[16] = "-";
    if (p["psnr_db"].is_null())
      std::snprintf(psnr, sizeof psnr, "identical");
    else
      std::snprintf(psnr, sizeof psnr, "%.2f", p["psnr_db"].get<double>());
    if (!m["paired_vs_w8a8"].is_null()) {
      const json& q = m["paired_vs_w8a8"];
      std::snprintf(gain, sizeof gain, "%+.2f dB [%+.2f, %+.2f]", q["median_psnr_gain_db"].get<double>(),
                    q["ci95_db"][0].get<double>(), q["ci95_db"][1].get<double>());
      std::snprintf(improved, sizeof improved, "%.1f%%", 100 * q["improved_fraction"].get<double>());
    }
    std::printf("%-16s %-28s %9s %8.5f %10.3e  %-26s %s\n", m["name"].get<std::string>().c_str(),
                m["trace"].get<std::string>().c_str(), psnr, p["ssim"].get<double>(), p["mae"].get<double>(), gain,
                improved);
  }
  if (!report["classifier"].is_null()) {
    std::printf("classifier accuracy:");
    for (const json& m : report["modes"]) {
      const json& a = m["classifier"]["accuracy"];
      if (a.is_number())
        std::printf(" %s %.1f%%", m["name"].get<std::string>().c_str(), 100 * a.get<double>());
      else
        std::printf(" %s -", m["name"].get<std::string>().c_str());
    }
    std::printf("\n");
  }
  std::printf("report: %s (report.md, report.json, grid.png, step_error.png)\n", out_dir.c_str());
}

void run_compare(const CompareOptions& opt) {
  // Cheap checks first, so a bad option never waits for a model load.
  if (opt.seeds < 1) throw Error("compare", "--seeds: expected an integer >= 1, got " + std::to_string(opt.seeds));
  if (opt.steps && *opt.steps < 1)
    throw Error("compare", "--steps: expected an integer >= 1, got " + std::to_string(*opt.steps));
  if (!(opt.diff_gain > 0)) throw Error("compare", "--diff-gain: expected a positive number");
  opt.runtime.validate("compare");
  if (opt.negative_prompt && opt.negative_prompt_ids)
    throw Error("compare", "give --negative-prompt or --negative-prompt-ids, not both");
  std::set<std::string> seen;
  for (const std::string& p : opt.policies) {
    parse_first_last(p);
    if (!seen.insert(p).second) throw Error("compare", "--policy " + p + " is given twice");
  }
  if (fs::exists(opt.out_dir) && !opt.force && !(fs::is_directory(opt.out_dir) && fs::is_empty(opt.out_dir)))
    throw Error("compare", "--out " + opt.out_dir + " exists; remove it or pass --force to replace it");
  if (!fs::is_regular_file(opt.prompts_file))
    throw Error("compare", "--prompts " + opt.prompts_file + ": no such file");

  const auto start = std::chrono::steady_clock::now();
  const ModelDirectory dir = ModelDirectory::open(opt.model_dir);
  const ModelDefaults defaults = read_model_defaults(dir);
  const int steps = opt.steps ? *opt.steps : defaults.steps.value_or(35);
  const double guidance = opt.guidance ? *opt.guidance : defaults.guidance.value_or(6.0);
  Cosmos3Transformer model = opt.runtime.load(dir);
  if (!model.has_fp8())
    throw Error("compare", "--model " + opt.model_dir +
                               " has no FP8 Linears: compare needs a ModelOpt FP8 checkpoint (stepmix quantize makes "
                               "one); pass the BF16 original as --reference");

  CompareSetup setup;
  setup.model = opt.model_dir;
  setup.steps = steps;
  setup.guidance = guidance;
  setup.seeds = opt.seeds;
  setup.diff_gain = opt.diff_gain;
  setup.notes.push_back("Linear activations: " + opt.runtime.activations + " in every mode, the reference too (--activations).");

  // The reference: the BF16 checkpoint, else W8A16 on every step of --model.
  std::optional<ModelDirectory> ref_dir;
  std::optional<Cosmos3Transformer> ref_model;
  const PolicyOverrides all_a16{MixedPrecisionMode::Fp8, steps, 0, TowerMode::A16, std::nullopt};
  std::vector<PreparedMode> modes;
  if (opt.reference_dir) {
    ref_dir = ModelDirectory::open(*opt.reference_dir);
    ref_model.emplace(opt.runtime.load(*ref_dir));
    if (ref_model->has_fp8())
      throw Error("compare",
                  "--reference " + *opt.reference_dir + " holds FP8 Linears; the reference must be a BF16 checkpoint");
    if (ref_model->config().latent_channel != model.config().latent_channel)
      throw Error("compare", "--reference has latent_channel " + std::to_string(ref_model->config().latent_channel) +
                                 ", --model has " + std::to_string(model.config().latent_channel));
    PreparedMode ref = prepare_mode(*ref_dir, *ref_model, steps, "reference", "", {});
    ref.info.description = "BF16 checkpoint " + *opt.reference_dir + " (dense)";
    modes.push_back(ref);
    modes.push_back(prepare_mode(dir, model, steps, "w8a16", "W8A16 on every step", all_a16));
    setup.reference = ref.info.description;
    setup.reference_path = *opt.reference_dir;
  } else {
    modes.push_back(
        prepare_mode(dir, model, steps, "reference", "W8A16 on every step of --model (no --reference)", all_a16));
    setup.reference = modes.back().info.description;
  }
  modes.push_back(prepare_mode(dir, model, steps, "w8a8", "W8A8 on every step (schedule off)",
                               {MixedPrecisionMode::None, {}, {}, {}, {}}));
  PreparedMode mixed = prepare_mode(dir, model, steps, "mixed", "the checkpoint's schedule", {});
  if (mixed.info.source != "checkpoint") {
    mixed = prepare_mode(dir, model, steps, "mixed", "", {MixedPrecisionMode::Fp8, {}, {}, {}, {}});
    mixed.info.description = "the default 3/3 schedule (forced: the checkpoint has no policy)";
    setup.notes.push_back("--model has no step policy; 'mixed' is the forced default (3 first, 3 last)");
  }
  modes.push_back(mixed);
  for (const std::string& p : opt.policies) {
    const auto [first, last] = parse_first_last(p);
    modes.push_back(
        prepare_mode(dir, model, steps, p,
                     "W8A16 on the first " + std::to_string(first) + " and last " + std::to_string(last) + " steps",
                     {MixedPrecisionMode::Fp8, first, last, {}, {}}));
  }

  PromptEncoder encoder(dir);
  setup.prompts = read_compare_prompts(opt.prompts_file, encoder);
  std::vector<int64_t> uncond;
  if (guidance != 1.0)
    uncond = opt.negative_prompt_ids ? parse_id_list(*opt.negative_prompt_ids, "--negative-prompt-ids")
                                     : encoder.encode(opt.negative_prompt.value_or(""));
  const auto shape = latent_shape_for({opt.latent_shape, opt.height, opt.width, opt.frames}, dir,
                                      model.config().latent_channel, defaults);
  const auto [C, T, H, W] = shape;
  setup.latent_shape = shape;
  setup.pixel_space = is_pixel_space(dir) && (C == 1 || C == 3);
  if (!setup.pixel_space)
    setup.notes.push_back("latent-space model (no VAE decoder in stepmix): metrics and pictures use the final latent");
  const sched::SchedulerConfig sched_config = scheduler_config_for({opt.scheduler_config, {}, {}}, dir, T > 1);
  setup.scheduler = sched::make_scheduler(sched_config)->name();
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  const std::optional<MlpClassifier> classifier =
      find_classifier(opt, dir, ref_dir ? &*ref_dir : nullptr, C * T * H * W, setup);
  if (classifier)
    for (std::size_t p = 0; p < setup.prompts.size(); ++p)
      if (setup.prompts[p].label && *setup.prompts[p].label >= int(classifier->classes().size()))
        throw Error("compare", opt.prompts_file + ": prompt " + std::to_string(p + 1) + " has label " +
                                   std::to_string(*setup.prompts[p].label) + "; the classifier has " +
                                   std::to_string(classifier->classes().size()) + " classes");

  CompareRun run;
  const std::size_t images = setup.prompts.size() * std::size_t(opt.seeds);
  for (const PreparedMode& m : modes) run.modes.push_back(m.info);
  run.outputs.assign(modes.size(), {});
  run.step_error.assign(modes.size(), {});
  run.predicted.assign(modes.size(), {});

  g_cancel = false;
  auto previous = std::signal(SIGINT, on_compare_sigint);
  const bool tty = isatty(STDERR_FILENO);
  try {
    for (std::size_t i = 0; i < images; ++i) {
      const ComparePrompt& prompt = setup.prompts[i / std::size_t(opt.seeds)];
      DenoiseRequest request;
      request.cond_ids = prompt.ids;
      request.uncond_ids = uncond;
      request.latent_shape = shape;
      request.guidance = guidance;
      request.noise = NormalGenerator(i % std::size_t(opt.seeds)).normals(std::size_t(C * T * H * W));
      StepRecorder reference_steps;
      for (std::size_t m = 0; m < modes.size(); ++m) {
        if (tty) std::fprintf(stderr, "\rimage %zu/%zu  %-20s", i + 1, images, modes[m].info.name.c_str());
        StepController controller(modes[m].plan);
        auto scheduler = sched::make_scheduler(sched_config);
        StepErrorMeter meter(reference_steps.latents);
        DenoiseObserver* observer = m == 0 ? static_cast<DenoiseObserver*>(&reference_steps) : &meter;
        DenoiseResult result =
            denoise(*modes[m].transformer, *scheduler, controller, request, settings, observer, &g_cancel);
        if (classifier) {
          std::vector<float> clamped(result.latent);
          for (float& v : clamped) v = std::clamp(v, -1.0f, 1.0f);
          run.predicted[m].push_back(classifier->predict(clamped));
        } else {
          run.predicted[m].push_back(-1);
        }
        if (m > 0) run.step_error[m].push_back(std::move(meter.errors));
        run.outputs[m].push_back(std::move(result.latent));
      }
      if (!tty && images >= 10 && (i + 1) % (images / 10) == 0)
        std::fprintf(stderr, "compare: %zu/%zu images\n", i + 1, images);
    }
  } catch (...) {
    std::signal(SIGINT, previous);
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
    throw;
  }
  std::signal(SIGINT, previous);
  if (tty) std::fprintf(stderr, "\r%60s\r", "");

  const json report = compare_report_json(setup, run);
  write_report(opt, setup, run, report);
  print_summary(report, opt.out_dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("elapsed: %.1f s (%zu images x %zu runs)\n", seconds, images, modes.size());
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto opt = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "Image metrics, per-step error and pictures of each precision mode");
  cmd->footer(
      "Modes: the reference (--reference BF16 checkpoint, else W8A16 on every step), w8a16, w8a8 (every step),\n"
      "mixed (the checkpoint's schedule) and each --policy. Seeds 0..K-1 give each prompt its initial noise, as\n"
      "stepmix generate --seed does.\n"
      "Prompts file: one prompt per line, text or ids:1,2,3, optionally followed by whitespace and label:K (the\n"
      "class index for classifier accuracy); or JSON lines {\"prompt\": \"...\" | \"ids\": [..], \"label\": K}.\n"
      "Blank lines and lines starting with # are skipped.\n"
      "Writes REPORT_DIR/{report.json, report.md, grid.png, step_error.png} (see README, \"Evidence\").");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--model", opt->model_dir, "ModelOpt FP8 model directory")->required();
  cmd->add_option("--reference", opt->reference_dir,
                  "BF16 model directory to compare against (default: W8A16 on every step of --model)");
  cmd->add_option("--prompts", opt->prompts_file, "Prompts file (see above)")->required();
  cmd->add_option("--seeds", opt->seeds, "Seeds per prompt (0..K-1)")->required();
  cmd->add_option("--steps", opt->steps, "Denoising steps (default: the model's, else 35)");
  cmd->add_option("--guidance", opt->guidance, "Classifier-free guidance scale (default: the model's, else 6)");
  cmd->add_option("--policy", opt->policies, "Extra mode first-last:F,L (W8A16 windows); repeatable")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--negative-prompt", opt->negative_prompt, "Unconditional prompt text (default: empty)");
  cmd->add_option("--negative-prompt-ids", opt->negative_prompt_ids, "Unconditional prefix as ids");
  cmd->add_option("--latent-shape", opt->latent_shape, "Latent shape C,T,H,W (instead of height/width/frames)");
  cmd->add_option("--height", opt->height, "Image height in pixels");
  cmd->add_option("--width", opt->width, "Image width in pixels");
  cmd->add_option("--frames", opt->frames, "Number of frames (1 = image)");
  cmd->add_option("--scheduler-config", opt->scheduler_config, "A Diffusers scheduler_config.json");
  cmd->add_option("--classifier", opt->classifier_dir,
                  "Classifier folder (default: classifier/ of --model, else of --reference, when present)");
  cmd->add_option("--diff-gain", opt->diff_gain, "Amplification of the difference maps")->default_val(10.0);
  cmd->add_flag("--force", opt->force, "Replace --out if it exists");
  cmd->add_option("--out", opt->out_dir, "Report folder (written whole at the end)")->required();
  add_runtime_options(*cmd, opt->runtime);
  cmd->callback([opt] { run_compare(*opt); });
}

}  // namespace stepmix::cli
