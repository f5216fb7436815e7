#include "pipeline/quantize.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/numerics.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "io/file_access.hpp"
#include "io/output_set.hpp"
#include "quant/scale_bounds.hpp"
#include "model/transformer.hpp"
#include "pipeline/denoise.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/noise.hpp"
#include "quant/governed.hpp"
#include "stepmix/error.hpp"
#include "stepmix/tools.hpp"

namespace stepmix {
namespace fs = std::filesystem;
using json = nlohmann::json;

json modelopt_fp8_quantization_config(const std::optional<StepPolicy>& policy, bool with_runtime) {
  const json eight_bit_float = {{"num_bits", 8}, {"type", "float"}, {"dynamic", false}};
  json q = {
      {"quant_method", "modelopt"},
      {"quant_algo", "FP8"},
      {"quant_type", "FP8_FP8"},
      {"weight_only", false},
      {"producer", {{"name", "stepmix"}, {"version", STEPMIX_VERSION}}},
      {"config_groups",
       {{"group_0", {{"weights", eight_bit_float}, {"input_activations", eight_bit_float}, {"targets", {"Linear"}}}}}},
      {"ignore", {"proj_in", "proj_out", "time_embedder*", "audio_proj_in", "audio_proj_out", "action_proj_in",
                  "action_proj_out", "lm_head", "model.visual*", "visual*"}},
      {"modules_to_not_convert", {"proj_in", "proj_out", "time_embedder", "lm_head", "visual"}},
      {"calib_cfg", {{"method", "max"}}},
      {"block_quantize", nullptr},
      {"channel_quantize", nullptr},
      {"scale_block_quantize", nullptr},
      {"scale_channel_quantize", nullptr},
  };
  if (with_runtime) {
    if (!policy) {
      q["runtime"] = nullptr;
    } else {
      auto window = [](int count) { return json{{"count", count}, {"mode", "a16"}}; };
      q["runtime"] = {{"diffusion_step_policy",
                       {{"schema_version", 1},
                        {"type", "first_last_n"},
                        {"index_space", "denoising_loop_iteration"},
                        {"scope", policy->scope},
                        {"default_mode", "native"},
                        {"first_steps", window(policy->first_steps)},
                        {"last_steps", window(policy->last_steps)},
                        {"overlap", std::string(tower_mode_name(policy->overlap))},
                        {"reasoner", std::string(tower_mode_name(policy->reasoner))}}}};
    }
  }
  return q;
}

namespace {

// max|x| per governed Linear over every call it ran.
std::map<std::string, float> calibrate(Cosmos3Transformer& transformer, const ModelDirectory& dir,
                                       const CalibrationSettings& c, int& calls) {
  std::map<std::string, float> amax;
  transformer.for_each_governed_linear([&](Linear& linear) {
    amax[linear.name()] = 0.0f;
    linear.set_input_observer([&amax](const std::string& name, const float* x, const uint16_t* x_bf16, int64_t M,
                                      int64_t K) {
      float m = amax[name];
      for (int64_t i = 0; i < M * K; ++i) m = std::max(m, std::fabs(x ? x[i] : bf16_to_float(x_bf16[i])));
      amax[name] = m;
    });
  });
  // Every pass must run the reasoner Linears too, not only the first one.
  transformer.understanding_cache().set_capacity(0);

  const ResolvedPolicy dense_policy = resolve_policy(dir.config, dir.config_path, {});
  const SequenceSettings sequence = read_sequence_settings(dir.config, dir.config_path);
  auto scheduler = sched::make_scheduler(
      scheduler_config_for({c.scheduler_config, std::nullopt, std::nullopt}, dir, read_model_defaults(dir), c.video));
  const auto [C, T, H, W] = c.latent_shape;
  for (const auto& prompt : c.prompts) {
    for (int seed = 0; seed < c.seeds; ++seed) {
      StepController controller(plan_steps(dense_policy, false, c.steps));
      DenoiseRequest request;
      request.cond_ids = prompt;
      request.uncond_ids = c.negative_prompt;
      request.latent_shape = c.latent_shape;
      request.fps = c.fps;
      request.guidance = c.guidance;
      auto generator = std::make_shared<NormalGenerator>(uint64_t(seed));
      request.noise = generator->normals(std::size_t(C * T * H * W));
      draw_step_noise_from(*scheduler, generator);
      calls += denoise(transformer, *scheduler, controller, request, sequence).transformer_calls;
    }
  }
  transformer.for_each_governed_linear([](Linear& l) { l.set_input_observer({}); });
  return amax;
}

// E4M3 codes of a BF16/F32 weight and its scale s_w = max|W| / 448.
std::pair<std::vector<uint8_t>, float> quantize_weight(const TensorView& w, float& amax_out) {
  const int64_t n = w.numel();
  std::vector<float> values(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[std::size_t(i)] = w.dtype == DType::BF16 ? bf16_to_float(w.as<uint16_t>()[i]) : w.as<float>()[i];
  float amax = 0;
  for (float v : values) amax = std::max(amax, std::fabs(v));
  amax_out = amax;
  if (!(amax > 0) || !std::isfinite(amax))
    throw Error("quantize", w.file + ": tensor '" + w.name + "' has max|W| = " + std::to_string(amax) +
                                "; a tensorwise FP8 scale needs a finite non-zero weight");
  const float scale = amax / kE4M3Max;
  std::vector<uint8_t> codes(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) codes[i] = quantize_e4m3_saturating(values[i] / scale);
  return {std::move(codes), scale};
}

// What makes a model folder something to quantize, checked before prompts,
// tokenizer or calibration settings are looked at.
void check_quantizable(const ModelDirectory& dir, const std::string& model_dir) {
  if (dir.transformer_dir == dir.root)
    throw Error("quantize", model_dir + ": expected a Diffusers model directory (with transformer/)");
  if (dir.config.contains("quantization_config") && !dir.config["quantization_config"].is_null())
    throw Error("quantize", dir.config_path + ": quantization_config: the model is already quantized");
}

void copy_model_tree(const fs::path& from, const fs::path& to, const fs::path& skip) {
  for (const auto& entry : fs::directory_iterator(from)) {
    if (entry.path() == skip) continue;
    fs::copy(entry.path(), to / entry.path().filename(), fs::copy_options::recursive);
  }
}

}  // namespace

QuantizeReport quantize_checkpoint(const QuantizeSettings& s) {
  if (fs::exists(s.out_dir)) throw Error("quantize", s.out_dir + ": already exists; choose a new output directory");
  const ModelDirectory dir = ModelDirectory::open(s.model_dir);
  // The output folder is checked before hours of calibration, staged under a
  // temporary name and renamed into place when complete.
  OutputSet outputs;
  outputs.add_input("--model", dir.root);
  const OutputSet::Id folder = outputs.add_folder("--out", s.out_dir, false);
  outputs.validate();
  // The model's folders are copied into the output (linked ones followed):
  // an output inside the model, or inside a folder it links to, would be
  // copied into itself.
  {
    const std::string destination = outputs.destination(folder);
    std::error_code ec;
    std::vector<fs::path> copied{dir.root};
    for (const auto& entry : fs::directory_iterator(dir.root, ec))
      if (entry.is_directory(ec)) copied.push_back(entry.path());
    for (const fs::path& p : copied) {
      const std::string real = fs::weakly_canonical(p, ec).string();
      if (!ec && destination.rfind(real + "/", 0) == 0)
        throw Error("quantize", "--out " + s.out_dir + ": is inside " + p.string() + ", which is copied into it (" +
                                    s.model_dir + " is the model); choose a folder outside the model");
    }
  }
  check_quantizable(dir, s.model_dir);
  // The policy is checked as the output's config will be read, before the
  // calibration rather than by the first load of what it wrote.
  {
    json written = dir.config;
    written["quantization_config"] = modelopt_fp8_quantization_config(s.policy, true);
    parse_step_policy(written, "the policy to write (--policy)");
  }
  if (s.calibration.prompts.empty()) throw Error("quantize", "no calibration prompts");
  if (s.calibration.seeds < 1 || s.calibration.steps < 1)
    throw Error("quantize", "calibration needs at least one seed and one step");

  const TensorStore store = TensorStore::open_folder(dir.transformer_dir);
  Cosmos3Transformer transformer = Cosmos3Transformer::load(store, dir.config, dir.config_path);
  QuantizeReport report;
  report.input_amax = calibrate(transformer, dir, s.calibration, report.transformer_calls);

  // New tensor list: governed Linears become FP8 + scales, the rest is copied.
  const GovernedDiscovery governed = discover_governed_linears(store);
  std::map<std::string, const GovernedLinear*> by_weight;
  for (const auto& g : governed.linears) by_weight[g.module + ".weight"] = &g;
  std::vector<TensorToWrite> tensors;
  for (const std::string& name : store.names()) {
    const TensorView& t = store.get(name);
    auto it = by_weight.find(name);
    if (it == by_weight.end()) {
      tensors.push_back(make_tensor_raw(name, t.dtype, t.shape, t.data, t.nbytes));
      continue;
    }
    const std::string& module = it->second->module;
    const float x_amax = report.input_amax.at(module);
    if (!(x_amax > 0) || !std::isfinite(x_amax))
      throw Error("quantize", "Linear '" + module + "' saw max|x| = " + std::to_string(x_amax) +
                                  " during calibration; an input_scale needs finite non-zero activations");
    auto [codes, weight_scale] = quantize_weight(t, report.weight_amax[module]);
    const float input_scale = x_amax / kE4M3Max;
    for (const auto& [what, v] : {std::pair{"weight_scale", weight_scale}, std::pair{"input_scale", input_scale}})
      if (const auto problem = fp8_scale_problem(v))
        throw Error("quantize", "Linear '" + module + "': the calibrated " + what + " " + *problem +
                                    "; nothing was written");
    tensors.push_back(make_tensor_raw(name, DType::F8_E4M3, t.shape, codes.data(), codes.size()));
    tensors.push_back(make_tensor_raw(module + ".weight_scale", DType::F32, {}, &weight_scale, sizeof(float)));
    tensors.push_back(make_tensor_raw(module + ".input_scale", DType::F32, {}, &input_scale, sizeof(float)));
  }

  // Everything goes into the staged folder; commit() renames it into place.
  const fs::path tmp = outputs.stage_folder(folder);
  fs::create_directories(tmp / "transformer");
  copy_model_tree(dir.root, tmp, fs::path(dir.transformer_dir));
  for (const auto& entry : fs::directory_iterator(dir.transformer_dir)) {
    const std::string f = entry.path().filename().string();
    if (f == "config.json" || f.ends_with(".safetensors") || f.ends_with(".safetensors.index.json")) continue;
    fs::copy(entry.path(), tmp / "transformer" / f, fs::copy_options::recursive);
  }
  json config = dir.config;
  config["quantization_config"] = modelopt_fp8_quantization_config(s.policy, true);
  write_file_atomic((tmp / "transformer" / "config.json").string(), config.dump(2) + "\n");
  write_file_atomic((tmp / "hf_quant_config.json").string(),
                    modelopt_fp8_quantization_config(s.policy, false).dump(2) + "\n");
  write_safetensors((tmp / "transformer" / "diffusion_pytorch_model.safetensors").string(), tensors,
                    {{"format", "pt"}});
  outputs.commit();
  return report;
}

namespace {

// One prompt per line: text, or "ids:1,2,3" for a complete prefix. Blank
// lines and lines starting with '#' are skipped.
std::vector<std::vector<int64_t>> read_calibration_prompts(const std::string& path, PromptEncoder& encoder,
                                                           const PromptGeometry& geometry) {
  std::istringstream in(read_text_file_bounded(path, kMaxTextFileBytes, "--calib-prompts"));
  std::vector<std::vector<int64_t>> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    prompts.push_back(line.rfind("ids:", 0) == 0 ? parse_id_list(line.substr(4), path) : encoder.encode(line, geometry));
  }
  if (prompts.empty()) throw Error("quantize", path + ": no prompts");
  return prompts;
}

}  // namespace

void quantize(const QuantizeOptions& opt, std::FILE* out) {
  const ModelDirectory dir = ModelDirectory::open(opt.model_dir);
  check_quantizable(dir, opt.model_dir);
  const ModelDefaults defaults = read_model_defaults(dir);
  PromptEncoder encoder(dir);
  QuantizeSettings s;
  s.model_dir = opt.model_dir;
  s.out_dir = opt.out_dir;
  s.policy = opt.policy;

  const GenerateRequest& r = opt.request;
  const std::string prompts_source = "the calibration prompts come from calib_prompts";
  refuse_request_field(r.prompt.has_value(), "quantize", "prompt", prompts_source);
  refuse_request_field(r.prompt_ids.has_value(), "quantize", "prompt_ids", prompts_source);
  refuse_request_field(r.noise.has_value(), "quantize", "noise", "each trajectory's noise is drawn from its seed");
  refuse_request_field(r.image.has_value(), "quantize", "image", "calibration samples text-to-image or -video");
  refuse_request_field(r.seed != 0, "quantize", "seed", "the seeds are 0 .. calib_seeds - 1");
  const std::string scheduler_source =
      "calibration samples with the model's scheduler_config.json, or scheduler_config";
  refuse_request_field(r.scheduler.has_value(), "quantize", "scheduler", scheduler_source);
  refuse_request_field(r.flow_shift.has_value(), "quantize", "flow_shift", scheduler_source);
  refuse_request_field(r.policy.any_field() || r.policy.mode != MixedPrecisionMode::Auto, "quantize", "policy",
                       "calibration runs the BF16 model dense; the policy to write is QuantizeOptions::policy");
  check_fps_value(r.fps, "quantize", "request.fps");
  CalibrationSettings& c = s.calibration;
  const std::string prompts_file =
      opt.calib_prompts.value_or((fs::path(dir.root) / "calibration_prompts.txt").string());
  if (!opt.calib_prompts && !fs::exists(prompts_file))
    throw Error("quantize", "--calib-prompts FILE is required (" + prompts_file + " does not exist)");
  c.seeds = opt.calib_seeds;
  if (c.seeds < 1 || c.seeds > 10000)
    throw Error("quantize", "--calib-seeds: expected an integer in [1, 10000], got " + std::to_string(c.seeds));
  if (r.steps) check_steps_value(*r.steps, "quantize", "--steps");
  if (r.guidance) check_guidance_value(*r.guidance, "quantize", "--guidance");
  c.fps = r.fps;
  c.scheduler_config = r.scheduler_config;
  const Cosmos3Config transformer_config = parse_cosmos3_config(dir.config, dir.config_path).config;
  const int64_t channels = transformer_config.latent_channel;
  const GeometryRequest geometry{r.latent_shape, r.height, r.width, r.frames};
  c.latent_shape = latent_shape_for(geometry, dir, channels, defaults);
  c.video = request_frames(geometry, dir, defaults) > 1;
  // A distilled build's scheduler fixes the steps and the guidance, as for generate.
  const Sampling sampling =
      resolve_sampling(scheduler_config_for({c.scheduler_config, std::nullopt, std::nullopt}, dir, defaults, c.video),
                       r.steps, r.guidance, defaults.steps.value_or(kCalibrationSteps),
                       defaults.guidance.value_or(kCalibrationGuidance), "quantize");
  c.steps = sampling.steps;
  c.guidance = sampling.guidance;
  const PromptGeometry prompt_geometry =
      prompt_geometry_for(geometry, c.latent_shape, dir, defaults, r.fps, r.use_system_prompt);
  const bool cfg = c.guidance != 1.0;
  // A distilled build's negative prompt is ignored with a warning, as generate does.
  if (const auto warning = check_negative_prompt_has_a_pass(r, sampling, "quantize"))
    std::fprintf(stderr, "warning: %s\n", warning->c_str());
  if (cfg && !encoder.has_tokenizer() && !r.negative_prompt_ids)
    throw Error("quantize", dir.root + " has no text_tokenizer/tokenizer.json: give the unconditional prefix with "
                                       "--negative-prompt-ids and the calibration prompts as ids:1,2,3 lines");
  c.prompts = read_calibration_prompts(prompts_file, encoder, prompt_geometry);
  // Ids beyond the embedding table, named by prompt before any step runs.
  for (std::size_t p = 0; p < c.prompts.size(); ++p)
    check_prompt_ids(c.prompts[p], transformer_config.vocab_size, prompts_file + ": prompt " + std::to_string(p + 1),
                     "quantize", dir.config_path);
  if (cfg) {
    c.negative_prompt =
        r.negative_prompt_ids
            ? *r.negative_prompt_ids
            : encoder.encode_pair(std::nullopt, r.negative_prompt.value_or(""), true, prompt_geometry).uncond;
    check_prompt_ids(c.negative_prompt, transformer_config.vocab_size,
                     r.negative_prompt_ids ? "--negative-prompt-ids" : "the negative prompt", "quantize",
                     dir.config_path);
  }

  const QuantizeReport report = quantize_checkpoint(s);
  std::fprintf(out, "calibrated %zu governed Linears over %zu prompts x %d seeds x %d steps (%d transformer calls)\n",
               report.input_amax.size(), c.prompts.size(), c.seeds, c.steps, report.transformer_calls);
  const std::string policy = s.policy ? "first_last_n " + std::to_string(s.policy->first_steps) + "/" +
                                            std::to_string(s.policy->last_steps) + ", reasoner " +
                                            std::string(tower_mode_name(s.policy->reasoner))
                                      : "none (runtime: null)";
  std::fprintf(out, "policy: %s\n", policy.c_str());
  std::fprintf(out, "wrote %s\n", opt.out_dir.c_str());
}

}  // namespace stepmix
