// stepmix::Model (include/stepmix/model.hpp): a model directory opened once,
// requests resolved into plans, plans run by the denoising loop.
#include "stepmix/model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/byte_count.hpp"
#include "core/non_finite.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "io/check_tensors.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"
#include "model/checkpoint_check.hpp"
#include "model/memory_estimate.hpp"
#include "model/transformer.hpp"
#include "pipeline/denoise.hpp"
#include "pipeline/memory_estimate.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/noise.hpp"
#include "pipeline/sequence.hpp"
#include "pipeline/vae_stage.hpp"

namespace stepmix {
namespace fs = std::filesystem;

struct Model::Impl {
  Impl(ModelDirectory d, const ModelOptions& o)
      : dir(std::move(d)),
        options(o),
        defaults(read_model_defaults(dir)),
        store(TensorStore::open_folder(dir.transformer_dir)),
        transformer(load_checked(dir, store, o)),
        sequence(read_sequence_settings(dir.config, dir.config_path)),
        encoder(dir) {}

  // With ModelOptions::check_tensors every weight is scanned for NaN and
  // infinities before the model is built.
  static Cosmos3Transformer load_checked(const ModelDirectory& dir, const TensorStore& store, const ModelOptions& o) {
    Backend& backend = backend_for(o.device, o.activations);  // a missing GPU first, before any weight is read
    if (o.check_tensors) check_tensors(store);
    return Cosmos3Transformer::load(store, dir.config, dir.config_path, o.weight_cache, backend, o.w8a16_rounding);
  }

  ModelDirectory dir;
  ModelOptions options;
  ModelDefaults defaults;
  TensorStore store;
  Cosmos3Transformer transformer;
  SequenceSettings sequence;
  mutable PromptEncoder encoder;  // loads the tokenizer on first use
  std::optional<VaeStage> vae;    // vae/: headers read at open, halves loaded on first use
  ModelInfo info;

  // Refuses a CPU request whose estimate does not fit in the memory budget
  // (a device backend checks its own memory: device_estimate).
  void check_memory(const DenoiseRequest& request) const {
    if (transformer.backend().device() != Device::Cpu) return;
    const std::optional<int64_t> available = memory_budget_bytes();
    if (!available) return;
    check_generation_fits(estimate_memory(request), *available, dir.transformer_dir);
  }

  // Both CFG passes of a step in one forward (ModelOptions::batch_cfg,
  // STEPMIX_CFG_BATCH) when the up-front memory check admits it; else one
  // pass at a time, which needs less and gives the same bits, and a note
  // says why. Where one at a time does not fit either, the check refuses
  // (the refusal is the one line then).
  bool decide_cfg_batching(GeneratePlan& p) const {
    if (p.guidance == 1.0 || !options.batch_cfg || !cfg_batching_from_environment()) return false;
    DenoiseRequest r = request_of(p);
    r.batch_cfg = true;
    const std::optional<Backend::MemoryNeed> together = memory_need(r);
    if (!together || together->fits()) return true;
    r.batch_cfg = false;
    const std::optional<Backend::MemoryNeed> apart = memory_need(r);
    if (apart && !apart->fits()) return false;
    p.notes.push_back("CFG: the two passes of each step run one at a time (the same results): one forward for both " +
                      describe_shortfall(int64_t(together->needed), int64_t(together->free)) +
                      (transformer.backend().device() == Device::Cpu ? "" : " on the GPU"));
    return false;
  }

  // What the up-front check weighs for `r`: on the CPU the estimate's
  // additional bytes against the budget (MemAvailable, STEPMIX_MEMORY_LIMIT_MIB),
  // on a device its estimate against free device memory; nothing where
  // nothing is checked (STEPMIX_MEMORY_CHECK=0, no budget known).
  std::optional<Backend::MemoryNeed> memory_need(const DenoiseRequest& r) const {
    if (!memory_check_enabled()) return std::nullopt;
    const Backend& backend = transformer.backend();
    if (backend.device() != Device::Cpu) return backend.memory_need(device_estimate(r, r.batch_cfg));
    const std::optional<int64_t> budget = memory_budget_bytes();
    if (!budget) return std::nullopt;
    return Backend::MemoryNeed{std::size_t(std::max<int64_t>(0, estimate_memory(r).additional_bytes())),
                               std::size_t(*budget)};
  }

  // The loop's request for a plan (the noise and the frame rate are the caller's).
  DenoiseRequest request_of(const GeneratePlan& p) const {
    DenoiseRequest r;
    r.cond_ids = p.cond_ids;
    r.uncond_ids = p.uncond_ids;
    r.latent_shape = p.latent_shape;
    r.guidance = p.guidance;
    r.activations = options.activations;
    r.batch_cfg = p.cfg_batched;
    r.condition_frames = p.condition_frames;
    r.bf16_latents = p.bf16_latents;
    return r;
  }

  // What a generation on a device backend needs there
  // (model/memory_estimate.hpp): both prompts with CFG, the loop's latent-sized
  // buffers.
  DeviceMemoryEstimate device_estimate(const DenoiseRequest& r, bool batched) const {
    const auto [C, T, H, W] = r.latent_shape;
    const bool cfg = r.guidance != 1.0;
    const std::array<int64_t, 2> prompts{int64_t(r.cond_ids.size()), int64_t(r.uncond_ids.size())};
    const PatchGrid grid{C, T, H, W, transformer.config().latent_patch_size};
    return estimate_run_memory(transformer, std::span(prompts.data(), cfg ? 2 : 1), grid, grid.tokens(),
                               r.activations, denoise_on_backend_latent_buffers(cfg, r.conditions_any_frame()),
                               batched);
  }

  MemoryEstimate estimate_memory(const DenoiseRequest& request) const {
    const Cosmos3Config& c = transformer.config();
    const auto [C, T, H, W] = request.latent_shape;
    const int64_t p = c.latent_patch_size;
    GenerationShape shape;
    shape.vision_tokens = T * ((H + p - 1) / p) * ((W + p - 1) / p);
    shape.cond_text_tokens = int64_t(request.cond_ids.size());
    shape.uncond_text_tokens = request.guidance != 1.0 ? int64_t(request.uncond_ids.size()) : 0;
    shape.cfg_batched = request.batch_cfg;
    shape.bf16_activations = request.activations == ActivationDType::BF16;
    return estimate_generation_memory(c, shape, mapped_weight_file_bytes(dir.transformer_dir),
                                      mapped_resident_bytes(dir.transformer_dir), int64_t(transformer.workspace_bytes()));
  }

  sched::SchedulerConfig scheduler_config(const GenerateRequest& r, bool video) const {
    return scheduler_config_for({r.scheduler_config, r.scheduler, r.flow_shift, r.bf16_latents, r.karras_sigmas}, dir,
                                defaults, video);
  }
};

namespace {

// Calls the request's callbacks from the loop's observer hooks.
class CallbackObserver final : public DenoiseObserver {
 public:
  explicit CallbackObserver(const GenerateCallbacks& callbacks) : callbacks_(callbacks) {}
  void on_step_begin(int step, int num_steps, Precision generation, Precision reasoner) override {
    event_ = {step, num_steps, generation, reasoner};
    if (callbacks_.on_step_begin) callbacks_.on_step_begin(event_);
  }
  void on_step_end(int, const std::vector<float>&, const std::vector<float>*, const std::vector<float>&,
                   const std::vector<float>& latent) override {
    if (callbacks_.on_step_end) callbacks_.on_step_end(event_, latent);
  }
  // Only the latent, and only for a step callback (a loop on the GPU copies
  // nothing else to the host).
  bool wants_velocities() const override { return false; }
  bool wants_latent() const override { return bool(callbacks_.on_step_end); }

 private:
  const GenerateCallbacks& callbacks_;
  StepEvent event_;
};

// Every number the request gives is finite and in a range stepmix can run,
// checked before anything is allocated (the model's defaults are checked
// when read, read_model_defaults).
void check_request_values(const GenerateRequest& r) {
  if (r.steps) check_steps_value(*r.steps, "generate", "--steps");
  if (r.guidance) check_guidance_value(*r.guidance, "generate", "--guidance");
  check_fps_value(r.fps, "generate", "--fps");
  if (r.flow_shift && !(*r.flow_shift >= sched::kMinFlowShift && *r.flow_shift <= sched::kMaxFlowShift))
    throw Error("generate", "--flow-shift: expected a number in " + sched::flow_shift_range_text() + ", got " +
                                Error::number(*r.flow_shift));
  if (r.frames && (*r.frames < 1 || *r.frames > kMaxFrames))
    throw Error("generate", "--frames: expected an integer in [1, " + std::to_string(kMaxFrames) + "], got " +
                                std::to_string(*r.frames));
  for (const auto& [name, v] : {std::pair{"--height", r.height}, std::pair{"--width", r.width}})
    if (v && (*v < 1 || *v > kMaxPixels))
      throw Error("generate", std::string(name) + ": expected an integer in [1, " + std::to_string(kMaxPixels) +
                                  "], got " + std::to_string(*v));
  if (r.noise)
    if (const auto bad = first_non_finite(r.noise->data(), r.noise->size()))
      throw Error("generate", "the initial noise holds a non-finite value at element " + std::to_string(*bad));
}

// The transformer's sequence is bounded too: more vision tokens than this is
// refused before any buffer is sized for it.
void check_token_count(const std::array<int64_t, 4>& shape, const Cosmos3Config& c) {
  const int64_t p = c.latent_patch_size;
  const int64_t tokens = shape[1] * ((shape[2] + p - 1) / p) * ((shape[3] + p - 1) / p);
  if (tokens > kMaxVisionTokens)
    throw Error("generate", "the latent " + std::to_string(shape[0]) + "," + std::to_string(shape[1]) + "," +
                                std::to_string(shape[2]) + "," + std::to_string(shape[3]) + " makes " +
                                std::to_string(tokens) + " vision tokens; stepmix runs at most " +
                                std::to_string(kMaxVisionTokens) + " (a 720p 189-frame video is 44160)");
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

namespace {

// Options that change only the W8A16 steps of bf16 activations would do
// nothing (and the cache would hold memory unused) otherwise: refused.
void check_bf16_weight_options(const ModelOptions& o, const std::string& path, std::optional<bool> has_fp8) {
  const auto check = [&](bool asked, const std::string& option) {
    if (!asked) return;
    if (o.activations != ActivationDType::BF16)
      throw Error("options", option + " applies to the W8A16 steps of bf16 activations only, and --activations is " +
                                 std::string(activation_dtype_name(o.activations)) + ": give --activations bf16");
    if (has_fp8 && !*has_fp8) throw Error("options", option + ": " + path + " has no FP8 Linears (nothing runs W8A16)");
  };
  check(o.weight_cache == WeightCache::All, "--weight-cache all");
  check(o.w8a16_rounding == W8A16Rounding::Diffusers, "--w8a16-rounding diffusers");
}

}  // namespace

namespace {

// The cache is made at load for every request; one whose plan has no W8A16
// Linear (--mixed-precision none, or a checkpoint without a policy) leaves it
// unused, which the caller should hear about: the memory is the model's.
std::optional<std::string> unused_weight_cache_warning(const ModelOptions& o, const StepPlan& plan,
                                                       std::size_t cache_bytes) {
  if (o.weight_cache != WeightCache::All) return std::nullopt;
  const bool any_w8a16 = plan.reasoner == Precision::W8A16 || std::find(plan.generation.begin(), plan.generation.end(),
                                                                        Precision::W8A16) != plan.generation.end();
  if (any_w8a16) return std::nullopt;
  return "--weight-cache all: no Linear of this run is W8A16 (generation " + trace_string(plan.generation) +
         ", reasoner " + std::string(precision_trace_token(plan.reasoner)) + "), so the " + format_bytes(cache_bytes) +
         " of BF16 weight copies go unused; drop --weight-cache all";
}

}  // namespace

ModelOptions reference_options(ModelOptions options) {
  options.weight_cache = WeightCache::None;
  options.w8a16_rounding = W8A16Rounding::Single;
  return options;
}

Model Model::open(const std::string& path, const ModelOptions& options) {
  ThreadPool::configured_size();  // STEPMIX_THREADS is checked on every device
  check_bf16_weight_options(options, path, std::nullopt);
  ModelDirectory dir = ModelDirectory::open(path);
  // The checkpoint's quantization and policy are checked before any weight is mapped.
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, {});
  auto impl = std::make_unique<Impl>(std::move(dir), options);
  ModelInfo& info = impl->info;
  info.path = path;
  info.transformer_dir = impl->dir.transformer_dir;
  info.has_fp8 = impl->transformer.has_fp8();
  check_bf16_weight_options(options, path, info.has_fp8);
  info.governed = impl->transformer.governed_counts();
  info.latent_channels = impl->transformer.config().latent_channel;
  info.pixel_space = is_pixel_space(impl->dir);
  if (const auto folder = vae_folder_of(impl->dir))
    impl->vae.emplace(*folder, info.latent_channels, options.activations, options.device);
  info.has_vae = impl->vae.has_value();
  info.has_tokenizer = impl->dir.tokenizer_path.has_value();
  // The config's warnings come with the directory's (printed once).
  info.warnings = model_directory_warnings(impl->dir);
  info.warnings.insert(info.warnings.end(), policy.warnings.begin(), policy.warnings.end());
  info.default_height = impl->defaults.height;
  info.default_width = impl->defaults.width;
  info.default_frames = impl->defaults.frames;
  info.default_steps = impl->defaults.steps;
  info.default_guidance = impl->defaults.guidance;
  return Model(std::move(impl));
}

const ModelInfo& Model::info() const { return impl_->info; }
const ModelOptions& Model::options() const { return impl_->options; }

std::vector<int64_t> Model::encode_prompt(const std::string& text, const GenerateRequest& r) const {
  const Impl& m = *impl_;
  const auto shape = latent_shape_for({r.latent_shape, r.height, r.width, r.frames}, m.dir,
                                      m.transformer.config().latent_channel, m.defaults);
  return m.encoder.encode(
      text, prompt_geometry_for({r.latent_shape, r.height, r.width, r.frames}, shape, m.dir, m.defaults, r.fps,
                                r.use_system_prompt, r.resolution_sentence, r.duration_sentence));
}

GeneratePlan Model::plan(const GenerateRequest& r) const {
  const Impl& m = *impl_;
  if (r.prompt && r.prompt_ids) throw Error("generate", "give --prompt or --prompt-ids, not both");
  if (!r.prompt && !r.prompt_ids) throw Error("generate", "a prompt is required: --prompt TEXT or --prompt-ids 1,2,3");
  if (r.negative_prompt && r.negative_prompt_ids)
    throw Error("generate", "give --negative-prompt or --negative-prompt-ids, not both");

  GeneratePlan p;
  if (r.bf16_latents && (m.options.activations != ActivationDType::BF16 || m.options.device != Device::Cpu))
    throw Error("generate",
                "--bf16-latents reproduces the Diffusers BF16 pipeline on the CPU: it needs "
                "--activations bf16 and --device cpu (this model runs " +
                    std::string(activation_dtype_name(m.options.activations)) + " on " +
                    std::string(device_name(m.options.device)) + ")");
  p.bf16_latents = r.bf16_latents;
  const GeometryRequest geometry{r.latent_shape, r.height, r.width, r.frames};
  p.video = request_frames(geometry, m.dir, m.defaults) > 1;
  // What the request gives is checked first (a --steps of 0 is out of range
  // before it is another count than a distilled build's); the model's
  // defaults were checked when read.
  check_request_values(r);
  const sched::SchedulerConfig scheduler_config = m.scheduler_config(r, p.video);
  const Sampling sampling = resolve_sampling(scheduler_config, r.steps, r.guidance, default_steps(m.defaults, p.video),
                                             m.defaults.guidance.value_or(kDefaultGuidance), "generate");
  p.steps = sampling.steps;
  p.guidance = sampling.guidance;
  p.policy = resolve_policy(m.dir.config, m.dir.config_path, r.policy);
  check_governed_counts(p.policy, m.transformer.governed_counts(), m.dir.transformer_dir);
  p.plan = plan_steps(p.policy, m.transformer.governed_counts(), p.steps);
  m.transformer.require_runnable(p.plan);  // a Linear the device cannot run at a step's precision
  p.log_line = mixed_precision_log_line(p.policy, p.plan);
  p.notes.insert(p.notes.end(), p.policy.notes.begin(), p.policy.notes.end());
  if (auto warning = unused_weight_cache_warning(m.options, p.plan, m.transformer.weight_cache_bytes()))
    p.warnings.push_back(*warning);

  p.latent_shape = latent_shape_for(geometry, m.dir, m.transformer.config().latent_channel, m.defaults);
  const int64_t C = p.latent_shape[0], T = p.latent_shape[1];
  check_token_count(p.latent_shape, m.transformer.config());
  p.decodes = m.vae.has_value();
  p.image_output = p.decodes || (is_pixel_space(m.dir) && (C == 1 || C == 3));
  p.fps = r.fps;
  p.condition_frames.assign(std::size_t(T), 0);
  if (r.image) {
    if (!m.vae)
      throw Error("generate", "--image " + *r.image + ": image-to-video needs a model with vae/ to encode the image; " +
                                  m.dir.root + " has none");
    if (T < 2)
      throw Error("generate", "--image " + *r.image + ": image-to-video needs a video of 5 or more frames (--frames), "
                              "got 1 latent frame");
    p.condition_frames[0] = 1;  // latent frame 0 depends on pixel frame 0 alone (the causal VAE)
    m.vae->check_encode_memory(p.latent_shape);
  }

  const bool cfg = p.guidance != 1.0;
  // A distilled build ignores its negative prompt with a warning (the Cosmos3
  // distilled pipeline's rule); elsewhere a negative prompt without CFG is an error.
  if (auto warning = check_negative_prompt_has_a_pass(r, sampling, "generate")) p.warnings.push_back(*warning);
  const bool uncond_from_text = cfg && !r.negative_prompt_ids;
  if (uncond_from_text && r.prompt_ids && !m.encoder.has_tokenizer()) {
    // Ids only and nothing to tokenize the empty negative prompt with: its
    // prefix is the two control ids every prefix ends with.
    if (r.prompt_ids->size() < 2)
      throw Error("generate", "--prompt-ids: a complete understanding prefix ends with the end-of-text and "
                              "<|vision_start|> ids; give --negative-prompt-ids too");
    p.uncond_ids.assign(r.prompt_ids->end() - 2, r.prompt_ids->end());
    p.notes.push_back("no tokenizer: the unconditional prefix is the empty prompt's, the last two ids of "
                      "--prompt-ids (" + std::to_string(p.uncond_ids[0]) + "," + std::to_string(p.uncond_ids[1]) +
                      "); give --negative-prompt-ids to choose it");
  } else if (r.prompt || uncond_from_text) {
    const EncodedPrompts e =
        m.encoder.encode_pair(r.prompt_ids ? std::nullopt : r.prompt, r.negative_prompt.value_or(""), uncond_from_text,
                              prompt_geometry_for(geometry, p.latent_shape, m.dir, m.defaults, r.fps,
                                                  r.use_system_prompt, r.resolution_sentence, r.duration_sentence),
                              &p.warnings);
    p.cond_ids = e.cond;
    p.uncond_ids = e.uncond;
    p.cond_rendered_bytes = e.cond_rendered_bytes;
    p.uncond_rendered_bytes = e.uncond_rendered_bytes;
  }
  if (r.prompt_ids) p.cond_ids = *r.prompt_ids;
  if (r.negative_prompt_ids && cfg) p.uncond_ids = *r.negative_prompt_ids;  // with CFG only (checked above)
  // Ids beyond the embedding table are refused here, naming where they came
  // from, before the plan is printed (not as a forward input mid-run).
  const int64_t vocab = m.transformer.config().vocab_size;
  const std::string tokenizer = m.dir.tokenizer_path.value_or("the tokenizer");
  const std::string cond_source = r.prompt_ids ? "--prompt-ids" : "the ids " + tokenizer + " gives --prompt";
  std::string uncond_source = "the ids " + tokenizer + " gives the negative prompt";
  if (r.negative_prompt_ids)
    uncond_source = "--negative-prompt-ids";
  else if (r.prompt_ids && !m.encoder.has_tokenizer())
    uncond_source = "the unconditional prefix taken from --prompt-ids";
  check_prompt_ids(p.cond_ids, vocab, cond_source, "generate", m.dir.config_path);
  check_prompt_ids(p.uncond_ids, vocab, uncond_source, "generate", m.dir.config_path);
  // The longer prefix puts the frames furthest (a huge base_fps, say).
  check_temporal_positions(int64_t(std::max(p.cond_ids.size(), p.uncond_ids.size())), p.latent_shape[1], r.fps,
                           m.sequence);
  p.cfg_batched = m.decide_cfg_batching(p);

  p.notes.insert(p.notes.end(), scheduler_config.notes.begin(), scheduler_config.notes.end());
  auto scheduler = sched::make_scheduler(scheduler_config);
  scheduler->set_timesteps(p.steps);
  p.scheduler = scheduler->name();
  p.flow_shift = sched::shift_of(scheduler_config);
  p.karras_sigmas =
      scheduler_config.kind == sched::SchedulerKind::unipc_multistep && scheduler_config.unipc.use_karras_sigmas;
  p.timesteps = scheduler->timesteps();
  p.sigmas.assign(scheduler->sigmas().begin(), scheduler->sigmas().end());
  return p;
}

GenerateResult Model::generate(const GenerateRequest& r, const GenerateCallbacks& callbacks,
                               const CancelToken* cancel) {
  Impl& m = *impl_;
  GenerateResult result;
  result.plan = plan(r);
  const GeneratePlan& p = result.plan;
  const auto [C, T, H, W] = p.latent_shape;
  // Before the image's latent is copied into the noise, which must hold
  // every value of the latent for that.
  if (r.noise && r.noise->size() != std::size_t(C * T * H * W))
    throw Error("generate", "initial noise has " + std::to_string(r.noise->size()) + " values, the latent " +
                                shape_string({1, C, T, H, W}) + " needs " + std::to_string(C * T * H * W));
  // A token cancelled before the call stops it before the first step.
  if (cancel && cancel->cancelled()) throw Cancelled(0, p.steps);

  DenoiseRequest request = m.request_of(p);
  request.fps = r.fps;
  m.check_memory(request);  // before anything the size of the request is allocated
  auto generator = std::make_shared<NormalGenerator>(r.seed);
  request.noise = r.noise ? *r.noise : generator->normals(std::size_t(C * T * H * W));
  if (r.image) {
    // The clean latent of the image replaces the noise of frame 0.
    const int64_t sf = m.vae->sizes().config().spatial_factor();
    const std::vector<float> frame0 = m.vae->encode_condition_image(*r.image, H * sf, W * sf);
    for (int64_t c = 0; c < C; ++c)
      std::copy_n(frame0.begin() + c * H * W, H * W, request.noise.begin() + c * T * H * W);
  }
  if (p.bf16_latents)  // the initial latent as a BF16 pipeline holds it
    for (float& x : request.noise) x = bf16_to_float(float_to_bf16_rne(x));

  // A GPU run that would not fit is refused before the first step; with
  // batched CFG the forward holds both passes' activations at once.
  if (m.transformer.backend().device() != Device::Cpu)
    m.transformer.backend().require_memory(m.device_estimate(request, denoise_batches_cfg(m.transformer, request)),
                                           "generate at latent " + shape_string({1, C, T, H, W}));

  auto scheduler = sched::make_scheduler(m.scheduler_config(r, p.video));
  draw_step_noise_from(*scheduler, generator);
  StepController controller(p.plan);
  CallbackObserver observer(callbacks);
  const auto start = std::chrono::steady_clock::now();
  DenoiseResult run = denoise(m.transformer, *scheduler, controller, request, m.sequence, &observer,
                              cancel ? &cancel->flag() : nullptr);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.latent = std::move(run.latent);
  result.trace = std::move(run.trace);
  result.reasoner = run.reasoner;
  result.transformer_calls = run.transformer_calls;
  return result;
}

GenerateRequest sampled_exactly(GenerateRequest r, const GeneratePlan& p) {
  r.prompt.reset();
  r.prompt_ids = p.cond_ids;
  r.negative_prompt.reset();
  r.negative_prompt_ids = p.uncond_ids.empty() ? std::nullopt : std::optional(p.uncond_ids);
  r.steps = p.steps;
  r.guidance = p.guidance;
  r.latent_shape = p.latent_shape;
  r.height.reset();
  r.width.reset();
  r.frames.reset();
  // The shape alone would read 2 to 4 frames (one latent frame) as an image.
  r.flow_shift = p.flow_shift;
  return r;
}

int64_t Model::weight_bytes_resident() const {
  return mapped_resident_bytes(impl_->dir.transformer_dir) + weight_cache_bytes();
}

std::vector<std::string> Model::weight_files() const {
  std::vector<std::string> files;
  for (const auto& f : impl_->store.files()) files.push_back(f->path());
  return files;
}

const VaeStage* vae_stage_of(const Model& model) { return model.impl_->vae ? &*model.impl_->vae : nullptr; }

int64_t Model::weight_cache_bytes() const { return int64_t(impl_->transformer.weight_cache_bytes()); }

int64_t Model::device_memory_peak_bytes() const { return int64_t(impl_->transformer.backend().memory_peak()); }
void Model::reset_device_memory_peak() { impl_->transformer.backend().reset_memory_peak(); }

std::vector<NamedTensor> Model::forward_file(const std::string& inputs_path,
                                                    std::optional<Precision> precision, bool dump_hidden) {
  Cosmos3Transformer& t = impl_->transformer;
  const Precision native = t.has_fp8() ? Precision::W8A8 : Precision::BF16;
  const Precision p = precision.value_or(native);
  const std::string& folder = impl_->dir.transformer_dir;
  if (p == Precision::BF16 && t.has_fp8())
    throw Error("forward", "--precision dense: " + folder +
                               " is a ModelOpt FP8 checkpoint (its governed Linears run w8a16 or w8a8); "
                               "point --model at the BF16 checkpoint for dense arithmetic");
  if (p != Precision::BF16 && !t.has_fp8())
    throw Error("forward", "--precision " + std::string(precision_json_name(p)) + ": " + folder +
                               " is a BF16 checkpoint without FP8 Linears; use --precision dense or an FP8 checkpoint");

  const auto file = SafetensorsFile::open(inputs_path);
  const ForwardInputs inputs = read_forward_inputs(*file);
  const ForwardGeometry geometry = resolve_forward_geometry(inputs, t.config());
  const std::array<int64_t, 1> prompt{geometry.und_len};
  require_run_memory(t, prompt, geometry.grid, geometry.noisy_tokens(), impl_->options.activations,
                     "forward of " + inputs_path);
  ForwardDebug debug;
  HostTensor velocity = t.forward(inputs, {p, p, impl_->options.activations, dump_hidden ? &debug : nullptr});
  std::vector<NamedTensor> out{{"velocity", std::move(velocity.shape), std::move(velocity.data)}};
  for (auto& [name, tensor] : debug.tensors) out.push_back({name, std::move(tensor.shape), std::move(tensor.data)});
  // Finite inputs and checked weights can still overflow (activations past
  // the float range): such a result is refused, never written.
  for (const NamedTensor& t : out)
    if (const auto bad = first_non_finite(t.data.data(), t.data.size()))
      throw Error("forward", "the forward of " + inputs_path + " made tensor '" + t.name +
                                 "' non-finite (element " + std::to_string(*bad) + "); nothing was written");
  return out;
}

}  // namespace stepmix
