// denoise_on_backend (pipeline/denoise.hpp), the loop that keeps the latent,
// the velocities, the CFG combination and the scheduler update in backend
// memory (what --device cuda runs), on the CPU backend against the host loop
// denoise(): the same bits at every step (latents, guided velocities, final
// latent), the same trace and calls, for UniPC (the golden trajectories,
// forced codes included) and FlowMatch Euler, float32 and bf16 activations,
// with and without CFG, the CFG passes batched in one forward (as on the
// host) or one at a time, image-to-video's conditioned frame included; an
// observer that wants nothing gets nothing copied.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "common/error_of.hpp"
#include "pipeline/image_to_video_run.hpp"
#include "pipeline/trajectory_run.hpp"
#include "sched/flow_match_euler.hpp"
#include "sched/unipc.hpp"

namespace stepmix::test {
namespace {

// The host loop runs `host_variant` (batched or not, which must not matter).
void expect_identical(const TrajectoryVariant& variant, ActivationDType activations,
                      const TrajectoryVariant& host_variant) {
  SCOPED_TRACE(variant.file + " " + std::string(activation_dtype_name(activations)) +
               (variant.batch_cfg ? " batched" : " one pass at a time"));
  const TrajectoryOutcome host = run_trajectory(host_variant, cpu_backend(), activations);
  const TrajectoryOutcome resident = run_trajectory(variant, cpu_backend(), activations, true);
  expect_trajectory_shape(resident);
  // Forced codes expect one pass's codes per call: never batched.
  EXPECT_EQ(resident.batched_steps, variant.batch_cfg && !variant.forced_codes ? 8 : 0);
  EXPECT_EQ(resident.generation_modes, host.generation_modes);
  EXPECT_EQ(resident.reasoner_modes, host.reasoner_modes);
  EXPECT_EQ(resident.transformer_calls, host.transformer_calls);
  EXPECT_EQ(resident.total_codes, host.total_codes);
  EXPECT_TRUE(same_bits(resident.latents, host.latents));
  EXPECT_TRUE(same_bits(resident.v_cfg, host.v_cfg));
  EXPECT_TRUE(same_bits(resident.final_latent, host.final_latent));
}

void expect_identical(const TrajectoryVariant& variant, ActivationDType activations) {
  expect_identical(variant, activations, variant);
}

TEST(DenoiseOnBackend, GoldenTrajectoriesGiveTheHostLoopsBits) {
  for (ActivationDType activations : {ActivationDType::F32, ActivationDType::BF16}) {
    expect_identical({"dense", "transformer", {}, false}, activations);
    expect_identical({"mixed33", "transformer-fp8", {}, true}, activations);
    expect_identical({"mixed33", "transformer-fp8", {}, false}, activations);
  }
}

// Batching off on the device loop: the bits of the batched host loop still.
TEST(DenoiseOnBackend, PassesOneAtATimeGiveTheBatchedHostLoopsBits) {
  for (ActivationDType activations : {ActivationDType::F32, ActivationDType::BF16})
    expect_identical({"mixed33", "transformer-fp8", {}, false, false}, activations,
                     {"mixed33", "transformer-fp8", {}, false, true});
}

// Records only what the loop hands over.
class Counting : public DenoiseObserver {
 public:
  Counting(bool velocities, bool latent) : velocities_(velocities), latent_(latent) {}
  void on_step_end(int, const std::vector<float>& v_cond, const std::vector<float>* v_uncond,
                   const std::vector<float>& v_guided, const std::vector<float>& latent) override {
    values += v_cond.size() + (v_uncond ? v_uncond->size() : 0) + v_guided.size() + latent.size();
    last_latent = latent;
    ++steps;
  }
  bool wants_velocities() const override { return velocities_; }
  bool wants_latent() const override { return latent_; }
  std::size_t values = 0;
  int steps = 0;
  std::vector<float> last_latent;

 private:
  bool velocities_, latent_;
};

DenoiseResult run_loop(bool resident, sched::Scheduler& scheduler, double guidance, DenoiseObserver* observer,
                       ActivationDType activations = ActivationDType::F32, bool batch_cfg = true) {
  const ModelDirectory dir = ModelDirectory::open(golden_path("transformer-fp8"));
  Cosmos3Transformer transformer = Cosmos3Transformer::load(dir);
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, {});
  StepController controller(plan_steps(policy, transformer.has_fp8(), 6));
  const auto inputs = SafetensorsFile::open(golden_path("trajectory/inputs.safetensors"));
  DenoiseRequest request;
  request.cond_ids = trajectory_ids(*inputs, "cond.input_ids");
  request.uncond_ids = trajectory_ids(*inputs, "uncond.input_ids");
  request.latent_shape = {4, 1, 6, 8};
  request.guidance = guidance;
  request.noise = trajectory_floats(*inputs, "noise");
  request.activations = activations;
  request.batch_cfg = batch_cfg;
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  return resident ? denoise_on_backend(transformer, scheduler, controller, request, settings, observer)
                  : denoise(transformer, scheduler, controller, request, settings, observer);
}

TEST(DenoiseOnBackend, EulerWithAndWithoutGuidanceGivesTheHostLoopsBits) {
  for (ActivationDType activations : {ActivationDType::F32, ActivationDType::BF16}) {
    for (double guidance : {1.0, 3.0}) {
      for (bool batch_cfg : {true, false}) {
        SCOPED_TRACE(std::string(activation_dtype_name(activations)) + " guidance " + std::to_string(guidance) +
                     (batch_cfg ? " batched" : " one pass at a time"));
        sched::FlowMatchEulerOptions o;
        o.shift = 3.0;
        sched::FlowMatchEulerDiscreteScheduler a(o), b(o);
        const DenoiseResult host = run_loop(false, a, guidance, nullptr, activations);
        const DenoiseResult resident = run_loop(true, b, guidance, nullptr, activations, batch_cfg);
        EXPECT_TRUE(same_bits(resident.latent, host.latent));
        EXPECT_EQ(resident.trace, host.trace);
        EXPECT_EQ(resident.transformer_calls, host.transformer_calls);
        EXPECT_EQ(resident.transformer_calls, guidance == 1.0 ? 6 : 12);
        EXPECT_EQ(host.batched_steps, guidance == 1.0 ? 0 : 6);
        EXPECT_EQ(resident.batched_steps, guidance != 1.0 && batch_cfg ? 6 : 0);
      }
    }
  }
}

TEST(DenoiseOnBackend, CopiesOnlyWhatTheObserverWants) {
  const std::size_t n = 4 * 6 * 8;
  sched::UniPCOptions o;
  o.flow_shift = 10.0;
  sched::UniPCMultistepScheduler a(o), b(o), c(o);
  Counting nothing(false, false), latent_only(false, true), everything(true, true);
  const DenoiseResult r = run_loop(true, a, 3.0, &nothing);
  run_loop(true, b, 3.0, &latent_only);
  run_loop(true, c, 3.0, &everything);
  EXPECT_EQ(nothing.steps, 6);
  EXPECT_EQ(nothing.values, 0u);
  EXPECT_EQ(latent_only.values, 6 * n);
  EXPECT_TRUE(same_bits(latent_only.last_latent, r.latent));
  EXPECT_EQ(everything.values, 6 * 4 * n);
}

// Records the latent and the guided velocity the loop hands over at every step.
class Recording : public DenoiseObserver {
 public:
  void on_step_end(int, const std::vector<float>&, const std::vector<float>*, const std::vector<float>& v_guided,
                   const std::vector<float>& latent) override {
    guided.push_back(v_guided);
    latents.push_back(latent);
  }
  std::vector<std::vector<float>> guided, latents;
};

// The device loop zeroes the guided velocity on the conditioned frame and
// restores its clean values after every step, as the host loop does: the
// same bits at every step, with and without CFG, under UniPC and Euler.
TEST(DenoiseOnBackend, ImageToVideoGivesTheHostLoopsBits) {
  for (ActivationDType activations : {ActivationDType::F32, ActivationDType::BF16}) {
    for (double guidance : {1.0, 3.0}) {
      for (bool unipc : {true, false}) {
        SCOPED_TRACE(std::string(activation_dtype_name(activations)) + " guidance " + std::to_string(guidance) +
                     (unipc ? " UniPC" : " Euler"));
        auto make = [&]() -> std::unique_ptr<sched::Scheduler> {
          if (unipc) {
            sched::UniPCOptions o;
            o.flow_shift = 10.0;
            return std::make_unique<sched::UniPCMultistepScheduler>(o);
          }
          sched::FlowMatchEulerOptions o;
          o.shift = 3.0;
          return std::make_unique<sched::FlowMatchEulerDiscreteScheduler>(o);
        };
        Recording host_steps, resident_steps;
        const auto a = make(), b = make();
        const DenoiseResult host =
            run_image_to_video("transformer-fp8", cpu_backend(), *a, guidance, activations, true, false, &host_steps);
        const DenoiseResult resident =
            run_image_to_video("transformer-fp8", cpu_backend(), *b, guidance, activations, true, true, &resident_steps);
        ASSERT_EQ(resident_steps.latents.size(), 6u);
        ASSERT_EQ(host_steps.latents.size(), 6u);
        for (std::size_t i = 0; i < 6; ++i) {
          EXPECT_TRUE(same_bits(resident_steps.latents[i], host_steps.latents[i])) << "step " << i;
          EXPECT_TRUE(same_bits(resident_steps.guided[i], host_steps.guided[i])) << "step " << i;
        }
        EXPECT_TRUE(same_bits(resident.latent, host.latent));
        EXPECT_EQ(resident.trace, host.trace);
        EXPECT_EQ(resident.batched_steps, host.batched_steps);
        // Frame 0 is the clean latent, bit for bit; the guided velocity is
        // zero there.
        EXPECT_TRUE(same_bits(latent_frame(resident.latent, 0), image_to_video_clean_frame()));
        for (float v : latent_frame(resident_steps.guided.back(), 0)) EXPECT_EQ(v, 0.0f);
      }
    }
  }
  // Passes one at a time: the batched host loop's bits still.
  sched::UniPCOptions o;
  o.flow_shift = 10.0;
  sched::UniPCMultistepScheduler a(o), b(o);
  const DenoiseResult host =
      run_image_to_video("transformer-fp8", cpu_backend(), a, 3.0, ActivationDType::F32, true, false);
  const DenoiseResult separate =
      run_image_to_video("transformer-fp8", cpu_backend(), b, 3.0, ActivationDType::F32, false, true);
  EXPECT_TRUE(same_bits(separate.latent, host.latent));
  EXPECT_EQ(separate.batched_steps, 0);
}

// Counts the transformer passes the loop starts.
class CountingPasses : public DenoiseObserver {
 public:
  void on_pass(int, CfgPass) override { ++passes; }
  int passes = 0;
};

TEST(DenoiseOnBackend, RefusesAHostOnlySchedulerPathBeforeTheFirstForward) {
  sched::UniPCOptions o;
  o.precision = sched::Precision::bf16_emulation;
  sched::UniPCMultistepScheduler emulated(o);
  CountingPasses seen;
  std::string message = error_of([&] { run_loop(true, emulated, 3.0, &seen); });
  EXPECT_NE(message.find("bf16 emulation runs on the host only"), std::string::npos) << message;
  EXPECT_NE(message.find("use --device cpu"), std::string::npos) << message;
  EXPECT_EQ(seen.passes, 0);

  sched::FlowMatchEulerOptions e;
  e.stochastic_sampling = true;
  sched::FlowMatchEulerDiscreteScheduler stochastic(e);
  message = error_of([&] { run_loop(true, stochastic, 3.0, &seen); });
  EXPECT_NE(message.find("stochastic sampling runs on the host only"), std::string::npos) << message;
  EXPECT_EQ(seen.passes, 0);
}

}  // namespace
}  // namespace stepmix::test
