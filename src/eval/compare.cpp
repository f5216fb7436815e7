// stepmix::compare (include/stepmix/tools.hpp): the same prompts and seeds
// under a reference and under each precision mode of an FP8 checkpoint (W8A16
// everywhere, W8A8 everywhere, the mixed schedule, extra first-last windows),
// measured against the reference: pooled and paired image metrics, the
// per-step latent error, classifier accuracy, pictures. Everything goes to a
// temporary folder renamed to the report folder at the end, so an interrupted
// run leaves nothing behind.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <set>

#include "eval/classifier.hpp"
#include "eval/metrics.hpp"
#include "eval/report.hpp"
#include "eval/report_png.hpp"
#include "io/output_set.hpp"
#include "io/png.hpp"
#include "io/safetensors.hpp"
#include "pipeline/model_setup.hpp"
#include "stepmix/tools.hpp"

namespace stepmix {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// One column: which model and which policy.
struct PreparedMode {
  CompareMode info;
  Model* model = nullptr;
  PolicyOverrides policy;
};

// "first-last:F,L" -> (F, L).
std::pair<int, int> parse_first_last(const std::string& text) {
  static const std::regex form(R"(first-last:(\d{1,6}),(\d{1,6}))");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    throw Error("compare", "--policy: expected first-last:F,L (e.g. first-last:2,1), got '" + text + "'");
  return {std::stoi(m[1]), std::stoi(m[2])};
}

PreparedMode prepare_mode(Model& model, GenerateRequest request, std::string name, std::string description,
                          const PolicyOverrides& policy) {
  request.policy = policy;
  const GeneratePlan plan = model.plan(request);
  PreparedMode m;
  m.model = &model;
  m.policy = policy;
  m.info = {std::move(name), std::move(description), trace_string(plan.plan.generation), plan.policy.source,
            std::string(precision_trace_token(plan.plan.reasoner))};
  return m;
}

// The classifier to rate outputs with, if any applies.
std::optional<MlpClassifier> find_classifier(const CompareOptions& opt, int64_t output_values, CompareSetup& setup) {
  std::vector<fs::path> candidates;
  if (opt.classifier_dir) {
    candidates.push_back(*opt.classifier_dir);
  } else {
    candidates.push_back(fs::path(opt.model_dir) / "classifier");
    if (opt.reference_dir) candidates.push_back(fs::path(*opt.reference_dir) / "classifier");
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

// Fills the staged report folder; the caller's commit() puts it in place.
void write_report(const fs::path& folder, const CompareSetup& setup, const CompareRun& run, const json& report) {
  write_file_atomic((folder / "report.json").string(),
                    report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write_file_atomic((folder / "report.md").string(), compare_report_markdown(report));
  write_png((folder / "grid.png").string(), compare_grid(setup, run));
  write_png((folder / "step_error.png").string(), step_error_plot(report));
}

void print_summary(std::FILE* f, const json& report, const std::string& out_dir) {
  std::fprintf(f, "reference: %s\n", report["reference"]["description"].get<std::string>().c_str());
  std::fprintf(f, "%-16s %-28s %9s %8s %10s  %-26s %s\n", "mode", "trace", "PSNR dB", "SSIM", "MAE",
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
    std::fprintf(f, "%-16s %-28s %9s %8.5f %10.3e  %-26s %s\n", m["name"].get<std::string>().c_str(),
                 m["trace"].get<std::string>().c_str(), psnr, p["ssim"].get<double>(), p["mae"].get<double>(), gain,
                 improved);
  }
  if (!report["classifier"].is_null()) {
    bool any_label = false;
    for (const json& m : report["modes"]) any_label = any_label || m["classifier"]["accuracy"].is_number();
    if (!any_label)
      std::fprintf(f, "classifier accuracy: - (no prompt has a label; end a line with label:K, the class index, "
                      "to measure it)\n");
  }
  if (!report["classifier"].is_null() && report["modes"][0]["classifier"]["accuracy"].is_number()) {
    std::fprintf(f, "classifier accuracy:");
    for (const json& m : report["modes"]) {
      const json& a = m["classifier"]["accuracy"];
      if (a.is_number())
        std::fprintf(f, " %s %.1f%%", m["name"].get<std::string>().c_str(), 100 * a.get<double>());
      else
        std::fprintf(f, " %s -", m["name"].get<std::string>().c_str());
    }
    std::fprintf(f, "\n");
  }
  std::fprintf(f, "report: %s (report.md, report.json, grid.png, step_error.png)\n", out_dir.c_str());
}

// Cheap checks first, so a bad option never waits for a model load.
void check_compare_options(const CompareOptions& opt) {
  if (opt.seeds < 1 || opt.seeds > 10000)
    throw Error("compare", "--seeds: expected an integer in [1, 10000], got " + std::to_string(opt.seeds));
  if (opt.request.steps) check_steps_value(*opt.request.steps, "compare", "--steps");
  if (!(opt.diff_gain > 0) || !(opt.diff_gain <= 1e6))
    throw Error("compare", "--diff-gain: expected a number in (0, 1e6], got " + Error::number(opt.diff_gain));
  if (opt.request.negative_prompt && opt.request.negative_prompt_ids)
    throw Error("compare", "give --negative-prompt or --negative-prompt-ids, not both");
  // What each image takes from the prompts file, its seed and its mode.
  const GenerateRequest& r = opt.request;
  const std::string prompts_source = "each image's prompt comes from the prompts file";
  refuse_request_field(r.prompt.has_value(), "compare", "prompt", prompts_source);
  refuse_request_field(r.prompt_ids.has_value(), "compare", "prompt_ids", prompts_source);
  refuse_request_field(r.noise.has_value(), "compare", "noise",
                       "each image's noise is drawn from its seed, 0 .. seeds - 1");
  refuse_request_field(r.seed != 0, "compare", "seed", "the seeds are 0 .. seeds - 1");
  refuse_request_field(r.policy.any_field() || r.policy.mode != MixedPrecisionMode::Auto, "compare", "policy",
                       "each mode sets its own; extra modes are CompareOptions::policies");
  std::set<std::string> seen;
  for (const std::string& p : opt.policies) {
    parse_first_last(p);
    if (!seen.insert(p).second) throw Error("compare", "--policy " + p + " is given twice");
  }
}

// The plan every mode samples (the first prompt under --model's defaults);
// setup records what the report says of it. request becomes the request
// each image samples, fixed to that plan.
GeneratePlan plan_comparison(Model& model, const CompareOptions& opt, CompareSetup& setup, GenerateRequest& request) {
  request = opt.request;
  request.prompt.reset();
  request.prompt_ids = setup.prompts.front().ids;
  const GeneratePlan base = model.plan(request);
  for (const std::string& note : base.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  for (const std::string& w : base.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  for (const std::string& w : base.warnings) setup.notes.push_back("warning: " + w);
  setup.steps = base.steps;
  setup.guidance = base.guidance;
  setup.latent_shape = base.latent_shape;
  // compare measures what the loop returns, the final latent: a picture only
  // for a pixel-space model (a model with vae/ is not decoded here).
  setup.pixel_space = base.image_output && !base.decodes;
  setup.scheduler = base.scheduler;
  if (base.decodes)
    setup.notes.push_back("metrics and pictures use the final latent: compare does not decode it through vae/");
  else if (!setup.pixel_space)
    setup.notes.push_back("latent-space model without vae/: metrics and pictures use the final latent");
  // The reference model samples exactly what --model does, whatever its own defaults.
  request = sampled_exactly(request, base);
  return base;
}

// The columns: the reference (the BF16 checkpoint, else W8A16 on every step
// of --model), W8A16 beside a BF16 reference, W8A8, the mixed schedule and
// each extra --policy.
std::vector<PreparedMode> prepare_modes(Model& model, std::optional<Model>& reference, const CompareOptions& opt,
                                        const GenerateRequest& request, const GeneratePlan& base, CompareSetup& setup) {
  const PolicyOverrides all_a16{MixedPrecisionMode::Fp8, base.steps, 0, TowerMode::A16, std::nullopt};
  std::vector<PreparedMode> modes;
  if (opt.reference_dir) {
    reference.emplace(Model::open(*opt.reference_dir, reference_options(opt.runtime)));
    if (reference->info().has_fp8)
      throw Error("compare",
                  "--reference " + *opt.reference_dir + " holds FP8 Linears; the reference must be a BF16 checkpoint");
    if (reference->info().latent_channels != model.info().latent_channels)
      throw Error("compare", "--reference has latent_channel " + std::to_string(reference->info().latent_channels) +
                                 ", --model has " + std::to_string(model.info().latent_channels));
    PreparedMode ref = prepare_mode(*reference, request, "reference", "", {});
    ref.info.description = "BF16 checkpoint " + *opt.reference_dir + " (dense)";
    modes.push_back(ref);
    modes.push_back(prepare_mode(model, request, "w8a16", "W8A16 on every step", all_a16));
    setup.reference = ref.info.description;
    setup.reference_path = *opt.reference_dir;
  } else {
    modes.push_back(
        prepare_mode(model, request, "reference", "W8A16 on every step of --model (no --reference)", all_a16));
    setup.reference = modes.back().info.description;
  }
  modes.push_back(prepare_mode(model, request, "w8a8", "W8A8 on every step (schedule off)",
                               {MixedPrecisionMode::None, {}, {}, {}, {}}));
  PreparedMode mixed = prepare_mode(model, request, "mixed", "the checkpoint's schedule", {});
  if (mixed.info.source != "checkpoint") {
    mixed = prepare_mode(model, request, "mixed", "", {MixedPrecisionMode::Fp8, {}, {}, {}, {}});
    mixed.info.description = "the default 3/3 schedule (forced: the checkpoint has no policy)";
    setup.notes.push_back(
        "--model has no step policy for the transformer; 'mixed' is the forced default (3 first, 3 last)");
  }
  modes.push_back(mixed);
  for (const std::string& p : opt.policies) {
    const auto [first, last] = parse_first_last(p);
    modes.push_back(
        prepare_mode(model, request, p,
                     "W8A16 on the first " + std::to_string(first) + " and last " + std::to_string(last) + " steps",
                     {MixedPrecisionMode::Fp8, first, last, {}, {}}));
  }
  return modes;
}

// Every image (prompt x seed) under every mode: the final latents, each
// step's error against the reference's latent at that step, and the
// classifier's predictions (-1 without one).
CompareRun sample_modes(const std::vector<PreparedMode>& modes, const CompareSetup& setup, int seeds,
                        GenerateRequest request, const std::optional<MlpClassifier>& classifier,
                        const CancelToken* cancel) {
  CompareRun run;
  const std::size_t images = setup.prompts.size() * std::size_t(seeds);
  for (const PreparedMode& m : modes) run.modes.push_back(m.info);
  run.outputs.assign(modes.size(), {});
  run.step_error.assign(modes.size(), {});
  run.predicted.assign(modes.size(), {});

  const bool tty = isatty(STDERR_FILENO);
  try {
    for (std::size_t i = 0; i < images; ++i) {
      request.prompt_ids = setup.prompts[i / std::size_t(seeds)].ids;
      request.seed = i % std::size_t(seeds);
      std::vector<std::vector<float>> reference_steps;
      for (std::size_t m = 0; m < modes.size(); ++m) {
        if (tty) std::fprintf(stderr, "\rimage %zu/%zu  %-20s", i + 1, images, modes[m].info.name.c_str());
        request.policy = modes[m].policy;
        std::vector<double> errors;
        GenerateCallbacks callbacks;
        callbacks.on_step_end = [&](const StepEvent& e, std::span<const float> latent) {
          if (m == 0)
            reference_steps.emplace_back(latent.begin(), latent.end());
          else
            errors.push_back(relative_l2_error(std::vector<float>(latent.begin(), latent.end()),
                                               reference_steps.at(std::size_t(e.step))));
        };
        GenerateResult result = modes[m].model->generate(request, callbacks, cancel);
        if (classifier) {
          std::vector<float> clamped(result.latent);
          for (float& v : clamped) v = std::clamp(v, -1.0f, 1.0f);
          run.predicted[m].push_back(classifier->predict(clamped));
        } else {
          run.predicted[m].push_back(-1);
        }
        if (m > 0) run.step_error[m].push_back(std::move(errors));
        run.outputs[m].push_back(std::move(result.latent));
      }
      if (!tty && images >= 10 && (i + 1) % (images / 10) == 0)
        std::fprintf(stderr, "compare: %zu/%zu images\n", i + 1, images);
    }
  } catch (...) {
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
    throw;
  }
  if (tty) std::fprintf(stderr, "\r%60s\r", "");
  return run;
}

}  // namespace

void compare(const CompareOptions& opt, std::FILE* out, const CancelToken* cancel) {
  check_compare_options(opt);
  // The report folder is checked now, before any sampling: --force replaces
  // only a folder stepmix wrote (io/output_set.hpp).
  OutputSet outputs;
  outputs.add_input("--prompts", opt.prompts_file);
  outputs.add_input("--model", opt.model_dir);
  if (opt.reference_dir) outputs.add_input("--reference", *opt.reference_dir);
  const OutputSet::Id report_folder = outputs.add_folder("--out", opt.out_dir, opt.force, "--force");
  outputs.validate();

  const auto start = std::chrono::steady_clock::now();
  Model model = Model::open(opt.model_dir, opt.runtime);
  if (!model.info().has_fp8)
    throw Error("compare", "--model " + opt.model_dir +
                               " has no FP8 Linears: compare needs a ModelOpt FP8 checkpoint (stepmix quantize makes "
                               "one); pass the BF16 original as --reference");

  CompareSetup setup;
  setup.model = opt.model_dir;
  setup.seeds = opt.seeds;
  setup.diff_gain = opt.diff_gain;
  setup.notes.push_back("Linear activations: " + std::string(activation_dtype_name(opt.runtime.activations)) +
                        " in every mode, the reference too (--activations).");
  setup.prompts =
      read_compare_prompts(opt.prompts_file, [&](const std::string& t) { return model.encode_prompt(t, opt.request); });

  // Every mode samples the same request; only the policy (and the model) differ.
  GenerateRequest request;
  const GeneratePlan base = plan_comparison(model, opt, setup, request);
  std::optional<Model> reference;
  const std::vector<PreparedMode> modes = prepare_modes(model, reference, opt, request, base, setup);

  const auto [C, T, H, W] = base.latent_shape;
  const std::optional<MlpClassifier> classifier = find_classifier(opt, C * T * H * W, setup);
  if (classifier)
    for (std::size_t p = 0; p < setup.prompts.size(); ++p)
      if (setup.prompts[p].label && *setup.prompts[p].label >= int(classifier->classes().size()))
        throw Error("compare", opt.prompts_file + ": prompt " + std::to_string(p + 1) + " has label " +
                                   std::to_string(*setup.prompts[p].label) + "; the classifier has " +
                                   std::to_string(classifier->classes().size()) + " classes");

  const CompareRun run = sample_modes(modes, setup, opt.seeds, request, classifier, cancel);
  const json report = compare_report_json(setup, run);
  write_report(outputs.stage_folder(report_folder), setup, run, report);
  outputs.commit();
  print_summary(out, report, opt.out_dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(out, "elapsed: %.1f s (%zu images x %zu runs)\n", seconds, run.image_count(), modes.size());
}

}  // namespace stepmix
