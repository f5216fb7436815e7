#include "options.hpp"

#include <algorithm>
#include <climits>
#include <csignal>

namespace stepmix::cli {
namespace {

std::array<int64_t, 4> parse_latent_shape(const std::string& text, const char* command) {
  const std::vector<int64_t> s = parse_id_list(text, "--latent-shape");
  if (s.size() != 4)
    throw Error(command, "--latent-shape: expected C,T,H,W (four integers), got '" + text + "'");
  return {s[0], s[1], s[2], s[3]};
}

CancelToken* g_cancel = nullptr;
extern "C" void on_sigint(int) {
  if (g_cancel) g_cancel->cancel();
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

}  // namespace

const CLI::Validator& non_empty() {
  // CLI11 would take an empty value as "not given" and keep the default.
  static const CLI::Validator v([](std::string& value) { return value.empty() ? std::string("empty value") : std::string(); },
                                "", "non-empty");
  return v;
}

void require_decimal_numbers(CLI::App& app) {
  // An integer: an optional sign, then 0 or digits without a leading zero.
  static const CLI::Validator integer(
      [](std::string& value) {
        std::size_t i = (!value.empty() && (value[0] == '-' || value[0] == '+')) ? 1 : 0;
        const bool digits = i < value.size() && value.find_first_not_of("0123456789", i) == std::string::npos;
        if (digits && (value[i] != '0' || value.size() == i + 1)) return std::string();
        return value.empty() ? std::string("empty value") : "expected a decimal integer, got '" + value + "'";
      },
      "", "decimal integer");
  // A real number: anything but a hexadecimal float (0x1p1); the options'
  // own checks refuse nan and inf with their ranges.
  static const CLI::Validator real(
      [](std::string& value) {
        if (value.empty()) return std::string("empty value");
        return value.find_first_of("xX") == std::string::npos ? std::string()
                                                               : "expected a decimal number, got '" + value + "'";
      },
      "", "decimal number");
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type == "INT" || type == "UINT") option->check(integer);
    if (type == "FLOAT") option->check(real);
  }
  for (CLI::App* sub : app.get_subcommands({})) require_decimal_numbers(*sub);
}

GenerateRequest RequestOptions::to_request(const char* command) const {
  GenerateRequest r;
  r.prompt = prompt;
  if (prompt_ids) r.prompt_ids = parse_id_list(*prompt_ids, "--prompt-ids");
  r.negative_prompt = negative_prompt;
  if (negative_prompt_ids) r.negative_prompt_ids = parse_id_list(*negative_prompt_ids, "--negative-prompt-ids");
  if (latent_shape) {
    if (height || width || frames) throw Error(command, "--latent-shape conflicts with --height/--width/--frames");
    r.latent_shape = parse_latent_shape(*latent_shape, command);
  }
  r.height = height;
  r.width = width;
  r.frames = frames;
  r.steps = steps;
  r.guidance = guidance;
  r.scheduler = scheduler;
  r.flow_shift = flow_shift;
  r.karras_sigmas = karras_sigmas;
  r.scheduler_config = scheduler_config;
  r.fps = fps;
  if (scheduler && *scheduler != "unipc" && *scheduler != "euler")
    throw Error(command, "--scheduler: expected unipc or euler, got '" + *scheduler + "'");
  if (steps && (*steps < 1 || *steps > kMaxSteps))
    throw Error(command, "--steps: expected an integer in [1, " + std::to_string(kMaxSteps) + "], got " +
                             std::to_string(*steps));
  return r;
}

void add_request_options(CLI::App& cmd, RequestOptions& o, unsigned groups, const std::string& sampling_defaults) {
  if (groups & kPromptText) {
    cmd.add_option("-p,--prompt", o.prompt, "Text prompt (needs the model's text_tokenizer/tokenizer.json)");
    cmd.add_option("--prompt-ids", o.prompt_ids, "Complete understanding prefix as ids, used as given: 1,2,3");
  }
  if (groups & kNegativePrompt) {
    cmd.add_option("-n,--negative-prompt", o.negative_prompt, "Unconditional prompt text (default: empty)");
    cmd.add_option("--negative-prompt-ids", o.negative_prompt_ids, "Unconditional prefix as ids");
  }
  if (groups & kGeometry) {
    cmd.add_option("-H,--height", o.height,
                   "Height in pixels (default: the model's, else 720 for a video, 1024 for an image)")
        ->check(non_empty());
    cmd.add_option("-W,--width", o.width,
                   "Width in pixels (default: the model's, else 1280 for a video, 1024 for an image)")
        ->check(non_empty());
    cmd.add_option("--frames", o.frames,
                   "Number of frames, 1 = an image (default: the model's, else 189, a video of 720 x 1280)")
        ->check(non_empty());
    cmd.add_option("--latent-shape", o.latent_shape, "Latent shape C,T,H,W (instead of height/width/frames)");
  }
  if (groups & kSampling) {
    cmd.add_option("--steps", o.steps, "Denoising steps (default: " + sampling_defaults + ")")->check(non_empty());
    cmd.add_option("--guidance", o.guidance, "Classifier-free guidance scale, 1 = off (default: see --steps)")->check(non_empty());
  }
  if (groups & kScheduler) {
    cmd.add_option("--scheduler", o.scheduler, "unipc or euler (default: the model's scheduler_config.json)");
    cmd.add_option("--flow-shift", o.flow_shift,
                   "Flow shift of the sigma schedule (default: UniPC 10 for a video, 3 for an image; FlowMatch Euler "
                   "its scheduler_config.json's shift)")
        ->check(non_empty());
    cmd.add_flag("--karras-sigmas", o.karras_sigmas,
                 "Keep a UniPC scheduler_config.json's use_karras_sigmas true (Diffusers' pipeline on the checkpoint's "
                 "own scheduler; the shift then has no effect) instead of the flow grid with the request's shift");
  }
  if (groups & kSchedulerConfig)
    cmd.add_option("--scheduler-config", o.scheduler_config, "A Diffusers scheduler_config.json");
  if (groups & kFps)
    cmd.add_option("--fps", o.fps, "Frames per second (videos)")->default_val(kDefaultFps)->check(non_empty());
}

ModelOptions RuntimeOptions::model_options() const {
  if (threads) set_thread_count(*threads);
  ModelOptions m;
  m.check_tensors = check_tensors;
  m.weight_cache = parse_weight_cache(weight_cache);
  m.w8a16_rounding = parse_w8a16_rounding(w8a16_rounding);
  m.device = parse_device(device);
  m.activations = activation_dtype_option(activations, m.device);
  return m;
}

ActivationDType activation_dtype_option(const std::optional<std::string>& word, Device device) {
  return word ? parse_activation_dtype(*word) : default_activation_dtype(device);
}

const char* const kActivationsDefaultHelp = "Default: f32 on the CPU, bf16 on cuda (the only one it runs)";

void add_runtime_options(CLI::App& cmd, RuntimeOptions& o) {
  cmd.add_option("--activations", o.activations,
                 "Activation dtype of the Linears: f32 (matches float32 references) or bf16 (16-bit activations as "
                 "production runtimes use; faster). " +
                     std::string(kActivationsDefaultHelp));
  cmd.add_option("--weight-cache", o.weight_cache,
                 "none: FP8 weights stay 1 byte/parameter; all: keep a BF16 copy (2 bytes/parameter more; "
                 "--activations bf16)")
      ->default_val("none");
  cmd.add_option("--w8a16-rounding", o.w8a16_rounding,
                 "W8A16 weight with bf16 activations: single (bf16(code*scale), one rounding) or diffusers "
                 "(bf16(code*bf16(scale)), as Diffusers/SGLang/TensorRT-LLM; for bit-parity tests)")
      ->default_val("single");
  cmd.add_option("--device", o.device, "cpu or cuda (a build with the CUDA backend)")
      ->default_val("cpu")
      ->envname("STEPMIX_DEVICE");
  cmd.add_option("-t,--threads", o.threads, "Threads (default: STEPMIX_THREADS, else every hardware thread)")->check(non_empty());
  cmd.add_flag("--check-tensors", o.check_tensors, "Scan every weight for NaN and infinities when loading");
}

PolicyOverrides PolicyOptions::overrides() const {
  PolicyOverrides o;
  o.mode = parse_mixed_precision_mode(mixed_precision);
  // Any count at least the number of steps makes the same plan: a larger one
  // than an int holds is taken as INT_MAX, as in a checkpoint.
  // Negative ones are refused with the value given (an int64 below INT_MIN
  // would wrap to another number).
  const auto saturated = [](std::optional<int64_t> count, const char* field) -> std::optional<int> {
    if (!count) return std::nullopt;
    if (*count < 0)
      throw Error("policy",
                  std::string("override ") + field + ": expected an integer >= 0, got " + std::to_string(*count));
    return int(std::min<int64_t>(*count, INT_MAX));
  };
  o.first_steps = saturated(first_steps, "first_steps");
  o.last_steps = saturated(last_steps, "last_steps");
  if (reasoner) o.reasoner = parse_reasoner_mode(*reasoner);
  if (overlap) o.overlap = parse_overlap_mode(*overlap);
  return o;
}

void add_policy_options(CLI::App& cmd, PolicyOptions& o) {
  cmd.add_option("--mixed-precision", o.mixed_precision,
                 "auto (follow the checkpoint), none (schedule off), fp8 (force; default 3/3)")
      ->default_val("auto");
  cmd.add_option("--first-steps", o.first_steps, "Override the number of leading W8A16 steps")->check(non_empty());
  cmd.add_option("--last-steps", o.last_steps, "Override the number of trailing W8A16 steps")->check(non_empty());
  cmd.add_option("--reasoner", o.reasoner, "Reasoner tower precision: a16 or native");
  cmd.add_option("--overlap", o.overlap, "Steps inside both windows: a16 or native");
}

void with_ctrl_c_cancelling(CancelToken& cancel, const std::function<void()>& body) {
  cancel.reset();
  g_cancel = &cancel;
  auto previous = std::signal(SIGINT, on_sigint);
  try {
    body();
  } catch (...) {
    std::signal(SIGINT, previous);
    g_cancel = nullptr;
    throw;
  }
  std::signal(SIGINT, previous);
  g_cancel = nullptr;
}

}  // namespace stepmix::cli
