// End-to-end denoising against the golden trajectories (golden README §7):
// 8 UniPC steps (flow_shift 10), CFG 3.0, the same noise and prompt ids.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "io/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "pipeline/denoise.hpp"
#include "sched/config.hpp"

namespace stepmix {
namespace {

using test::golden_path;
using test::max_normalised_deviation;

struct Variant {
  std::string file;             // trajectory/<file>.safetensors
  std::string folder;           // transformer or transformer-fp8
  PolicyOverrides overrides;
  bool forced_codes;            // substitute the stored activation codes
  double latents_bound, v_cfg_bound;  // golden README §9
};

std::vector<int64_t> ids_of(const SafetensorsFile& f, const std::string& name) {
  const auto& t = f.get(name);
  return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.numel());
}

// Records every step and substitutes stored W8A8 codes per (pass, linear).
class TrajectoryRecorder : public DenoiseObserver {
 public:
  explicit TrajectoryRecorder(std::shared_ptr<const SafetensorsFile> golden) : golden_(std::move(golden)) {}

  void on_step_begin(int, int, Precision generation, Precision reasoner) override {
    generation_modes.push_back(generation);
    reasoner_modes.push_back(reasoner);
    ++begins;
  }
  void on_pass(int, CfgPass pass) override { pass_ = pass == CfgPass::Conditional ? "cond" : "uncond"; }
  void on_step_end(int, const std::vector<float>&, const std::vector<float>*, const std::vector<float>& v,
                   const std::vector<float>& latent) override {
    v_cfg.insert(v_cfg.end(), v.begin(), v.end());
    latents.insert(latents.end(), latent.begin(), latent.end());
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
        ++mismatches;
        const int distance = std::abs(int(codes[i] & 0x7F) - int(want[i] & 0x7F));
        if ((codes[i] & 0x80) != (want[i] & 0x80) || distance != 1) ++far_mismatches;
      }
      codes[i] = want[i];
    }
    total_codes += M * K;
  }

  std::vector<Precision> generation_modes, reasoner_modes;
  std::vector<float> v_cfg, latents;
  int begins = 0;
  int64_t mismatches = 0, far_mismatches = 0, total_codes = 0;

 private:
  std::shared_ptr<const SafetensorsFile> golden_;
  std::string pass_;
  std::map<std::string, int> calls_;
};

std::vector<float> floats(const SafetensorsFile& f, const std::string& name) {
  const auto& t = f.get(name);
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

int mode_code(Precision p) { return p == Precision::W8A16 ? 0 : p == Precision::W8A8 ? 1 : -1; }

void run_variant(const Variant& variant) {
  SCOPED_TRACE(variant.file);
  const auto inputs = SafetensorsFile::open(golden_path("trajectory/inputs.safetensors"));
  const auto golden = SafetensorsFile::open(golden_path("trajectory/" + variant.file + ".safetensors"));
  const ModelDirectory dir = ModelDirectory::open(golden_path(variant.folder));
  Cosmos3Transformer transformer = Cosmos3Transformer::load(dir);
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, variant.overrides);
  StepController controller(plan_steps(policy, transformer.has_fp8(), 8));
  auto scheduler = sched::make_scheduler(sched::load_scheduler_config(golden_path("scheduler/unipc_flowshift10.json")));

  DenoiseRequest request;
  request.cond_ids = ids_of(*inputs, "cond.input_ids");
  request.uncond_ids = ids_of(*inputs, "uncond.input_ids");
  request.latent_shape = {4, 1, 6, 8};
  request.fps = 24.0;
  request.guidance = floats(*inputs, "guidance_scale")[0];
  request.noise = floats(*inputs, "noise");

  TrajectoryRecorder recorder(golden);
  if (variant.forced_codes)
    transformer.set_activation_code_hook(
        [&](const std::string& name, uint8_t* codes, int64_t M, int64_t K) { recorder.substitute(name, codes, M, K); });
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  const DenoiseResult result = denoise(transformer, *scheduler, controller, request, settings, &recorder);

  // Timesteps and the per-step precision trace are exact.
  const auto timesteps = ids_of(*inputs, "timesteps");
  for (int i = 0; i < 8; ++i) EXPECT_EQ(scheduler->timesteps()[i], double(timesteps[i]));
  EXPECT_EQ(result.transformer_calls, 16);
  EXPECT_EQ(recorder.begins, 8);
  if (golden->contains("step_mode_generation")) {
    const auto gen = ids_of(*golden, "step_mode_generation");
    const auto rea = ids_of(*golden, "step_mode_reasoner");
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(mode_code(recorder.generation_modes[i]), gen[i]) << "step " << i;
      EXPECT_EQ(mode_code(recorder.reasoner_modes[i]), rea[i]) << "step " << i;
    }
  }
  const double latents_dev = max_normalised_deviation(recorder.latents, floats(*golden, "latents"));
  const double v_dev = max_normalised_deviation(recorder.v_cfg, floats(*golden, "v_cfg"));
  EXPECT_LE(latents_dev, variant.latents_bound);
  EXPECT_LE(v_dev, variant.v_cfg_bound);
  EXPECT_EQ(max_normalised_deviation(result.latent, floats(*golden, "final_latent")),
            max_normalised_deviation(std::vector<float>(recorder.latents.end() - result.latent.size(), recorder.latents.end()),
                                     floats(*golden, "final_latent")));
  if (variant.forced_codes) {
    EXPECT_GT(recorder.total_codes, 0);
    EXPECT_LE(double(recorder.mismatches), 1e-3 * double(recorder.total_codes));
    EXPECT_EQ(recorder.far_mismatches, 0);
  }
  std::printf("[ trajectory ] %-26s latents %.2e (bound %.0e)  v_cfg %.2e (bound %.0e)  codes %lld/%lld differ\n",
              variant.file.c_str(), latents_dev, variant.latents_bound, v_dev, variant.v_cfg_bound,
              (long long)recorder.mismatches, (long long)recorder.total_codes);
}

PolicyOverrides overrides(MixedPrecisionMode mode, std::optional<int> first = {}, std::optional<int> last = {},
                          std::optional<TowerMode> reasoner = {}) {
  PolicyOverrides o;
  o.mode = mode;
  o.first_steps = first;
  o.last_steps = last;
  o.reasoner = reasoner;
  return o;
}

// Bounds: golden README §9, the column for an implementation whose inv_freq is
// bit-identical to rope.inv_freq (tests/model checks that it is); the W8A8
// rows are the same in both columns.
TEST(Trajectory, Dense) { run_variant({"dense", "transformer", {}, false, 5e-6, 1e-5}); }

TEST(Trajectory, W8A16EveryStep) {
  run_variant({"w8a16", "transformer-fp8", overrides(MixedPrecisionMode::Fp8, 8, 0, TowerMode::A16), false, 5e-6, 1e-5});
}

TEST(Trajectory, W8A8EveryStepForcedCodes) {
  run_variant({"w8a8", "transformer-fp8", overrides(MixedPrecisionMode::None), true, 2e-6, 5e-6});
}

TEST(Trajectory, W8A8EveryStepFreeRunning) {
  run_variant({"w8a8", "transformer-fp8", overrides(MixedPrecisionMode::None), false, 5e-1, 1.0});
}

TEST(Trajectory, CheckpointPolicyMixed33ForcedCodes) {
  run_variant({"mixed33", "transformer-fp8", {}, true, 5e-6, 1e-5});
}

TEST(Trajectory, CheckpointPolicyMixed33FreeRunning) {
  run_variant({"mixed33", "transformer-fp8", {}, false, 2e-2, 2e-1});
}

TEST(Trajectory, ReasonerNativeFreeRunning) {
  run_variant({"mixed33_reasoner_native", "transformer-fp8",
               overrides(MixedPrecisionMode::Auto, {}, {}, TowerMode::Native), false, 5e-2, 5e-1});
}

}  // namespace
}  // namespace stepmix
