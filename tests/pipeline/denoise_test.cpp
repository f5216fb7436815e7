// The loop's contract with the step controller (docs/step-policy.md §10):
// precision chosen once per iteration before any call, shared by both CFG
// passes, reset to native on every exit path; cancellation; determinism.
#include "pipeline/denoise.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/numerics.hpp"
#include "io/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "pipeline/noise.hpp"
#include "sched/config.hpp"

namespace stepmix {
namespace {

struct Fixture {
  ModelDirectory dir = ModelDirectory::open(test::golden_path("transformer-fp8"));
  Cosmos3Transformer transformer = Cosmos3Transformer::load(dir);
  std::unique_ptr<sched::Scheduler> scheduler =
      sched::make_scheduler(sched::load_scheduler_config(test::golden_path("scheduler/unipc_flowshift10.json")));
  SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);

  DenoiseRequest request(uint64_t seed = 7) {
    DenoiseRequest r;
    r.cond_ids = {28, 93, 12, 94, 95};
    r.uncond_ids = {94, 95};
    r.latent_shape = {4, 1, 4, 4};
    r.guidance = 3.0;
    r.noise = NormalGenerator(seed).normals(4 * 4 * 4);
    return r;
  }
  StepPlan plan(int steps) {
    return plan_steps(resolve_policy(dir.config, dir.config_path, {}), transformer.has_fp8(), steps);
  }
};

// Checks, at every transformer call, that the controller holds the step's
// precision; counts calls per step.
class CallCounter : public DenoiseObserver {
 public:
  explicit CallCounter(const StepController& c) : controller_(c) {}
  void on_step_begin(int step, int, Precision generation, Precision) override {
    EXPECT_EQ(step, int(step_generation.size()));
    step_generation.push_back(generation);
    calls_per_step.push_back(0);
  }
  void on_pass(int step, CfgPass pass) override {
    EXPECT_EQ(controller_.generation(), step_generation.at(step));
    ++calls_per_step.at(step);
    if (throw_at_step == step) throw Error("test", "injected failure");
    if (pass == CfgPass::Unconditional) ++uncond_calls;
  }
  std::vector<Precision> step_generation;
  std::vector<int> calls_per_step;
  int uncond_calls = 0;
  int throw_at_step = -1;

 private:
  const StepController& controller_;
};

TEST(Denoise, PrecisionChosenOncePerStepAndSharedByBothPasses) {
  Fixture f;
  StepController controller(f.plan(8));
  CallCounter counter(controller);
  const DenoiseResult r = denoise(f.transformer, *f.scheduler, controller, f.request(), f.settings, &counter);
  EXPECT_EQ(trace_string(r.trace), "W8A16x3 / W8A8x2 / W8A16x3");
  EXPECT_EQ(counter.step_generation, r.trace);
  EXPECT_EQ(counter.calls_per_step, std::vector<int>(8, 2));
  EXPECT_EQ(counter.uncond_calls, 8);
  EXPECT_EQ(r.transformer_calls, 16);
  EXPECT_EQ(r.reasoner, Precision::W8A16);
  // After the run both towers read native again.
  EXPECT_EQ(controller.generation(), Precision::W8A8);
  EXPECT_EQ(controller.reasoner(), Precision::W8A8);
}

TEST(Denoise, GuidanceOneRunsOnePassPerStep) {
  Fixture f;
  StepController controller(f.plan(3));
  CallCounter counter(controller);
  DenoiseRequest request = f.request();
  request.guidance = 1.0;
  request.uncond_ids.clear();
  const DenoiseResult r = denoise(f.transformer, *f.scheduler, controller, request, f.settings, &counter);
  EXPECT_EQ(r.transformer_calls, 3);
  EXPECT_EQ(counter.uncond_calls, 0);
}

TEST(Denoise, ControllerResetsAfterAnExceptionInsideTheLoop) {
  Fixture f;
  StepController controller(f.plan(8));
  CallCounter counter(controller);
  counter.throw_at_step = 1;  // an A16 step
  EXPECT_THROW(denoise(f.transformer, *f.scheduler, controller, f.request(), f.settings, &counter), Error);
  EXPECT_EQ(controller.generation(), Precision::W8A8);
  EXPECT_EQ(controller.reasoner(), Precision::W8A8);
}

TEST(Denoise, CancellationStopsAfterTheCurrentStep) {
  Fixture f;
  StepController controller(f.plan(8));
  std::atomic<bool> cancel{false};
  class CancelAtStep : public DenoiseObserver {
   public:
    explicit CancelAtStep(std::atomic<bool>& c) : cancel_(c) {}
    void on_step_begin(int step, int, Precision, Precision) override {
      ++steps;
      if (step == 2) cancel_ = true;
    }
    int steps = 0;

   private:
    std::atomic<bool>& cancel_;
  } observer(cancel);
  try {
    denoise(f.transformer, *f.scheduler, controller, f.request(), f.settings, &observer, &cancel);
    FAIL() << "not cancelled";
  } catch (const Cancelled& c) {
    EXPECT_EQ(c.steps_done, 3);
    EXPECT_NE(std::string(c.what()).find("cancelled after step 3 of 8"), std::string::npos);
  }
  EXPECT_EQ(observer.steps, 3);
  EXPECT_EQ(controller.generation(), Precision::W8A8);
}

TEST(Denoise, SameSeedSameBitsDifferentSeedDifferentBits) {
  Fixture f;
  StepController controller(f.plan(4));
  const auto a = denoise(f.transformer, *f.scheduler, controller, f.request(1), f.settings).latent;
  const auto b = denoise(f.transformer, *f.scheduler, controller, f.request(1), f.settings).latent;
  const auto c = denoise(f.transformer, *f.scheduler, controller, f.request(2), f.settings).latent;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Denoise, RejectsInconsistentRequests) {
  Fixture f;
  StepController controller(f.plan(2));
  DenoiseRequest r = f.request();
  r.noise.pop_back();
  EXPECT_THROW(denoise(f.transformer, *f.scheduler, controller, r, f.settings), Error);
  r = f.request();
  r.uncond_ids.clear();
  EXPECT_THROW(denoise(f.transformer, *f.scheduler, controller, r, f.settings), Error);
  r = f.request();
  r.latent_shape = {4, 1, 0, 4};
  EXPECT_THROW(denoise(f.transformer, *f.scheduler, controller, r, f.settings), Error);
}

// CFG in one batched forward (the default) against the two passes one after
// the other: the same velocities and latents bit for bit, at every step, for
// the mixed schedule (W8A16 and W8A8 steps) and both activation dtypes.
TEST(Denoise, BatchedCfgEqualsSeparatePassesBitForBit) {
  class Recorder : public DenoiseObserver {
   public:
    void on_step_end(int, const std::vector<float>& v_cond, const std::vector<float>* v_uncond,
                     const std::vector<float>&, const std::vector<float>& latent) override {
      velocities.insert(velocities.end(), v_cond.begin(), v_cond.end());
      velocities.insert(velocities.end(), v_uncond->begin(), v_uncond->end());
      latents.insert(latents.end(), latent.begin(), latent.end());
    }
    std::vector<float> velocities, latents;
  };
  for (ActivationDType activations : {ActivationDType::F32, ActivationDType::BF16}) {
    Fixture f;
    StepController controller(f.plan(8));
    Recorder batched, separate;
    DenoiseRequest r = f.request();
    r.activations = activations;
    const DenoiseResult a = denoise(f.transformer, *f.scheduler, controller, r, f.settings, &batched);
    r.batch_cfg = false;
    const DenoiseResult b = denoise(f.transformer, *f.scheduler, controller, r, f.settings, &separate);
    EXPECT_EQ(a.batched_steps, 8);
    EXPECT_EQ(b.batched_steps, 0);
    EXPECT_EQ(a.transformer_calls, b.transformer_calls);
    EXPECT_EQ(trace_string(a.trace), "W8A16x3 / W8A8x2 / W8A16x3");
    EXPECT_EQ(batched.velocities, separate.velocities) << activation_dtype_name(activations);
    EXPECT_EQ(batched.latents, separate.latents) << activation_dtype_name(activations);
    EXPECT_EQ(a.latent, b.latent) << activation_dtype_name(activations);
  }
}

TEST(Denoise, ActivationCodeHookRunsCfgPassesOneAtATime) {
  Fixture f;
  StepController controller(f.plan(8));  // W8A8 at steps 3 and 4
  std::vector<int64_t> rows;
  f.transformer.set_activation_code_hook([&](const std::string&, uint8_t*, int64_t M, int64_t) { rows.push_back(M); });
  const DenoiseResult r = denoise(f.transformer, *f.scheduler, controller, f.request(), f.settings);
  EXPECT_EQ(r.batched_steps, 0);
  ASSERT_FALSE(rows.empty());
  // 4×4 latent, patch 2: 4 vision rows per pass; text rows are 5 or 2.
  for (int64_t m : rows) EXPECT_LE(m, 5);
}

TEST(Denoise, CfgBatchingEnvironmentSwitch) {
  ::unsetenv("STEPMIX_CFG_BATCH");
  EXPECT_TRUE(cfg_batching_from_environment());
  ::setenv("STEPMIX_CFG_BATCH", "0", 1);
  EXPECT_FALSE(cfg_batching_from_environment());
  ::setenv("STEPMIX_CFG_BATCH", "yes", 1);
  EXPECT_THROW(cfg_batching_from_environment(), Error);
  ::unsetenv("STEPMIX_CFG_BATCH");
}

// Image-to-video: latent frame 0 holds a clean latent and is marked
// conditioned. The transformer reads it as clean and gives it no velocity,
// and the loop keeps its values through every step (with zero velocity a
// deterministic step moves it by rounding only, a stochastic one would
// re-noise it): bit for bit the initial frame, under UniPC and under Euler.
// The other frames are denoised, and they see the conditioned frame: another
// frame 0 gives them other values.
TEST(Denoise, ConditionedFrameIsLeftAsItIsAndConditionsTheOthers) {
  Fixture f;
  const int64_t C = 4, T = 3, H = 4, W = 4, frame = H * W;
  auto conditioned = [&](uint64_t clean_seed) {
    DenoiseRequest r = f.request();
    r.latent_shape = {C, T, H, W};
    r.noise = NormalGenerator(11).normals(std::size_t(C * T * H * W));
    const std::vector<float> clean = NormalGenerator(clean_seed).normals(std::size_t(C * frame));
    for (int64_t c = 0; c < C; ++c) std::copy_n(clean.begin() + c * frame, frame, r.noise.begin() + c * T * frame);
    r.condition_frames = {1, 0, 0};
    return r;
  };
  auto frame_values = [&](const std::vector<float>& latent, int64_t t) {
    std::vector<float> out;
    for (int64_t c = 0; c < C; ++c)
      out.insert(out.end(), latent.begin() + (c * T + t) * frame, latent.begin() + (c * T + t + 1) * frame);
    return out;
  };
  StepController controller(f.plan(8));
  const DenoiseRequest a = conditioned(5);
  const std::vector<float> out = denoise(f.transformer, *f.scheduler, controller, a, f.settings).latent;
  const std::vector<float> before = frame_values(a.noise, 0);
  EXPECT_EQ(frame_values(out, 0), before);
  EXPECT_NE(frame_values(out, 1), frame_values(a.noise, 1));
  const std::vector<float> other = denoise(f.transformer, *f.scheduler, controller, conditioned(6), f.settings).latent;
  EXPECT_NE(frame_values(other, 1), frame_values(out, 1));

  auto euler = sched::make_scheduler(sched::load_scheduler_config(test::golden_path("scheduler/flowmatch_euler_shift3.json")));
  const std::vector<float> stepped = denoise(f.transformer, *euler, controller, a, f.settings).latent;
  EXPECT_EQ(frame_values(stepped, 0), before);

  DenoiseRequest wrong = a;
  wrong.condition_frames = {1, 0};
  EXPECT_THROW(denoise(f.transformer, *f.scheduler, controller, wrong, f.settings), Error);
}

// BF16 latents (the Diffusers BF16 pipeline, for parity tests): the CFG
// combination is BF16 elementwise, u + g·(c − u) with every result and the
// guidance rounded, and with the scheduler's BF16 emulation every latent the
// loop holds is BF16; the run stays within the bf16 noise of the float32
// latent's.
class StepRecorder : public DenoiseObserver {
 public:
  void on_step_end(int, const std::vector<float>& v_cond, const std::vector<float>* v_uncond,
                   const std::vector<float>& guided, const std::vector<float>& latent) override {
    cond.push_back(v_cond);
    uncond.push_back(v_uncond ? *v_uncond : std::vector<float>{});
    guide.push_back(guided);
    latents.push_back(latent);
  }
  std::vector<std::vector<float>> cond, uncond, guide, latents;
};

float bf16_round(float x) { return bf16_to_float(float_to_bf16_rne(x)); }

TEST(Denoise, Bf16LatentsCombineInBf16AndKeepEveryLatentBf16) {
  Fixture f;
  auto run = [&](bool bf16_latents, StepRecorder& recorder) {
    sched::SchedulerConfig config = sched::load_scheduler_config(test::golden_path("scheduler/unipc_flowshift10.json"));
    if (bf16_latents) {
      sched::SchedulerOverrides o;
      o.precision = sched::Precision::bf16_emulation;
      sched::apply_overrides(config, o);
    }
    auto scheduler = sched::make_scheduler(config);
    scheduler->set_timesteps(8);
    DenoiseRequest r = f.request();
    r.activations = ActivationDType::BF16;
    r.bf16_latents = bf16_latents;
    if (bf16_latents)
      for (float& x : r.noise) x = bf16_round(x);
    StepController controller(f.plan(8));
    return denoise(f.transformer, *scheduler, controller, r, f.settings, &recorder).latent;
  };
  StepRecorder bf16, f32;
  const std::vector<float> out = run(true, bf16), reference = run(false, f32);
  const float g = bf16_round(3.0f);
  ASSERT_EQ(bf16.guide.size(), 8u);
  for (std::size_t i = 0; i < bf16.guide.size(); ++i) {
    for (std::size_t k = 0; k < bf16.guide[i].size(); ++k) {
      const float u = bf16_round(bf16.uncond[i][k]), c = bf16_round(bf16.cond[i][k]);
      ASSERT_EQ(bf16.guide[i][k], bf16_round(u + bf16_round(g * bf16_round(c - u)))) << "step " << i << " " << k;
    }
    for (float x : bf16.latents[i]) ASSERT_EQ(x, bf16_round(x)) << "step " << i;
  }
  double max_diff = 0, max_ref = 0;
  for (std::size_t k = 0; k < out.size(); ++k) {
    max_diff = std::max(max_diff, double(std::fabs(out[k] - reference[k])));
    max_ref = std::max(max_ref, double(std::fabs(reference[k])));
  }
  std::printf("bf16 latents against float32 latents (both bf16 activations): max |diff| / max |ref| = %.3g\n",
              max_diff / max_ref);
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff / max_ref, 5e-2);
}

}  // namespace
}  // namespace stepmix
