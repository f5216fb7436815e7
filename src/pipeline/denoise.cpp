#include "pipeline/denoise.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

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

bool cfg_batching_from_environment() {
  const char* env = std::getenv("STEPMIX_CFG_BATCH");
  if (!env || std::string(env) == "1") return true;
  if (std::string(env) == "0") return false;
  throw Error("generate", std::string("STEPMIX_CFG_BATCH: expected 0 or 1, got '") + env + "'");
}

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

  const bool batched = request.batch_cfg && !transformer.has_activation_code_hook();
  DenoiseResult result;
  std::vector<float> latent = request.noise;
  std::vector<float> guided(numel);
  auto run_scope = controller.run_scope();  // resets to native on every exit path
  for (int i = 0; i < N; ++i) {
    controller.begin_step(i);
    const ForwardOptions options{controller.generation(), controller.reasoner(), request.activations};
    if (observer) observer->on_step_begin(i, N, controller.generation(), controller.reasoner());
    const double t = scheduler.timesteps()[std::size_t(i)];

    auto prepare = [&](ForwardInputs& in, CfgPass pass) {
      in.latent.data = latent;
      in.timesteps.assign(1, float(t));
      if (observer) observer->on_pass(i, pass);
      ++result.transformer_calls;
    };
    // A non-finite velocity stops the loop, naming the first non-finite
    // tensor of that pass (rerun alone: a batched pass gives the same bits).
    auto check_velocity = [&](const std::vector<float>& v, const ForwardInputs& in, CfgPass pass) {
      if (!first_non_finite(v.data(), v.size())) return;
      const std::string where =
          first_non_finite_tensor(transformer, in, options, transformer.config().num_hidden_layers);
      throw Error("generate", "step " + std::to_string(i + 1) + " of " + std::to_string(N) + " (" +
                                  (pass == CfgPass::Conditional ? "conditional" : "unconditional") + " pass at " +
                                  std::string(precision_trace_token(options.generation)) +
                                  "): the velocity is not finite; the first non-finite tensor is " + where +
                                  " (a NaN or infinity in the weights, --check-tensors finds it, or values past "
                                  "the float range); nothing was written");
    };
    std::vector<float> v_cond, v_uncond;
    if (cfg && batched) {
      prepare(cond, CfgPass::Conditional);
      prepare(uncond, CfgPass::Unconditional);
      const ForwardInputs* both[2] = {&cond, &uncond};
      std::vector<HostTensor> v = transformer.forward_batch(both, options);
      v_cond = std::move(v[0].data);
      v_uncond = std::move(v[1].data);
      ++result.batched_steps;
    } else {
      prepare(cond, CfgPass::Conditional);
      v_cond = transformer.forward(cond, options).data;
      if (cfg) {
        prepare(uncond, CfgPass::Unconditional);
        v_uncond = transformer.forward(uncond, options).data;
      }
    }
    check_velocity(v_cond, cond, CfgPass::Conditional);
    if (cfg) check_velocity(v_uncond, uncond, CfgPass::Unconditional);
    if (cfg) {
      const float g = float(request.guidance);
      for (std::size_t k = 0; k < numel; ++k) guided[k] = v_uncond[k] + g * (v_cond[k] - v_uncond[k]);
    } else {
      std::copy(v_cond.begin(), v_cond.end(), guided.begin());
    }
    scheduler.step(guided.data(), t, latent.data(), numel);
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
