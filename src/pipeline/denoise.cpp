#include "pipeline/denoise.hpp"

#include <algorithm>

namespace stepmix {

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
  // conditioned frames at zero; the guided velocity is zeroed there too, so
  // no rounding of the CFG combination can move them.
  auto zero_conditioned = [&](std::vector<float>& v) {
    for (int64_t f = 0; f < T; ++f)
      if (!request.condition_frames.empty() && request.condition_frames[std::size_t(f)])
        for (int64_t c = 0; c < C; ++c) std::fill_n(v.begin() + (c * T + f) * H * W, H * W, 0.0f);
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
      return transformer.forward(in, options).data;
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
    zero_conditioned(guided);
    scheduler.step(guided.data(), t, latent.data(), numel);
    if (observer) observer->on_step_end(i, v_cond, cfg ? &v_uncond : nullptr, guided, latent);
    if (cancel && cancel->load() && i + 1 < N) throw Cancelled(i + 1, N);
  }
  result.trace = controller.recorded_trace();
  result.reasoner = controller.plan().reasoner;
  result.latent = std::move(latent);
  return result;
}

}  // namespace stepmix
