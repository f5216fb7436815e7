// What `stepmix compare` measured, and the report it writes from that:
// report.json (every number), report.md (a short reading guide), a PNG grid
// of the outputs with amplified difference maps, and a PNG plot of the
// per-step latent error (report_png.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <functional>

namespace stepmix {

// Text → the understanding prefix (stepmix::Model::encode_prompt).
using PromptEncoderFn = std::function<std::vector<int64_t>(const std::string&)>;

// One line of a prompts file (see read_compare_prompts).

struct ComparePrompt {
  std::string text;          // as written (ids included, without the label)
  std::vector<int64_t> ids;  // the understanding prefix
  std::optional<int> label;  // class index, for classifier accuracy
};

// Prompts file, one prompt per line:
//   a photo of a coat                 text (encoded with the model's tokenizer)
//   ids:3,4,5,1,2                     a complete understanding prefix
//   a photo of a coat	label:4        either form, a class index after whitespace
//   {"prompt": "a photo of a coat", "label": 4}     JSON line ("ids": [..] instead
//                                                   of "prompt" for ids)
// Blank lines and lines starting with '#' are skipped. Throws
// stepmix::Error("compare") naming the file and line.
std::vector<ComparePrompt> read_compare_prompts(const std::string& path, const PromptEncoderFn& encode);

// One column of the comparison. Index 0 is always the reference.
struct CompareMode {
  std::string name;         // "reference", "w8a16", "w8a8", "mixed", "first-last:F,L"
  std::string description;  // one phrase, e.g. "W8A8 on every step (schedule off)"
  std::string trace;        // e.g. "W8A16x3 / W8A8x2 / W8A16x3"
  std::string source;       // the policy source (resolve_policy)
  std::string reasoner;     // reasoner tower precision token
};

struct CompareSetup {
  std::string model;
  std::string reference;  // "bf16 checkpoint DIR" or "w8a16 on every step of --model"
  std::optional<std::string> reference_path;
  int steps = 0;
  double guidance = 1;
  int seeds = 0;                          // seeds 0..seeds-1 per prompt
  std::array<int64_t, 4> latent_shape{};  // C, T, H, W
  bool pixel_space = true;                // false: metrics on the latent clamped to [-1, 1]
  std::string scheduler;
  std::vector<ComparePrompt> prompts;
  std::optional<std::string> classifier;  // folder, when accuracy is reported
  std::vector<std::string> classes;
  double diff_gain = 10;           // amplification of the difference maps
  std::vector<std::string> notes;  // e.g. why the classifier was skipped
};

// Everything measured, indexed [mode][image]; image i is prompt i / seeds,
// seed i % seeds. Mode 0 is the reference.
struct CompareRun {
  std::vector<CompareMode> modes;
  std::vector<std::vector<std::vector<float>>> outputs;      // final output [C,T,H,W]
  std::vector<std::vector<std::vector<double>>> step_error;  // ||x_i − x_i^ref|| / ||x_i^ref|| per step
  std::vector<std::vector<int>> predicted;                   // class, -1 without classifier

  std::size_t image_count() const { return outputs.empty() ? 0 : outputs.front().size(); }
};

// Per-image PSNR is capped here, so that an image identical to the reference
// yields a finite paired gain.
inline constexpr double kPsnrCapDb = 100.0;

// The report (see README "Evidence"). Deterministic: the same run gives the
// same bytes (no wall times, no output paths).
nlohmann::json compare_report_json(const CompareSetup& setup, const CompareRun& run);
// report.md from report.json.
std::string compare_report_markdown(const nlohmann::json& report);

}  // namespace stepmix
