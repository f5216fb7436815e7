// Command-line options shared by the commands, declared once with their
// defaults: the request fields (prompt, geometry, sampling, scheduler), how
// the model runs (--activations, --device, --weight-cache, --w8a16-rounding,
// --threads, --check-tensors) and the step
// policy (--mixed-precision and its per-field overrides). Each command picks
// the groups it takes; every value is checked before any model is loaded.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "stepmix/model.hpp"

namespace stepmix::cli {

// Refuses an empty value ("--steps ''"), which CLI11 would treat as not given.
const CLI::Validator& non_empty();
// Numeric options of every command of `app` read decimal numbers only:
// CLI11 alone also takes 0x10 (16), 010 (8, octal) and 0b10 (2).
void require_decimal_numbers(CLI::App& app);

// Groups of request options (a command adds the ones it takes).
enum RequestGroups : unsigned {
  kPromptText = 1u << 0,      // --prompt, --prompt-ids
  kNegativePrompt = 1u << 1,  // --negative-prompt, --negative-prompt-ids
  kGeometry = 1u << 2,        // --height, --width, --frames, --latent-shape
  kSampling = 1u << 3,        // --steps, --guidance
  kScheduler = 1u << 4,       // --scheduler, --flow-shift
  kSchedulerConfig = 1u << 5, // --scheduler-config
  kFps = 1u << 6,             // --fps
};

struct RequestOptions {
  std::optional<std::string> prompt, prompt_ids, negative_prompt, negative_prompt_ids;
  std::optional<int> height, width, frames;
  std::optional<std::string> latent_shape;
  std::optional<int> steps;
  std::optional<double> guidance;
  std::optional<std::string> scheduler, scheduler_config;
  std::optional<double> flow_shift;
  bool karras_sigmas = false;
  double fps = kDefaultFps;

  // The request these options describe (ids and shapes parsed, checked).
  // `command` ("generate", "bench", ...) tags the errors.
  GenerateRequest to_request(const char* command) const;
};

// `sampling_defaults` names where unset steps/guidance come from, for the help text.
void add_request_options(CLI::App& cmd, RequestOptions& o, unsigned groups,
                         const std::string& sampling_defaults =
                             "the model's, else 35 steps for a video and 50 for "
                             "an image, guidance 6");

struct RuntimeOptions {
  std::optional<std::string> activations;  // unset: default_activation_dtype(device)
  std::string weight_cache = "none";
  std::string w8a16_rounding = "single";
  std::string device = "cpu";
  std::optional<int> threads;
  bool check_tensors = false;

  // Checked words → ModelOptions (throws naming the option); sets the
  // thread count when given.
  ModelOptions model_options() const;
};
void add_runtime_options(CLI::App& cmd, RuntimeOptions& o);
// --activations of the commands that run a model or the VAE: the word given,
// checked, else the device's default (f32 on the CPU, bf16 on cuda).
ActivationDType activation_dtype_option(const std::optional<std::string>& word, Device device);
extern const char* const kActivationsDefaultHelp;

struct PolicyOptions {
  std::string mixed_precision = "auto";
  std::optional<int64_t> first_steps;  // beyond INT_MAX: INT_MAX (the same plan)
  std::optional<int64_t> last_steps;
  std::optional<std::string> reasoner;
  std::optional<std::string> overlap;

  // Validates the words (throws stepmix::Error on bad values).
  PolicyOverrides overrides() const;
};
void add_policy_options(CLI::App& cmd, PolicyOptions& o);

// Runs `body` with the first Ctrl-C turned into `cancel` (a second one ends
// the process at once); the previous handler is back before it returns.
void with_ctrl_c_cancelling(CancelToken& cancel, const std::function<void()>& body);

}  // namespace stepmix::cli
