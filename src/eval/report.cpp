#include "eval/report.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "eval/metrics.hpp"
#include "io/file_access.hpp"
#include "pipeline/model_setup.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using json = nlohmann::json;

// JSON has no infinity: +inf (identical images) becomes null.
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(); }

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string fixed(const json& v, int digits) {
  if (!v.is_number()) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v.get<double>());
  return buf;
}

std::string scientific(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string percent(const json& v) { return v.is_number() ? fixed(v.get<double>() * 100.0, 1) + "%" : "—"; }

}  // namespace

std::vector<ComparePrompt> read_compare_prompts(const std::string& path, const PromptEncoderFn& encode) {
  std::istringstream in(read_text_file_bounded(path, kMaxTextFileBytes, "--prompts"));
  static const std::regex label_suffix(R"(^(.*\S)\s+label:(\d{1,6})$)");
  std::vector<ComparePrompt> prompts;
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(line_no);
    ComparePrompt p;
    if (line[0] == '{') {
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception& e) {
        throw Error("compare", where + ": not a JSON object: " + e.what());
      }
      const bool has_text = j.contains("prompt"), has_ids = j.contains("ids");
      if (has_text == has_ids) throw Error("compare", where + ": give \"prompt\" or \"ids\", exactly one");
      if (has_text) {
        if (!j["prompt"].is_string()) throw Error("compare", where + ": \"prompt\" must be a string");
        p.text = j["prompt"].get<std::string>();
        p.ids = encode(p.text);
      } else {
        if (!j["ids"].is_array() || j["ids"].empty())
          throw Error("compare", where + ": \"ids\" must be a non-empty array");
        for (const json& id : j["ids"]) {
          if (!id.is_number_integer()) throw Error("compare", where + ": \"ids\" must hold integers");
          p.ids.push_back(id.get<int64_t>());
        }
        p.text = "ids:" + j["ids"].dump();
      }
      if (j.contains("label")) {
        if (!j["label"].is_number_integer() || j["label"].get<int64_t>() < 0)
          throw Error("compare", where + ": \"label\" must be a class index >= 0");
        p.label = j["label"].get<int>();
      }
      for (const auto& [key, _] : j.items())
        if (key != "prompt" && key != "ids" && key != "label")
          throw Error("compare", where + ": unknown key \"" + key + "\" (accepted: prompt, ids, label)");
    } else {
      std::string body = line;
      std::smatch m;
      if (std::regex_match(line, m, label_suffix)) {
        body = m[1];
        p.label = std::stoi(m[2]);
      }
      // A last word "label:..." that is no label is one the user meant but
      // mistyped ("label:x", "label:4x", two labels): refused rather than
      // read as prompt text ("a bag with a label: sale" is text).
      static const std::regex stray_label(R"((^|\s)label:\S*$)");
      if (std::regex_search(body, stray_label))
        throw Error("compare", where + ": a label is the last word, written label:K with K a class index "
                                       "(0-999999), after whitespace; got '" + line + "'");
      p.text = body;
      p.ids = body.rfind("ids:", 0) == 0 ? parse_id_list(body.substr(4), where) : encode(body);
    }
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) throw Error("compare", path + ": no prompts (one per line; '#' starts a comment)");
  return prompts;
}

namespace {

// Each mode's per-image metrics against the reference, [mode][image]; mode 0
// (the reference) is empty.
struct ImageMetrics {
  std::vector<std::vector<double>> mse, mae, ssim, psnr;
};

ImageMetrics measure_images(const CompareSetup& setup, const CompareRun& run) {
  const std::size_t images = run.image_count(), modes = run.modes.size();
  const auto [C, T, H, W] = setup.latent_shape;
  ImageMetrics r;
  for (auto* metric : {&r.mse, &r.mae, &r.ssim, &r.psnr}) metric->resize(modes);
  std::vector<PlanarImage> ref(images);
  for (std::size_t i = 0; i < images; ++i) ref[i] = image_from_output(run.outputs[0][i], C, T, H, W);
  for (std::size_t m = 1; m < modes; ++m)
    for (std::size_t i = 0; i < images; ++i) {
      const PlanarImage img = image_from_output(run.outputs[m][i], C, T, H, W);
      r.mse[m].push_back(mean_squared_error(img, ref[i]));
      r.mae[m].push_back(mean_absolute_error(img, ref[i]));
      r.ssim[m].push_back(ssim(img, ref[i]));
      r.psnr[m].push_back(std::min(kPsnrCapDb, psnr_from_mse(r.mse[m].back())));
    }
  return r;
}

// Mode m (> 0) beside W8A8-everywhere (column w8a8) on the same prompts and
// seeds: the median PSNR gain with its bootstrap interval, the share improved.
json paired_with_w8a8(const ImageMetrics& metrics, std::size_t m, std::size_t w8a8) {
  const std::size_t images = metrics.psnr[m].size();
  std::vector<double> gain(images);
  std::size_t better = 0, better_mae = 0;
  for (std::size_t i = 0; i < images; ++i) {
    gain[i] = metrics.psnr[m][i] - metrics.psnr[w8a8][i];
    better += metrics.mse[m][i] < metrics.mse[w8a8][i];
    better_mae += metrics.mae[m][i] < metrics.mae[w8a8][i];
  }
  const BootstrapInterval ci = bootstrap_median_interval(gain);
  return {{"median_psnr_gain_db", ci.estimate},
          {"ci95_db", {ci.low, ci.high}},
          {"improved_fraction", double(better) / double(images)},
          {"improved_fraction_mae", double(better_mae) / double(images)}};
}

// Mode m's pooled metrics, its pairing with W8A8 (w8a8 = 0: no such column)
// and its step error; all null for the reference.
void add_mode_metrics(json& j, const ImageMetrics& metrics, const CompareRun& run, std::size_t m, std::size_t w8a8) {
  if (m == 0) {
    j["pooled"] = nullptr;
    j["paired_vs_w8a8"] = nullptr;
    j["step_error"] = nullptr;
    return;
  }
  const std::size_t images = run.image_count();
  double mse_sum = 0, mae_sum = 0, ssim_sum = 0;
  for (std::size_t i = 0; i < images; ++i) {
    mse_sum += metrics.mse[m][i];
    mae_sum += metrics.mae[m][i];
    ssim_sum += metrics.ssim[m][i];
  }
  j["pooled"] = {{"psnr_db", finite_or_null(psnr_from_mse(mse_sum / double(images)))},
                 {"ssim", ssim_sum / double(images)},
                 {"mae", mae_sum / double(images)},
                 {"median_image_psnr_db", median(metrics.psnr[m])}};
  j["paired_vs_w8a8"] = w8a8 && m != w8a8 ? paired_with_w8a8(metrics, m, w8a8) : json();
  const std::size_t steps = run.step_error[m].front().size();
  json mean = json::array(), med = json::array();
  for (std::size_t s = 0; s < steps; ++s) {
    std::vector<double> at_step(images);
    double sum = 0;
    for (std::size_t i = 0; i < images; ++i) sum += at_step[i] = run.step_error[m][i][s];
    mean.push_back(finite_or_null(sum / double(images)));
    med.push_back(finite_or_null(median(at_step)));
  }
  j["step_error"] = {{"mean", mean}, {"median", med}};
}

// Mode m's classifier accuracy (over labelled images) and agreement with the
// reference's predictions.
json classifier_json(const CompareSetup& setup, const CompareRun& run, std::size_t m, std::size_t labelled) {
  const std::size_t images = run.image_count();
  std::size_t correct = 0, agree = 0;
  for (std::size_t i = 0; i < images; ++i) {
    const auto& label = setup.prompts[i / std::size_t(setup.seeds)].label;
    if (label && run.predicted[m][i] == *label) ++correct;
    if (run.predicted[m][i] == run.predicted[0][i]) ++agree;
  }
  return {{"accuracy", labelled ? json(double(correct) / double(labelled)) : json()},
          {"agreement_with_reference", double(agree) / double(images)}};
}

json per_image_json(const CompareSetup& setup, const CompareRun& run, const ImageMetrics& metrics) {
  const bool with_classifier = setup.classifier.has_value();
  json per_image = json::array();
  for (std::size_t i = 0; i < run.image_count(); ++i) {
    json p = json::object(), s = json::object(), a = json::object(), cls = json::object();
    for (std::size_t m = 1; m < run.modes.size(); ++m) {
      p[run.modes[m].name] = metrics.psnr[m][i];
      s[run.modes[m].name] = metrics.ssim[m][i];
      a[run.modes[m].name] = metrics.mae[m][i];
    }
    if (with_classifier)
      for (std::size_t m = 0; m < run.modes.size(); ++m) cls[run.modes[m].name] = run.predicted[m][i];
    per_image.push_back({{"prompt", i / std::size_t(setup.seeds)},
                         {"seed", i % std::size_t(setup.seeds)},
                         {"psnr_db", p},
                         {"ssim", s},
                         {"mae", a},
                         {"predicted_class", with_classifier ? cls : json()}});
  }
  return per_image;
}

// What each number in the report means, for a reader of report.json alone.
json metric_definitions(bool pixel_space) {
  return {{"image", std::string(pixel_space ? "the output image" : "the final latent (not decoded)") +
                        " clamped to [-1, 1] and mapped to [0, 1]; data range 1"},
          {"psnr", "10 log10(1 / MSE) in dB against the reference output"},
          {"ssim",
           "uniform 7x7 window (smaller odd window on images under 7 px), K1 0.01, K2 0.03, sample "
           "covariance, mean over windows fully inside the image, then over channels and frames"},
          {"mae", "mean absolute difference, in [0, 1] image units"},
          {"pooled", "psnr_db from the mean MSE over all images; ssim and mae are means over images"},
          {"paired",
           "per-image PSNR (capped at 100 dB) minus W8A8-everywhere's on the same prompt and seed; median "
           "with a percentile bootstrap 95% interval (2000 resamples, fixed seed); improved_fraction = "
           "share of images with lower MSE (improved_fraction_mae: lower MAE) than W8A8-everywhere"},
          {"step_error",
           "||x_i - x_i_ref|| / ||x_i_ref|| (L2 over the latent after loop iteration i), mean and "
           "median over images"},
          {"classifier",
           "argmax of the shipped classifier on the clamped output; accuracy over prompts with a "
           "label, agreement = same class as the reference output"}};
}

}  // namespace

json compare_report_json(const CompareSetup& setup, const CompareRun& run) {
  const std::size_t images = run.image_count();
  const std::size_t modes = run.modes.size();
  if (modes < 2 || images == 0) throw Error("compare", "nothing to report");

  const ImageMetrics metrics = measure_images(setup, run);
  std::size_t w8a8 = 0;
  for (std::size_t m = 1; m < modes; ++m)
    if (run.modes[m].name == "w8a8") w8a8 = m;
  const bool with_classifier = setup.classifier.has_value();
  std::size_t labelled = 0;
  for (std::size_t i = 0; i < images; ++i)
    if (setup.prompts[i / std::size_t(setup.seeds)].label) ++labelled;

  json modes_json = json::array();
  for (std::size_t m = 0; m < modes; ++m) {
    const CompareMode& mode = run.modes[m];
    json j = {{"name", mode.name},
              {"description", mode.description},
              {"trace", mode.trace},
              {"source", mode.source},
              {"reasoner", mode.reasoner}};
    add_mode_metrics(j, metrics, run, m, w8a8);
    j["classifier"] = with_classifier ? classifier_json(setup, run, m, labelled) : json();
    modes_json.push_back(j);
  }

  json prompts = json::array();
  for (const ComparePrompt& p : setup.prompts)
    prompts.push_back({{"text", p.text}, {"ids", p.ids}, {"label", p.label ? json(*p.label) : json()}});

  json report;
  report["format"] = "stepmix-compare/1";
  report["stepmix_version"] = STEPMIX_VERSION;
  report["model"] = setup.model;
  report["reference"] = {{"description", setup.reference},
                         {"path", setup.reference_path ? json(*setup.reference_path) : json()}};
  report["steps"] = setup.steps;
  report["guidance"] = setup.guidance;
  report["seeds"] = setup.seeds;
  report["images"] = images;
  report["latent_shape"] = setup.latent_shape;
  report["output"] = setup.pixel_space ? "pixels" : "latent";
  report["scheduler"] = setup.scheduler;
  report["prompts"] = prompts;
  report["metrics"] = metric_definitions(setup.pixel_space);
  report["modes"] = modes_json;
  report["classifier"] =
      with_classifier ? json{{"path", *setup.classifier}, {"classes", setup.classes}, {"labelled_images", labelled}}
                      : json();
  report["diff_gain"] = setup.diff_gain;
  report["files"] = {{"grid", "grid.png"}, {"step_error_plot", "step_error.png"}, {"markdown", "report.md"}};
  report["notes"] = setup.notes;
  report["per_image"] = per_image_json(setup, run, metrics);
  return report;
}

std::string compare_report_markdown(const json& r) {
  std::ostringstream md;
  md << "# stepmix compare\n\n";
  md << "- model: `" << r["model"].get<std::string>() << "`\n";
  md << "- reference: " << r["reference"]["description"].get<std::string>() << "\n";
  md << "- " << r["images"].get<std::size_t>() << " images: " << r["prompts"].size() << " prompts x "
     << r["seeds"].get<int>() << " seeds (0.." << r["seeds"].get<int>() - 1 << "), " << r["steps"].get<int>()
     << " steps, guidance " << r["guidance"].get<double>() << ", " << r["scheduler"].get<std::string>() << "\n";
  md << "- metrics on " << r["metrics"]["image"].get<std::string>() << "\n\n";

  const bool with_classifier = !r["classifier"].is_null();
  md << "| mode | trace | PSNR dB | SSIM | MAE | median PSNR gain vs W8A8 [95% CI] | images improved (MSE / MAE) |"
     << (with_classifier ? " accuracy | same class as ref |" : "") << "\n";
  md << "|---|---|---|---|---|---|---|" << (with_classifier ? "---|---|" : "") << "\n";
  for (const json& m : r["modes"]) {
    md << "| " << m["name"].get<std::string>() << " | " << m["trace"].get<std::string>() << " | ";
    if (m["pooled"].is_null()) {
      md << "reference | | | | |";
    } else {
      const json& p = m["pooled"];
      md << (p["psnr_db"].is_null() ? std::string("identical") : fixed(p["psnr_db"], 2)) << " | " << fixed(p["ssim"], 5)
         << " | " << scientific(p["mae"].get<double>()) << " | ";
      if (m["paired_vs_w8a8"].is_null()) {
        md << "— | — |";
      } else {
        const json& q = m["paired_vs_w8a8"];
        md << fixed(q["median_psnr_gain_db"], 2) << " dB [" << fixed(q["ci95_db"][0], 2) << ", "
           << fixed(q["ci95_db"][1], 2) << "] | " << percent(q["improved_fraction"]) << " / "
           << percent(q["improved_fraction_mae"]) << " |";
      }
    }
    if (with_classifier)
      md << " " << percent(m["classifier"]["accuracy"]) << " | " << percent(m["classifier"]["agreement_with_reference"])
         << " |";
    md << "\n";
  }

  md << "\n## Per-step latent error\n\nMean over images of ||x_i - x_i_ref|| / ||x_i_ref|| after each loop "
        "iteration (`step_error.png`; log scale, zero drawn at the bottom).\n\n| step |";
  std::vector<const json*> curves;
  for (const json& m : r["modes"])
    if (!m["step_error"].is_null()) {
      md << " " << m["name"].get<std::string>() << " |";
      curves.push_back(&m);
    }
  md << "\n|---|";
  for (std::size_t k = 0; k < curves.size(); ++k) md << "---|";
  md << "\n";
  for (std::size_t s = 0; s < std::size_t(r["steps"].get<int>()); ++s) {
    md << "| " << s << " |";
    for (const json* m : curves) {
      const json& v = (*m)["step_error"]["mean"][s];
      md << " " << (v.is_number() ? scientific(v.get<double>()) : std::string("inf")) << " |";
    }
    md << "\n";
  }

  md << "\n## Prompts (grid rows P1, P2, ...)\n\n";
  const json& classes = with_classifier ? r["classifier"]["classes"] : json::array();
  for (std::size_t p = 0; p < r["prompts"].size(); ++p) {
    const json& prompt = r["prompts"][p];
    md << p + 1 << ". `" << prompt["text"].get<std::string>() << "`";
    if (prompt["label"].is_number()) {
      const std::size_t label = prompt["label"].get<std::size_t>();
      md << " — label " << label;
      if (label < classes.size()) md << " (" << classes[label].get<std::string>() << ")";
    }
    md << "\n";
  }
  md << "\nPrompts file: one prompt per line, text or `ids:1,2,3`, optionally followed by whitespace and "
        "`label:K` (the class index for the classifier), or JSON lines `{\"prompt\": \"...\", \"label\": K}` / "
        "`{\"ids\": [...]}`; `#` starts a comment line.\n";

  md << "\n## Files\n\n"
     << "- `grid.png`: one pair of rows per prompt (seed 0): the outputs (columns: reference, then each mode), "
        "then |mode - reference| amplified x"
     << r["diff_gain"].get<double>() << " (white = large).\n"
     << "- `step_error.png`: the table above as curves, one colour per mode (legend in the image).\n"
     << "- `report.json`: every number here plus per-image PSNR/SSIM/MAE"
     << (with_classifier ? " and predicted classes" : "") << ".\n\n";
  md << "## Reading it\n\nPooled PSNR is dominated by the few images whose trajectory bifurcates under any FP8 "
        "perturbation; the paired median gain over W8A8-everywhere and the share of images improved are the "
        "robust comparison. Differences are far below what the eye sees in `grid.png`; the amplified rows show "
        "where they are.\n";
  if (!r["notes"].empty()) {
    md << "\n## Notes\n\n";
    for (const json& n : r["notes"]) md << "- " << n.get<std::string>() << "\n";
  }
  return md.str();
}

}  // namespace stepmix
