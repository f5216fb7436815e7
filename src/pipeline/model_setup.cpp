#include "pipeline/model_setup.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "pipeline/vae_stage.hpp"
#include "stepmix/error.hpp"
#include "vae/config.hpp"

namespace stepmix {
namespace fs = std::filesystem;
using json = nlohmann::json;

ModelDefaults read_model_defaults(const ModelDirectory& dir) {
  ModelDefaults d;
  if (dir.model_index.is_object() && dir.model_index.contains("use_native_flow_schedule")) {
    const json& v = dir.model_index["use_native_flow_schedule"];
    if (!v.is_boolean())
      throw Error("config", dir.model_index_path.value_or("model_index.json") +
                                ": use_native_flow_schedule: expected true or false, got " + v.dump());
    d.native_flow_schedule = v.get<bool>();
  }
  if (const auto vae = vae_folder_of(dir)) {
    const vae::VaeConfig config = vae::read_vae_config((fs::path(*vae) / "config.json").string());
    d.spatial_factor = config.spatial_factor();
    d.temporal_factor = config.temporal_factor();
  }
  if (!dir.model_index.is_object() || !dir.model_index.contains("stepmix")) return d;
  const json& s = dir.model_index["stepmix"];
  const std::string where = dir.model_index_path.value_or("model_index.json") + ": stepmix.";
  if (!s.is_object()) throw Error("config", where.substr(0, where.size() - 1) + ": expected an object");
  // stepmix's own section: a key it does not know is a typo, not a default.
  for (const auto& [key, value] : s.items())
    if (key != "height" && key != "width" && key != "num_frames" && key != "num_inference_steps" &&
        key != "guidance_scale")
      throw Error("config", where + key +
                                ": no such field (expected height, width, num_frames, "
                                "num_inference_steps, guidance_scale)");
  // Defaults obey the limits of a request (stepmix/model.hpp).
  auto int_key = [&](const char* key, int64_t max, std::optional<int>& out) {
    if (!s.contains(key)) return;
    const json& v = s[key];
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= uint64_t(max)
                          : v.is_number_integer() ? v.get<int64_t>() >= 1 && v.get<int64_t>() <= max
                                                  : false;
    if (!in_range)
      throw Error("config", where + key + ": expected an integer in [1, " + std::to_string(max) + "], got " + v.dump());
    out = v.get<int>();
  };
  int_key("height", kMaxPixels, d.height);
  int_key("width", kMaxPixels, d.width);
  int_key("num_frames", kMaxFrames, d.frames);
  int_key("num_inference_steps", kMaxSteps, d.steps);
  if (s.contains("guidance_scale")) {
    const json& v = s["guidance_scale"];
    if (!v.is_number() || v.is_boolean() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
        v.get<double>() > kMaxGuidance)
      throw Error("config", where + "guidance_scale: expected a finite number in [0, 100], got " + v.dump());
    d.guidance = v.get<double>();
  }
  return d;
}

void check_steps_value(int steps, const std::string& component, const std::string& field) {
  if (steps < 1 || steps > kMaxSteps)
    throw Error(component, field + ": expected an integer in [1, " + std::to_string(kMaxSteps) + "], got " +
                               std::to_string(steps));
}

void check_guidance_value(double guidance, const std::string& component, const std::string& field) {
  if (!std::isfinite(guidance) || guidance < 0 || guidance > kMaxGuidance)
    throw Error(component, field + ": expected a finite number in [0, " + std::to_string(int(kMaxGuidance)) +
                               "], got " + Error::number(guidance));
}

void check_fps_value(double fps, const std::string& component, const std::string& field) {
  if (!(fps >= kMinFps && fps <= kMaxFps))
    throw Error(component, field + ": expected a number in [" + Error::number(kMinFps) + ", " +
                               Error::number(kMaxFps) + "], got " + Error::number(fps));
}

void refuse_request_field(bool set, const std::string& component, const std::string& field, const std::string& source) {
  if (set)
    throw Error(component, "request." + field + " is not used here (" + source + "); leave it unset");
}

std::optional<std::string> check_negative_prompt_has_a_pass(const GenerateRequest& r, const Sampling& sampling,
                                                            const std::string& component) {
  if (sampling.guidance != 1.0 || (!r.negative_prompt && !r.negative_prompt_ids)) return std::nullopt;
  if (sampling.fixed)
    return "the negative prompt is ignored: " + sampling.scheduler_source +
           " is a distilled build's scheduler, which runs one pass per step (guidance 1)";
  throw Error(component, std::string(r.negative_prompt ? "--negative-prompt" : "--negative-prompt-ids") +
                             ": guidance 1 runs no unconditional pass, so the negative prompt would be ignored; "
                             "drop it or give a --guidance other than 1");
}

void check_prompt_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& source,
                      const std::string& component, const std::string& config_path) {
  if (ids.size() > text::kMaxPromptIds)
    throw Error(component, source + ": " + std::to_string(ids.size()) + " token ids, more than the " +
                               std::to_string(text::kMaxPromptIds) + " a Cosmos3 transformer takes");
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw Error(component, source + ": id " + std::to_string(ids[i]) + " (position " + std::to_string(i) +
                                 ") is outside the vocabulary [0, " + std::to_string(vocab_size) + ") of " +
                                 config_path);
}

bool is_pixel_space(const ModelDirectory& dir) {
  return dir.transformer_dir != dir.root && !fs::exists(fs::path(dir.root) / "vae");
}

std::vector<int64_t> parse_id_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw Error("request", option + ": expected comma-separated integers, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw Error("generate", option + ": expected at least one integer");
  return out;
}

std::array<int64_t, 4> latent_shape_for(const GeometryRequest& r, const ModelDirectory& dir, int64_t channels,
                                        const ModelDefaults& defaults) {
  // A latent of more than 2^28 values (1 GiB of FP32) is refused before any allocation.
  constexpr int64_t kMaxLatentValues = int64_t(1) << 28;
  auto check_size = [&](const std::array<int64_t, 4>& s) {
    int64_t n = 1;
    for (int64_t d : s) {
      if (d < 1 || d > kMaxLatentValues || n > kMaxLatentValues / d)
        throw Error("generate", "latent " + std::to_string(s[0]) + "," + std::to_string(s[1]) + "," +
                                    std::to_string(s[2]) + "," + std::to_string(s[3]) +
                                    " is empty or larger than the limit of 2^28 values");
      n *= d;
    }
    return s;
  };
  if (r.latent_shape) {
    if (r.height || r.width || r.frames)
      throw Error("generate", "--latent-shape conflicts with --height/--width/--frames");
    const auto s = *r.latent_shape;
    if (s[0] != channels || s[1] < 1 || s[2] < 1 || s[3] < 1)
      throw Error("generate", "--latent-shape: expected C,T,H,W with C = " + std::to_string(channels) +
                                  " (the model's latent_channel) and positive T, H, W; got " + std::to_string(s[0]) +
                                  "," + std::to_string(s[1]) + "," + std::to_string(s[2]) + "," + std::to_string(s[3]));
    return check_size({s[0], s[1], s[2], s[3]});
  }
  const int64_t frames = request_frames(r, dir, defaults);
  if (frames < 1) throw Error("generate", "--frames: expected an integer >= 1");
  const bool video = frames > 1;
  const int height = r.height ? *r.height : defaults.height.value_or(video ? kDefaultVideoHeight : kDefaultImageSize);
  const int width = r.width ? *r.width : defaults.width.value_or(video ? kDefaultVideoWidth : kDefaultImageSize);
  if (height <= 0 || width <= 0) throw Error("generate", "--height and --width: expected positive integers");
  if (is_pixel_space(dir)) return check_size({channels, frames, height, width});
  const int64_t sf = defaults.spatial_factor, tf = defaults.temporal_factor;
  if (height % sf || width % sf)
    throw Error("generate", "--height and --width must be positive multiples of " + std::to_string(sf) +
                                " (the VAE's spatial factor)");
  return check_size({channels, (frames - 1) / tf + 1, height / sf, width / sf});
}

int64_t request_frames(const GeometryRequest& r, const ModelDirectory& dir, const ModelDefaults& defaults) {
  if (r.latent_shape) {
    const int64_t T = (*r.latent_shape)[1], tf = defaults.temporal_factor;
    if (is_pixel_space(dir) || T < 1) return T;
    // A shape too large for any run is refused with the shape
    // (latent_shape_for); here it only has to read as a video.
    if (T - 1 > (std::numeric_limits<int64_t>::max() - 1) / tf) return std::numeric_limits<int64_t>::max();
    return tf * (T - 1) + 1;
  }
  return r.frames ? *r.frames : defaults.frames.value_or(kDefaultFrames);
}

int default_steps(const ModelDefaults& defaults, bool video) {
  return defaults.steps.value_or(video ? kDefaultVideoSteps : kDefaultImageSteps);
}

sched::SchedulerConfig scheduler_config_for(const SchedulerRequest& r, const ModelDirectory& dir,
                                            const ModelDefaults& defaults, bool video) {
  sched::SchedulerConfig config;
  if (r.config_file) {
    config = sched::load_scheduler_config(*r.config_file);
  } else if (dir.scheduler_config_path) {
    config = sched::load_scheduler_config(*dir.scheduler_config_path);
  } else {
    // No scheduler in the model: UniPC as the Cosmos3 docs configure it.
    config = sched::parse_scheduler_config(
        {{"_class_name", "UniPCMultistepScheduler"}, {"prediction_type", "flow_prediction"}, {"use_flow_sigmas", true},
         {"flow_shift", video ? 10.0 : 3.0}},
        "default UniPC (flow_shift " + std::string(video ? "10" : "3") + ")");
  }
  sched::SchedulerOverrides o;
  if (r.kind) {
    if (*r.kind == "unipc")
      o.kind = sched::SchedulerKind::unipc_multistep;
    else if (*r.kind == "euler")
      o.kind = sched::SchedulerKind::flow_match_euler;
    else
      throw Error("generate", "--scheduler: expected unipc or euler, got '" + *r.kind + "'");
  }
  const sched::SchedulerKind kind = o.kind.value_or(config.kind);
  // Karras kept only where it is UniPC's grid: the file's, under UniPC.
  const bool karras = r.keep_karras && kind == sched::SchedulerKind::unipc_multistep &&
                      config.kind == sched::SchedulerKind::unipc_multistep && config.unipc.use_karras_sigmas;
  if (r.keep_karras && !karras)
    throw Error("generate",
                "--karras-sigmas: " + config.source +
                    " asks for no Karras sigmas under UniPC (use_karras_sigmas false, or another scheduler)");
  // As the Cosmos3 video examples and vLLM-Omni, for either scheduler.
  if (!karras) o.use_karras_sigmas = false;
  o.native_flow_grid = defaults.native_flow_schedule;
  // The flag lives in model_index.json, the scheduler kind in the scheduler
  // file or the request: the refusal names both (apply_overrides checks the
  // same without knowing where each came from).
  if (o.native_flow_grid && kind != sched::SchedulerKind::unipc_multistep)
    throw Error("config", dir.model_index_path.value_or("model_index.json") +
                              ": use_native_flow_schedule true: implemented for UniPC only, but the scheduler is " +
                              std::string(sched::scheduler_kind_name(kind)) + " (" +
                              (r.kind ? "--scheduler " + *r.kind : config.source) + "); set it false or run UniPC");
  o.flow_shift = r.flow_shift;
  if (r.bf16_latents) o.precision = sched::Precision::bf16_emulation;
  // UniPC's flow_shift is a request value (the runtimes override the file's
  // per request): unset, the mode's default whenever UniPC runs. FlowMatch
  // Euler keeps the file's shift (a distilled build's 1.0 with its fixed
  // sigmas; a UniPC file's flow_shift under --scheduler euler).
  if (!o.flow_shift && !karras && kind == sched::SchedulerKind::unipc_multistep) {
    const double shift = video ? kDefaultVideoFlowShift : kDefaultImageFlowShift;
    const double file_shift = sched::shift_of(config);
    if (file_shift != shift) {
      std::ostringstream note;
      note << "flow_shift " << shift << " (the " << (video ? "video" : "image") << " default; " << config.source
           << " has " << file_shift << "): --flow-shift sets it";
      config.notes.push_back(note.str());
    }
    o.flow_shift = shift;
  }
  sched::apply_overrides(config, o);
  return config;
}

Sampling resolve_sampling(const sched::SchedulerConfig& config, std::optional<int> steps,
                          std::optional<double> guidance, int default_steps, double default_guidance,
                          const std::string& component) {
  const bool fixed =
      config.kind == sched::SchedulerKind::flow_match_euler && !config.flow_match.explicit_sigmas.empty();
  if (!fixed) return {steps.value_or(default_steps), guidance.value_or(default_guidance), false, config.source};
  const int n = int(config.flow_match.explicit_sigmas.size());
  const std::string what = config.source + " is a distilled build's scheduler (fixed_step_sampler_config)";
  if (steps && *steps != n)
    throw Error(component, "--steps: " + what + ", which samples its " + std::to_string(n) +
                               " fixed sigmas: expected " + std::to_string(n) + ", got " + std::to_string(*steps));
  if (guidance && *guidance != 1.0)
    throw Error(component, "--guidance: " + what + ", whose guidance is in the weights: expected 1, got " +
                               Error::number(*guidance));
  return {n, 1.0, true, config.source};
}

PromptGeometry prompt_geometry_for(const GeometryRequest& r, const std::array<int64_t, 4>& shape,
                                   const ModelDirectory& dir, const ModelDefaults& defaults, double fps,
                                   std::optional<bool> use_system_prompt, bool resolution_sentence,
                                   bool duration_sentence) {
  const auto [C, T, H, W] = shape;
  PromptGeometry g;
  const bool pixels = is_pixel_space(dir);
  const int64_t sf = defaults.spatial_factor;
  g.height = r.height ? *r.height : pixels ? H : sf * H;
  g.width = r.width ? *r.width : pixels ? W : sf * W;
  // The frame count asked for (the request's, else the model's default),
  // which the duration sentence states even where the latent decodes to
  // fewer frames (190 asked: 48 latent frames, 189 decoded, "19.0 seconds"
  // at 10 fps); a latent shape stands for the frames it decodes to.
  g.frames = request_frames(r, dir, defaults);
  g.fps = fps;
  g.use_system_prompt = use_system_prompt;
  g.resolution_sentence = resolution_sentence;
  g.duration_sentence = duration_sentence;
  return g;
}

text::PromptModel& PromptEncoder::model() {
  const std::lock_guard<std::mutex> lock(load_mutex_);
  if (!model_) {
    if (!dir_.tokenizer_path)
      throw Error("prompt", dir_.root +
                                " has no text_tokenizer/tokenizer.json to encode a text prompt; give token ids instead "
                                "(--prompt-ids and --negative-prompt-ids, or ids:1,2,3 lines in a prompts file)");
    model_ = text::PromptModel::open(dir_.root);
  }
  return *model_;
}

namespace {

text::Cosmos3PromptRequest prompt_request(const std::string& prompt, const std::string& negative,
                                          const PromptGeometry& g) {
  text::Cosmos3PromptRequest r;
  r.prompt = prompt;
  r.negative_prompt = negative;
  r.height = g.height;
  r.width = g.width;
  r.num_frames = g.frames;
  r.fps = g.fps;
  r.use_system_prompt = g.use_system_prompt;
  r.resolution_sentence = g.resolution_sentence;
  r.duration_sentence = g.duration_sentence;
  return r;
}

}  // namespace

namespace {

// A word of a prompt (or of a vocabulary) quoted in a warning: one harmless
// line, with at most 80 bytes of a long word.
std::string quoted_word(const std::string& word) {
  constexpr std::size_t kMaxBytes = 80;
  if (word.size() <= kMaxBytes) return "\"" + Error::visible(word) + "\"";
  std::size_t cut = kMaxBytes;
  while (cut > 0 && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) --cut;  // a UTF-8 boundary
  return "\"" + Error::visible(word.substr(0, cut)) + "...\" (" + std::to_string(word.size()) + " bytes)";
}

}  // namespace

std::vector<int64_t> PromptEncoder::plain_prefix(const std::string& text, const char* which,
                                                 std::vector<std::string>* warnings) {
  std::vector<std::string> unknown;
  std::vector<int64_t> ids = model().understanding_prefix(text, warnings ? &unknown : nullptr);
  for (const std::string& word : unknown) {
    std::string nearest;
    for (const std::string& w : model().tokenizer().nearest_words(word, 3))
      nearest += (nearest.empty() ? "" : ", ") + Error::visible(w);
    warnings->push_back(std::string(which) + " word " + quoted_word(word) + " is not in the vocabulary of " +
                        *dir_.tokenizer_path + " and reads as its unknown token, like any unknown word" +
                        (nearest.empty() ? std::string() : "; nearest: " + nearest));
  }
  return ids;
}

std::vector<int64_t> PromptEncoder::encode(const std::string& text, const PromptGeometry& geometry,
                                           std::vector<std::string>* warnings) {
  const text::PromptModel& m = model();
  if (!m.is_cosmos3_chat()) return plain_prefix(text, "prompt", warnings);
  return m.build(prompt_request(text, "", geometry)).positive_ids;
}

EncodedPrompts PromptEncoder::encode_pair(const std::optional<std::string>& prompt, const std::string& negative,
                                          bool with_uncond, const PromptGeometry& geometry,
                                          std::vector<std::string>* warnings) {
  const text::PromptModel& m = model();
  EncodedPrompts e;
  if (!m.is_cosmos3_chat()) {
    if (prompt) e.cond = plain_prefix(*prompt, "prompt", warnings);
    if (with_uncond) e.uncond = plain_prefix(negative, "negative prompt", warnings);
    return e;
  }
  // The negative prefix does not depend on the positive text.
  const text::Cosmos3Prompt built = m.build(prompt_request(prompt.value_or(""), negative, geometry));
  if (prompt) {
    e.cond = built.positive_ids;
    e.cond_rendered_bytes = built.positive_rendered.size();
  }
  if (with_uncond) {
    e.uncond = built.negative_ids;
    e.uncond_rendered_bytes = built.negative_rendered.size();
  }
  return e;
}

}  // namespace stepmix
