// One golden trajectory (golden README §7: 8 UniPC steps, flow_shift 10, CFG
// 3.0, the stored noise and prompt ids) run through the real denoising loop
// on a backend, recorded step by step; shared by the CPU tests
// (tests/pipeline) and the CUDA ones (tests/cuda).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "pipeline/denoise.hpp"
#include "sched/config.hpp"

namespace stepmix::test {

struct TrajectoryVariant {
  std::string file;    // trajectory/<file>.safetensors
  std::string folder;  // transformer or transformer-fp8
  PolicyOverrides overrides;
  bool forced_codes = false;  // substitute the stored activation codes
  bool batch_cfg = true;      // DenoiseRequest::batch_cfg (forced codes run the passes one at a time anyway)
};

// What one run did, with its deviations from the golden file.
struct TrajectoryOutcome {
  std::vector<Precision> generation_modes, reasoner_modes;  // per step, as the loop announced them
  std::vector<float> v_cfg, latents;                        // every step, concatenated
  std::vector<float> final_latent;
  std::vector<int64_t> golden_timesteps;
  std::vector<double> scheduler_timesteps;
  int transformer_calls = 0, begins = 0, batched_steps = 0;
  int64_t mismatches = 0, far_mismatches = 0, total_codes = 0;  // computed vs stored codes (forced runs)
  double latents_deviation = 0, v_cfg_deviation = 0, final_deviation = 0;
  // The golden's per-step modes (0 = W8A16, 1 = W8A8, -1 = dense), when it has them.
  std::vector<int64_t> golden_generation_modes, golden_reasoner_modes;
};

// max|a-g|/max|g| over every step's latent and guided velocity.
struct TrajectoryBounds {
  double latents, v_cfg;
};

// bf16 activations against the float32 goldens, measured on the CPU (latents,
// v_cfg): dense 9.0e-3, 1.8e-2; W8A16 8.0e-3, 1.8e-2; W8A8 with stored codes
// 4.5e-3, 1.1e-2; the checkpoint's mixed 3/3 policy with stored codes 8.5e-3,
// 1.9e-2. Bounds: 5x, rounded up to 1/2/5·10^k (the golden README's rule).
// The CUDA backend is held to them too.
inline constexpr TrajectoryBounds kTrajectoryBf16Dense{5e-2, 1e-1};
inline constexpr TrajectoryBounds kTrajectoryBf16W8A16{5e-2, 1e-1};
inline constexpr TrajectoryBounds kTrajectoryBf16W8A8Forced{5e-2, 1e-1};
inline constexpr TrajectoryBounds kTrajectoryBf16Mixed33Forced{5e-2, 1e-1};

inline std::vector<int64_t> trajectory_ids(const SafetensorsFile& f, const std::string& name) {
  const auto& t = f.get(name);
  return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.numel());
}

inline std::vector<float> trajectory_floats(const SafetensorsFile& f, const std::string& name) {
  const auto& t = f.get(name);
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

inline int trajectory_mode_code(Precision p) { return p == Precision::W8A16 ? 0 : p == Precision::W8A8 ? 1 : -1; }

// Records every step and substitutes stored W8A8 codes per (pass, linear).
class TrajectoryRecorder : public DenoiseObserver {
 public:
  TrajectoryRecorder(std::shared_ptr<const SafetensorsFile> golden, TrajectoryOutcome& out)
      : golden_(std::move(golden)), out_(out) {}

  void on_step_begin(int, int, Precision generation, Precision reasoner) override {
    out_.generation_modes.push_back(generation);
    out_.reasoner_modes.push_back(reasoner);
    ++out_.begins;
  }
  void on_pass(int, CfgPass pass) override { pass_ = pass == CfgPass::Conditional ? "cond" : "uncond"; }
  void on_step_end(int, const std::vector<float>&, const std::vector<float>*, const std::vector<float>& v,
                   const std::vector<float>& latent) override {
    out_.v_cfg.insert(out_.v_cfg.end(), v.begin(), v.end());
    out_.latents.insert(out_.latents.end(), latent.begin(), latent.end());
  }

  // The k-th W8A8 call of a linear in a pass reads act_codes.<pass>.<linear>[k].
  void substitute(const std::string& linear, uint8_t* codes, int64_t M, int64_t K) {
    const int k = calls_[pass_ + "." + linear]++;
    const TensorView& stored = golden_->get("act_codes." + pass_ + "." + linear);
    ASSERT_EQ(stored.rank(), 3) << linear;
    ASSERT_LT(k, stored.shape[0]) << linear;
    ASSERT_EQ(stored.shape[1] * stored.shape[2], M * K) << linear;
    const uint8_t* want = stored.as<uint8_t>() + k * M * K;
    for (int64_t i = 0; i < M * K; ++i) {
      if (codes[i] != want[i]) {
        ++out_.mismatches;
        const int distance = std::abs(int(codes[i] & 0x7F) - int(want[i] & 0x7F));
        if ((codes[i] & 0x80) != (want[i] & 0x80) || distance != 1) ++out_.far_mismatches;
      }
      codes[i] = want[i];
    }
    out_.total_codes += M * K;
  }

 private:
  std::shared_ptr<const SafetensorsFile> golden_;
  TrajectoryOutcome& out_;
  std::string pass_;
  std::map<std::string, int> calls_;
};

// resident_loop: denoise_on_backend (the loop a GPU runs) whatever the
// backend, else denoise() (which picks it for a backend other than the CPU).
inline TrajectoryOutcome run_trajectory(const TrajectoryVariant& variant, Backend& backend,
                                        ActivationDType activations, bool resident_loop = false) {
  const auto inputs = SafetensorsFile::open(golden_path("trajectory/inputs.safetensors"));
  const auto golden = SafetensorsFile::open(golden_path("trajectory/" + variant.file + ".safetensors"));
  const ModelDirectory dir = ModelDirectory::open(golden_path(variant.folder));
  Cosmos3Transformer transformer = Cosmos3Transformer::load(dir, WeightCache::None, backend);
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, variant.overrides);
  StepController controller(plan_steps(policy, transformer.has_fp8(), 8));
  auto scheduler = sched::make_scheduler(sched::load_scheduler_config(golden_path("scheduler/unipc_flowshift10.json")));

  DenoiseRequest request;
  request.cond_ids = trajectory_ids(*inputs, "cond.input_ids");
  request.uncond_ids = trajectory_ids(*inputs, "uncond.input_ids");
  request.latent_shape = {4, 1, 6, 8};
  request.fps = 24.0;
  request.guidance = trajectory_floats(*inputs, "guidance_scale")[0];
  request.noise = trajectory_floats(*inputs, "noise");
  request.activations = activations;
  request.batch_cfg = variant.batch_cfg;

  TrajectoryOutcome out;
  TrajectoryRecorder recorder(golden, out);
  if (variant.forced_codes)
    transformer.set_activation_code_hook(
        [&](const std::string& name, uint8_t* codes, int64_t M, int64_t K) { recorder.substitute(name, codes, M, K); });
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  const DenoiseResult result =
      resident_loop ? denoise_on_backend(transformer, *scheduler, controller, request, settings, &recorder)
                    : denoise(transformer, *scheduler, controller, request, settings, &recorder);

  out.transformer_calls = result.transformer_calls;
  out.batched_steps = result.batched_steps;
  out.final_latent = result.latent;
  out.golden_timesteps = trajectory_ids(*inputs, "timesteps");
  out.scheduler_timesteps = scheduler->timesteps();
  if (golden->contains("step_mode_generation")) {
    out.golden_generation_modes = trajectory_ids(*golden, "step_mode_generation");
    out.golden_reasoner_modes = trajectory_ids(*golden, "step_mode_reasoner");
  }
  out.latents_deviation = max_normalised_deviation(out.latents, trajectory_floats(*golden, "latents"));
  out.v_cfg_deviation = max_normalised_deviation(out.v_cfg, trajectory_floats(*golden, "v_cfg"));
  out.final_deviation = max_normalised_deviation(out.final_latent, trajectory_floats(*golden, "final_latent"));
  return out;
}

// The checks every run must pass whatever its arithmetic: the exact
// timesteps, one announcement and two passes per step, the golden's
// per-step precision trace, the final latent being the last step's.
inline void expect_trajectory_shape(const TrajectoryOutcome& out) {
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out.scheduler_timesteps[std::size_t(i)], double(out.golden_timesteps[std::size_t(i)]));
  EXPECT_EQ(out.transformer_calls, 16);
  EXPECT_EQ(out.begins, 8);
  for (std::size_t i = 0; i < out.golden_generation_modes.size(); ++i) {
    EXPECT_EQ(trajectory_mode_code(out.generation_modes[i]), out.golden_generation_modes[i]) << "step " << i;
    EXPECT_EQ(trajectory_mode_code(out.reasoner_modes[i]), out.golden_reasoner_modes[i]) << "step " << i;
  }
  ASSERT_GE(out.latents.size(), out.final_latent.size());
  EXPECT_TRUE(std::equal(out.final_latent.begin(), out.final_latent.end(),
                         out.latents.end() - std::ptrdiff_t(out.final_latent.size())));
}

inline PolicyOverrides trajectory_overrides(MixedPrecisionMode mode, std::optional<int> first = {},
                                            std::optional<int> last = {}, std::optional<TowerMode> reasoner = {}) {
  PolicyOverrides o;
  o.mode = mode;
  o.first_steps = first;
  o.last_steps = last;
  o.reasoner = reasoner;
  return o;
}

}  // namespace stepmix::test
