#include "pipeline/denoise.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>

#include "core/non_finite.hpp"
#include "core/numerics.hpp"

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

// The errors of a non-finite velocity (with the first non-finite tensor of
// the pass, `in` holding the latent on the host) and of a non-finite latent
// after the scheduler update.
[[noreturn]] void throw_non_finite_velocity(Cosmos3Transformer& transformer, const ForwardInputs& in,
                                            const ForwardOptions& options, int step, int N, CfgPass pass) {
  const std::string where = first_non_finite_tensor(transformer, in, options, transformer.config().num_hidden_layers);
  throw Error("generate", "step " + std::to_string(step + 1) + " of " + std::to_string(N) + " (" +
                              (pass == CfgPass::Conditional ? "conditional" : "unconditional") + " pass at " +
                              std::string(precision_trace_token(options.generation)) +
                              "): the velocity is not finite; the first non-finite tensor is " + where +
                              " (a NaN or infinity in the weights, --check-tensors finds it, or values past "
                              "the float range); nothing was written");
}

[[noreturn]] void throw_non_finite_latent(int step, int N, double guidance) {
  throw Error("generate", "step " + std::to_string(step + 1) + " of " + std::to_string(N) +
                              ": the scheduler update made the latent non-finite (guidance " +
                              std::to_string(guidance) + "); nothing was written");
}

// The start of iteration i in both loops: the precision chosen once, before
// any pass, and announced; the options of both passes.
ForwardOptions begin_iteration(StepController& controller, DenoiseObserver* observer, int i, int N,
                               ActivationDType activations) {
  controller.begin_step(i);
  if (observer) observer->on_step_begin(i, N, controller.generation(), controller.reasoner());
  return {controller.generation(), controller.reasoner(), activations};
}

// What both loops set up the same way: the checked request, the scheduler
// set to the controller's N steps, the two passes' inputs.
struct LoopSetup {
  std::size_t numel = 0;
  int N = 0;
  bool cfg = false;
  ForwardInputs cond, uncond;
  // Image-to-video: the first element of every (channel, conditioned frame)
  // plane of `plane` values in the latent.
  std::vector<int64_t> conditioned;
  int64_t plane = 0;
};

LoopSetup set_up(sched::Scheduler& scheduler, const StepController& controller, const DenoiseRequest& request,
                 const SequenceSettings& settings) {
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
  LoopSetup setup;
  setup.numel = numel;
  setup.N = N;
  setup.cfg = cfg;
  setup.cond = make_pass_inputs(request.cond_ids, request.latent_shape, request.fps, settings);
  if (cfg) setup.uncond = make_pass_inputs(request.uncond_ids, request.latent_shape, request.fps, settings);
  if (!request.condition_frames.empty()) {
    if (request.condition_frames.size() != std::size_t(T))
      throw Error("generate", "condition_frames has " + std::to_string(request.condition_frames.size()) +
                                  " entries for " + std::to_string(T) + " latent frames");
    setup.cond.condition_frame_mask = setup.uncond.condition_frame_mask = request.condition_frames;
    for (int64_t f = 0; f < T; ++f)
      if (request.condition_frames[std::size_t(f)])
        for (int64_t c = 0; c < C; ++c) setup.conditioned.push_back((c * T + f) * H * W);
    setup.plane = H * W;
  }
  return setup;
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
  if (transformer.backend().device() != Device::Cpu)
    return denoise_on_backend(transformer, scheduler, controller, request, settings, observer, cancel);
  LoopSetup setup = set_up(scheduler, controller, request, settings);
  const std::size_t numel = setup.numel;
  const int N = setup.N;
  const bool cfg = setup.cfg;
  ForwardInputs& cond = setup.cond;
  ForwardInputs& uncond = setup.uncond;
  // Velocity · (1 − mask): the transformer's read-out already leaves the
  // conditioned frames at zero; the guided velocity is zeroed there too. With
  // zero velocity a deterministic step keeps a frame up to rounding (UniPC
  // rebuilds it as (σ_t/σ_s)·x + α_t(1 − e^−h)·x), a stochastic one would
  // re-noise it; so after every step the conditioned frames get their clean
  // values back, as the image-to-video pipelines blend the condition in.
  const auto for_conditioned = [&](const std::function<void(int64_t offset)>& body) {
    for (int64_t at : setup.conditioned) body(at);
  };
  const int64_t plane = setup.plane;

  const bool batched = denoise_batches_cfg(transformer, request);
  DenoiseResult result;
  std::vector<float> latent = request.noise;
  std::vector<float> guided(numel);
  auto run_scope = controller.run_scope();  // resets to native on every exit path
  for (int i = 0; i < N; ++i) {
    const ForwardOptions options = begin_iteration(controller, observer, i, N, request.activations);
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
      if (first_non_finite(v.data(), v.size())) throw_non_finite_velocity(transformer, in, options, i, N, pass);
    };
    std::vector<float> v_cond, v_uncond;
    if (batched) {
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
    if (cfg && request.bf16_latents) {
      // Diffusers' BF16 tensors: every elementwise result rounded, the
      // guidance scale too, in this order.
      const auto r = [](float x) { return bf16_to_float(float_to_bf16_rne(x)); };
      const float g = r(float(request.guidance));
      for (std::size_t k = 0; k < numel; ++k) {
        const float u = r(v_uncond[k]);
        guided[k] = r(u + r(g * r(r(v_cond[k]) - u)));
      }
    } else if (cfg) {
      const float g = float(request.guidance);
      for (std::size_t k = 0; k < numel; ++k) guided[k] = v_uncond[k] + g * (v_cond[k] - v_uncond[k]);
    } else {
      std::copy(v_cond.begin(), v_cond.end(), guided.begin());
    }
    for_conditioned([&](int64_t at) { std::fill_n(guided.begin() + at, plane, 0.0f); });
    scheduler.step(guided.data(), t, latent.data(), numel);
    for_conditioned([&](int64_t at) { std::copy_n(request.noise.begin() + at, plane, latent.begin() + at); });
    if (first_non_finite(latent.data(), numel)) throw_non_finite_latent(i, N, request.guidance);
    if (observer) observer->on_step_end(i, v_cond, cfg ? &v_uncond : nullptr, guided, latent);
    if (cancel && cancel->load() && i + 1 < N) throw Cancelled(i + 1, N);
  }
  result.trace = controller.recorded_trace();
  result.reasoner = controller.plan().reasoner;
  result.latent = std::move(latent);
  return result;
}

DenoiseResult denoise_on_backend(Cosmos3Transformer& transformer, sched::Scheduler& scheduler,
                                 StepController& controller, const DenoiseRequest& request,
                                 const SequenceSettings& settings, DenoiseObserver* observer,
                                 const std::atomic<bool>* cancel) {
  LoopSetup setup = set_up(scheduler, controller, request, settings);
  // The scheduler update runs on the device too: a configuration only the
  // host can step is refused here, before the first forward.
  if (const auto reason = scheduler.host_only_reason())
    throw Error("generate", "the scheduler cannot step a latent on the device: " + *reason + "; use --device cpu");
  if (request.bf16_latents) throw Error("generate", "BF16 latents are kept by the host loop only; use --device cpu");
  const std::size_t numel = setup.numel, bytes = numel * sizeof(float);
  const int64_t n = int64_t(numel);
  const int N = setup.N;
  const bool cfg = setup.cfg;
  setup.cond.latent.data.clear();  // the latent lives in backend memory; the inputs give its shape
  setup.uncond.latent.data.clear();

  // Backend memory: the latent, each pass's velocity, the guided velocity
  // (CFG, or image-to-video: the host loop zeroes a copy, never v_cond) and,
  // for UniPC, its history (allocated at its first step).
  Backend& b = transformer.backend();
  const bool conditioned = !setup.conditioned.empty();
  const auto latent = b.allocate(bytes), v_cond = b.allocate(bytes);
  const auto v_uncond = cfg ? b.allocate(bytes) : nullptr;
  const auto guided = cfg || conditioned ? b.allocate(bytes) : nullptr;
  std::unique_ptr<BackendBuffer> history_memory;
  sched::LatentHistory history;
  b.upload(latent->data(), request.noise.data(), bytes);
  // Image-to-video, as the host loop: the guided velocity is zeroed on the
  // conditioned planes and, after every step, they get their clean values
  // back. Both come from backend memory, a zero plane followed by the clean
  // planes in setup.conditioned order, uploaded once.
  const std::size_t plane_bytes = std::size_t(setup.plane) * sizeof(float);
  std::unique_ptr<BackendBuffer> condition;
  if (conditioned) {
    std::vector<float> host(std::size_t(setup.plane) * (setup.conditioned.size() + 1), 0.0f);
    for (std::size_t k = 0; k < setup.conditioned.size(); ++k)
      std::copy_n(request.noise.begin() + setup.conditioned[k], setup.plane, host.begin() + (k + 1) * setup.plane);
    condition = b.allocate(host.size() * sizeof(float));
    b.upload(condition->data(), host.data(), host.size() * sizeof(float));
  }
  const float* zero_plane = conditioned ? condition->as<float>() : nullptr;
  const auto clean_plane = [&](std::size_t k) { return condition->as<float>() + (k + 1) * setup.plane; };

  // As on the host: both CFG passes of a step in one forward over the one
  // latent, each writing its own velocity buffer.
  const bool batched = denoise_batches_cfg(transformer, request);
  DenoiseResult result;
  auto run_scope = controller.run_scope();  // resets to native on every exit path
  for (int i = 0; i < N; ++i) {
    const ForwardOptions options = begin_iteration(controller, observer, i, N, request.activations);
    const double t = scheduler.timesteps()[std::size_t(i)];

    auto prepare = [&](ForwardInputs& in, CfgPass pass) {
      in.timesteps.assign(1, float(t));
      if (observer) observer->on_pass(i, pass);
      ++result.transformer_calls;
    };
    auto check_velocity = [&](const ForwardInputs& in, CfgPass pass, const BackendBuffer& velocity) {
      if (b.all_finite(velocity.as<float>(), n)) return;
      ForwardInputs on_host = in;  // the error path: the diagnosis runs from a host copy of the latent
      on_host.latent.data.resize(numel);
      b.download(on_host.latent.data.data(), latent->data(), bytes);
      throw_non_finite_velocity(transformer, on_host, options, i, N, pass);
    };
    if (batched) {
      prepare(setup.cond, CfgPass::Conditional);
      prepare(setup.uncond, CfgPass::Unconditional);
      const ForwardInputs* both[2] = {&setup.cond, &setup.uncond};
      float* const velocities[2] = {v_cond->as<float>(), v_uncond->as<float>()};
      transformer.forward_resident(both, latent->as<float>(), velocities, options);
      ++result.batched_steps;
    } else {
      prepare(setup.cond, CfgPass::Conditional);
      transformer.forward_resident(setup.cond, latent->as<float>(), v_cond->as<float>(), options);
      if (cfg) {
        prepare(setup.uncond, CfgPass::Unconditional);
        transformer.forward_resident(setup.uncond, latent->as<float>(), v_uncond->as<float>(), options);
      }
    }
    check_velocity(setup.cond, CfgPass::Conditional, *v_cond);
    if (cfg) check_velocity(setup.uncond, CfgPass::Unconditional, *v_uncond);
    const float* v = v_cond->as<float>();
    if (cfg) {
      b.cfg_combine(v_uncond->as<float>(), v_cond->as<float>(), n, float(request.guidance), guided->as<float>());
      v = guided->as<float>();
    } else if (conditioned) {
      b.copy(guided->data(), v_cond->data(), bytes);
      v = guided->as<float>();
    }
    for (int64_t at : setup.conditioned) b.copy(guided->as<float>() + at, zero_plane, plane_bytes);
    const sched::LatentStep step = scheduler.begin_latent_step(t, numel);
    if (step.kind == sched::LatentStep::Kind::UniPC && !history_memory) {
      history_memory = b.allocate(4 * bytes);
      float* h = history_memory->as<float>();
      history = {h, h + n, h + 2 * n, h + 3 * n};
    }
    b.scheduler_step(step, n, latent->as<float>(), v, history);
    if (step.kind == sched::LatentStep::Kind::UniPC) history.advance();
    for (std::size_t k = 0; k < setup.conditioned.size(); ++k)
      b.copy(latent->as<float>() + setup.conditioned[k], clean_plane(k), plane_bytes);
    if (!b.all_finite(latent->as<float>(), n)) throw_non_finite_latent(i, N, request.guidance);

    if (observer) {
      // Host copies of what the observer reads (tests, progress callbacks), nothing else.
      const auto host = [&](const BackendBuffer* buffer, bool wanted) {
        std::vector<float> out;
        if (buffer && wanted) {
          out.resize(numel);
          b.download(out.data(), buffer->data(), bytes);
        }
        return out;
      };
      const bool velocities = observer->wants_velocities();
      const std::vector<float> vc = host(v_cond.get(), velocities), vu = host(v_uncond.get(), velocities);
      const std::vector<float> vg = guided ? host(guided.get(), velocities) : vc;
      const std::vector<float> x = host(latent.get(), observer->wants_latent());
      observer->on_step_end(i, vc, cfg ? &vu : nullptr, vg, x);
    }
    if (cancel && cancel->load() && i + 1 < N) throw Cancelled(i + 1, N);
  }
  result.trace = controller.recorded_trace();
  result.reasoner = controller.plan().reasoner;
  result.latent.resize(numel);
  b.download(result.latent.data(), latent->data(), bytes);
  return result;
}

}  // namespace stepmix
