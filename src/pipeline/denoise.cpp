#include "pipeline/denoise.hpp"

#include <algorithm>
#include <functional>

#include "core/non_finite.hpp"

namespace stepmix {
namespace {

// The first intermediate tensor of a forward (in the order it computes them)
// holding NaN or an infinity: the forward is run again with every tensor
// recorded, only after its output was found non-finite.
std::string first_non_finite_tensor(Cosmos3Transformer& transformer, const ForwardInputs& in, ForwardOptions options,
                                    int64_t layers) {
  ForwardDebug debug;
  options.debug = &debug;
  transformer.forward(in, options);
  std::vector<std::string> order{"und_embed"};
  for (int64_t k = 0; k < layers; ++k) order.push_back("und_hidden." + std::to_string(k));
  for (const char* name : {"vision_proj_in", "timestep_embed", "gen_embed"}) order.emplace_back(name);
  for (int64_t k = 0; k < layers; ++k) order.push_back("gen_hidden." + std::to_string(k));
  for (const char* name : {"gen_final_norm", "packed_pred"}) order.emplace_back(name);
  for (const std::string& name : order) {
    auto it = debug.tensors.find(name);
    if (it != debug.tensors.end() && first_non_finite(it->second.data.data(), it->second.data.size()))
      return name;
  }
  return "the read-out";
}

}  // namespace

DenoiseResult denoise(Cosmos3Transformer& transformer, sched::Scheduler& scheduler, StepController& controller,
                      const DenoiseRequest& request, const SequenceSettings& settings, DenoiseObserver* observer,
                      const std::atomic<bool>* cancel) {
  const auto [C, T, H, W] = request.latent_shape;
  const std::size_t numel = std::size_t(C * T * H * W);
  if (C <= 0 || T <= 0 || H <= 0 || W <= 0)
    throw Error("generate", "latent shape must be positive, got " + std::to_string(C) + "," + std::to_string(T) + "," +
                                std::to_string(H) + "," + std::to_string(W));
  if (request.noise.size() != numel)
    throw Error("generate", "initial noise has " + std::to_string(request.noise.size()) + " values, the latent needs " +
                                std::to_string(numel));
  if (request.cond_ids.empty()) throw Error("generate", "the conditional prompt has no tokens");
  const bool cfg = request.guidance != 1.0;
  if (cfg && request.uncond_ids.empty()) throw Error("generate", "guidance needs an unconditional prompt with tokens");

  const int N = int(controller.plan().generation.size());
  scheduler.set_timesteps(N);
  if (scheduler.num_steps() != N)
    throw Error("generate", "scheduler made " + std::to_string(scheduler.num_steps()) + " timesteps for " +
                                std::to_string(N) + " planned steps");

  // Sequence layout and position ids are fixed for the request.
  ForwardInputs cond = make_pass_inputs(request.cond_ids, request.latent_shape, request.fps, settings);
  ForwardInputs uncond;
  if (cfg) uncond = make_pass_inputs(request.uncond_ids, request.latent_shape, request.fps, settings);
  if (!request.condition_frames.empty()) {
    if (request.condition_frames.size() != std::size_t(T))
      throw Error("generate", "condition_frames has " + std::to_string(request.condition_frames.size()) +
                                  " entries for " + std::to_string(T) + " latent frames");
    cond.condition_frame_mask = uncond.condition_frame_mask = request.condition_frames;
  }
  // Velocity · (1 − mask): the transformer's read-out already leaves the
  // conditioned frames at zero; the guided velocity is zeroed there too. With
  // zero velocity a deterministic step keeps a frame up to rounding (UniPC
  // rebuilds it as (σ_t/σ_s)·x + α_t(1 − e^−h)·x), a stochastic one would
  // re-noise it; so after every step the conditioned frames get their clean
  // values back, as the image-to-video pipelines blend the condition in.
  std::vector<int64_t> conditioned;
  for (int64_t f = 0; f < int64_t(request.condition_frames.size()); ++f)
    if (request.condition_frames[std::size_t(f)]) conditioned.push_back(f);
  auto for_conditioned = [&](const std::function<void(int64_t offset)>& body) {
    for (int64_t f : conditioned)
      for (int64_t c = 0; c < C; ++c) body((c * T + f) * H * W);
  };

  DenoiseResult result;
  std::vector<float> latent = request.noise;
  std::vector<float> guided(numel);
  auto run_scope = controller.run_scope();  // resets to native on every exit path
  for (int i = 0; i < N; ++i) {
    controller.begin_step(i);
    const ForwardOptions options{controller.generation(), controller.reasoner(), request.activations};
    if (observer) observer->on_step_begin(i, N, controller.generation(), controller.reasoner());
    const double t = scheduler.timesteps()[std::size_t(i)];

    auto run_pass = [&](ForwardInputs& in, CfgPass pass) {
      in.latent.data = latent;
      in.timesteps.assign(1, float(t));
      if (observer) observer->on_pass(i, pass);
      ++result.transformer_calls;
      std::vector<float> v = transformer.forward(in, options).data;
      if (first_non_finite(v.data(), v.size())) {
        const std::string where =
            first_non_finite_tensor(transformer, in, options, transformer.config().num_hidden_layers);
        throw Error("generate", "step " + std::to_string(i + 1) + " of " + std::to_string(N) + " (" +
                                    (pass == CfgPass::Conditional ? "conditional" : "unconditional") + " pass at " +
                                    std::string(precision_trace_token(options.generation)) +
                                    "): the velocity is not finite; the first non-finite tensor is " + where +
                                    " (a NaN or infinity in the weights, --check-tensors finds it, or values past "
                                    "the float range); nothing was written");
      }
      return v;
    };
    const std::vector<float> v_cond = run_pass(cond, CfgPass::Conditional);
    std::vector<float> v_uncond;
    if (cfg) {
      v_uncond = run_pass(uncond, CfgPass::Unconditional);
      const float g = float(request.guidance);
      for (std::size_t k = 0; k < numel; ++k) guided[k] = v_uncond[k] + g * (v_cond[k] - v_uncond[k]);
    } else {
      std::copy(v_cond.begin(), v_cond.end(), guided.begin());
    }
    for_conditioned([&](int64_t at) { std::fill_n(guided.begin() + at, H * W, 0.0f); });
    scheduler.step(guided.data(), t, latent.data(), numel);
    for_conditioned([&](int64_t at) { std::copy_n(request.noise.begin() + at, H * W, latent.begin() + at); });
    if (first_non_finite(latent.data(), numel))
      throw Error("generate", "step " + std::to_string(i + 1) + " of " + std::to_string(N) +
                                  ": the scheduler update made the latent non-finite (guidance " +
                                  std::to_string(request.guidance) + "); nothing was written");
    if (observer) observer->on_step_end(i, v_cond, cfg ? &v_uncond : nullptr, guided, latent);
    if (cancel && cancel->load() && i + 1 < N) throw Cancelled(i + 1, N);
  }
  result.trace = controller.recorded_trace();
  result.reasoner = controller.plan().reasoner;
  result.latent = std::move(latent);
  return result;
}

}  // namespace stepmix
