// Scheduler settings the upstream goldens do not cover, held to trajectories
// of Diffusers' own UniPCMultistepScheduler (tests/data/scheduler-variants,
// training/make_scheduler_variant_cases.py): disable_corrector, the solver
// names Diffusers runs as bh2, lower_order_final with order 1, and the native
// grid near sigma 1. The model outputs of the reference's closed loop are
// replayed into stepmix's scheduler and every step's latent is compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sched/config.hpp"
#include "sched/unipc.hpp"
#include "sched_test_util.hpp"

namespace stepmix::sched {
namespace {

using nlohmann::json;

struct Replay {
  double worst = 0;  // max over steps of max|a − g| / max|g|
  bool schedule_same = false;
};

// `edit` changes the case's config first (to show what the case tells apart).
Replay replay(const std::string& name, const json& edit = json::object()) {
  const auto file = SafetensorsFile::open(stepmix::test::data_path("scheduler-variants/" + name + ".safetensors"));
  const auto& meta = file->metadata();
  json config = json::parse(meta.at("config"));
  config.update(edit);
  SchedulerConfig cfg = parse_scheduler_config(config, name + ".json");
  SchedulerOverrides o;
  o.native_flow_grid = meta.at("native_grid") == "1";
  apply_overrides(cfg, o);
  const int steps = std::stoi(meta.at("steps"));
  auto scheduler = make_scheduler(cfg);
  scheduler->set_timesteps(steps);
  const auto& unipc = dynamic_cast<const UniPCMultistepScheduler&>(*scheduler);

  Replay r;
  r.schedule_same = test::same_bits(scheduler->sigmas(), test::f32(*file, "sigmas")) &&
                    unipc.integer_timesteps() == test::i64(*file, "timesteps");
  std::vector<float> x = test::f32(*file, "sample");
  for (int k = 0; k < steps; ++k) {
    const std::vector<float> v = test::f32(*file, "model_output." + std::to_string(k));
    const std::vector<float> want = test::f32(*file, "sample." + std::to_string(k));
    scheduler->step(v, scheduler->timesteps()[std::size_t(k)], x);
    r.worst = std::max(r.worst, test::max_rel_err(x.data(), want.data(), x.size()));
  }
  return r;
}

// Bounds: UniPC's coefficients are float64 here and float32 tensors in
// Diffusers, which moves latents by ~3e-7 of their size at the goldens' step
// counts (the goldens' own bounds are 1e-6 to 5e-6); these cases land at
// the figures in the comments.
TEST(SchedulerVariants, DisableCorrectorSkipsTheCorrectorWhereDiffusersDoes) {
  const Replay r = replay("unipc_disable_corrector");
  EXPECT_TRUE(r.schedule_same);
  EXPECT_LT(r.worst, 2e-6) << r.worst;  // 1.7e-7
  // With the corrector running everywhere the same replay is far off.
  EXPECT_GT(replay("unipc_disable_corrector", {{"disable_corrector", json::array()}}).worst, 1e-3);
}

TEST(SchedulerVariants, MidpointRunsAsBh2AsInDiffusers) {
  const Replay r = replay("unipc_solver_type_midpoint");
  EXPECT_TRUE(r.schedule_same);
  EXPECT_LT(r.worst, 2e-6) << r.worst;  // 2.0e-7
}

TEST(SchedulerVariants, OrderOneWithoutLowerOrderFinalIsOrderOne) {
  const Replay r = replay("unipc_order1_no_lower_order_final");
  EXPECT_TRUE(r.schedule_same);
  EXPECT_LT(r.worst, 2e-6) << r.worst;  // 2.0e-7
}

// T = 10^6, shift 10: the native grid's sigma 0 comes within 1e-6 of 1 and is
// nudged, as Diffusers nudges the sigmas the pipeline passes (timestep 999998,
// where the grid alone gives 999999).
TEST(SchedulerVariants, TheNativeGridIsNudgedBelowOneAsDiffusersNudgesIt) {
  const Replay r = replay("unipc_native_grid_nudged");
  EXPECT_TRUE(r.schedule_same);
  EXPECT_LT(r.worst, 2e-6) << r.worst;  // 1.3e-7
}

}  // namespace
}  // namespace stepmix::sched

namespace stepmix::sched {
namespace {

std::string set_timesteps_error(UniPCOptions o, int steps) {
  try {
    UniPCMultistepScheduler s(o);
    s.set_timesteps(steps);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A schedule whose float32 sigmas repeat, or that starts at sigma 1, makes
// every runtime's latent NaN (the solver divides by a log-SNR difference of
// zero, or takes the log-SNR of 1): refused before any step, naming where.
TEST(SchedulerVariants, SchedulesTheSolverCannotStepAreRefusedBeforeAnyStep) {
  UniPCOptions karras;
  karras.use_karras_sigmas = true;
  karras.sigma_min = 0.147;
  karras.sigma_max = 1e8;  // sigma 0 = 1e8 / (1e8 + 1) is 1 in float32
  const std::string starts = set_timesteps_error(karras, 3);
  EXPECT_NE(starts.find("[scheduler] UniPC: the schedule starts at sigma 0 = 1, where the log-SNR is infinite"),
            std::string::npos)
      << starts;
  karras.sigma_max = 1e7;  // the first sigmas round to the same float32
  const std::string repeats = set_timesteps_error(karras, 35);
  EXPECT_NE(repeats.find("UniPC: sigma 0 = "), std::string::npos) << repeats;
  EXPECT_NE(repeats.find(" have the same float32 log-SNR: the solver divides by their difference"), std::string::npos)
      << repeats;
  // Distinct float32 sigmas a few steps apart: their float32 log-SNRs coincide.
  karras.sigma_min = 4.590496429735455e-4;
  karras.sigma_max = 4.5904979082932905e-4;
  const std::string close = set_timesteps_error(karras, 3);
  EXPECT_NE(close.find(" have the same float32 log-SNR"), std::string::npos) << close;
  karras.sigma_max = 200.0;  // the checkpoint file's range is fine
  EXPECT_EQ(set_timesteps_error(karras, 35), "");
}

}  // namespace
}  // namespace stepmix::sched
